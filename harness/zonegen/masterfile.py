"""A streamed reader of RFC 1035 master files: any zone file an operator has, one record at
a time, in bounded memory, written back as one RR per line with absolute names, explicit TTL
and class (the form zonegen writes, the compiled RRSUM sums and every server loads).

It understands ``$ORIGIN``, ``$TTL``, ``$INCLUDE`` (relative to the zone's folder, and only
inside it), ``$GENERATE`` (BIND's ``start-stop[/step]`` with ``$``, ``${offset,width,base}``
and ``\\$``), parentheses over several lines, comments, quoted strings, an owner left blank
(the previous one), TTL and class in either order, and defaults as BIND applies them ($TTL,
else the last TTL given, else the SOA's minimum).

What it refuses, with the file and line: a line it cannot read, a record outside the zone, a
second SOA or one away from the apex, no SOA, no NS at the apex, an ``$INCLUDE`` leaving the
zone's folder. Record data is checked by the summer (``check_lines``): the compiled RRSUM
parses every record to wire form, so a record it cannot read is refused naming its line.

Why not dnspython's ``dns.zonefile.Reader``: it reads a character at a time (10 k records a
second: 23 minutes for a 14 M-record zone), silently drops records outside the zone and
opens ``$INCLUDE`` files relative to the working directory. Record data that holds a name
relative to ``$ORIGIN`` in a type this module does not know is still handed to dnspython,
one record at a time.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import dns.exception
import dns.name
import dns.rdata
import dns.rdataclass
import dns.rdatatype
import dns.ttl

from harness.core.errors import UserInputError

MAX_INCLUDE_DEPTH = 16
MAX_GENERATE = 10_000_000  # records one $GENERATE line may make
_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|(?:[^\s"\\]|\\.)+')
_GENERATE_MOD = re.compile(r"\$\{([-+]?\d+)?(?:,(\d+))?(?:,([doxXnN]))?\}|\$\$|\\\$|\$")
_RANGE = re.compile(r"^(\d+)-(\d+)(?:/(\d+))?$")
_CLASSES = frozenset({"IN"})
# Types whose data holds no domain name: written as given (whitespace normalised).
_NAME_FREE = frozenset(
    {
        *("A", "AAAA", "TXT", "SPF", "DS", "CDS", "DNSKEY", "CDNSKEY", "NSEC3", "NSEC3PARAM"),
        *("SSHFP", "TLSA", "SMIMEA", "CAA", "ZONEMD", "HINFO", "LOC", "OPENPGPKEY", "CERT"),
        *("URI", "EUI48", "EUI64", "DHCID", "NID", "L32", "L64", "CSYNC"),
    }
)
# Types with names at known positions of their data (made absolute here, cheaply).
_NAME_FIELDS = {
    "NS": (0,), "CNAME": (0,), "PTR": (0,), "DNAME": (0,), "NSEC": (0,), "MX": (1,),
    "KX": (1,), "AFSDB": (1,), "SRV": (3,), "SOA": (0, 1), "RP": (0, 1), "RRSIG": (7,),
}  # fmt: skip
_FIX = "correct the line, or check the file with `named-checkzone <origin> <file>`"


@dataclass
class Facts:
    """What reading a zone told: its origin, SOA serial, records and their type mix, and
    every file it read (the zone file first, then its includes)."""

    origin: str
    serial: int = 0
    records: int = 0
    types: Counter[str] = field(default_factory=Counter)
    files: list[Path] = field(default_factory=list)
    apex_ns: int = 0


@dataclass(frozen=True)
class Where:
    file: Path
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


def refuse(where: Where | Path, problem: str, fix: str = _FIX) -> UserInputError:
    return UserInputError(problem, file=str(where), fix=fix)


def tokens(text: str) -> list[str]:
    if '"' not in text and "\\" not in text:
        return text.split()
    return _TOKENS.findall(text)


def _strip_comment(line: str) -> str:
    if ";" not in line:
        return line
    if '"' not in line and "\\" not in line:
        return line.split(";", 1)[0]
    quoted = escaped = False
    for i, c in enumerate(line):
        if escaped:
            escaped = False
        elif c == "\\":
            escaped = True
        elif c == '"':
            quoted = not quoted
        elif c == ";" and not quoted:
            return line[:i]
    return line


def _parens(line: str) -> int:
    """Open minus closed parentheses outside quotes."""
    if '"' not in line:
        return line.count("(") - line.count(")")
    depth, quoted = 0, False
    for c in line:
        if c == '"':
            quoted = not quoted
        elif not quoted:
            depth += (c == "(") - (c == ")")
    return depth


def logical_lines(path: Path) -> Iterator[tuple[int, bool, str]]:
    """(line number, starts with blank, text without comments and parentheses) per
    logical line of one file: lines joined where parentheses span them."""
    with open(path, encoding="utf-8", errors="surrogateescape") as fh:
        pending: list[str] = []
        start, blank, depth = 0, False, 0
        for number, raw in enumerate(fh, 1):
            text = _strip_comment(raw)
            if not pending:
                if not text.strip():
                    continue
                start, blank = number, text[0] in " \t"
            pending.append(text)
            depth += _parens(text)
            if depth < 0:
                raise refuse(Where(path, number), "a ')' closes no '('")
            if depth == 0:
                joined = " ".join(pending)
                if "(" in joined or ")" in joined:
                    joined = _drop_parens(joined)
                pending = []
                yield start, blank, joined
        if pending:
            raise refuse(Where(path, start), "a '(' is never closed")


def _drop_parens(text: str) -> str:
    if '"' not in text:
        return text.replace("(", " ").replace(")", " ")
    out, quoted = [], False
    for c in text:
        if c == '"':
            quoted = not quoted
        out.append(" " if c in "()" and not quoted else c)
    return "".join(out)


def absolute(name: str, origin: str) -> str:
    """A name as written, absolute (``@`` is the origin)."""
    if name == "@":
        return origin
    if name.endswith(".") and not name.endswith("\\."):
        return name
    return f"{name}.{origin}" if origin != "." else f"{name}."


def in_zone(name: str, origin: str) -> bool:
    low = name.lower()
    return low == origin or low.endswith("." + origin)


class _State:
    """One file's reading state: what $INCLUDE saves and restores."""

    def __init__(self, origin: str | None, ttl: int | None) -> None:
        self.origin = origin
        self.default_ttl = ttl
        self.owner: str | None = None


class Reader:
    """Reads a zone file and its includes; ``records()`` yields (where, normalised line)."""

    def __init__(self, path: Path, origin: str | None = None) -> None:
        self.path = Path(path)
        self.folder = self.path.resolve().parent
        self.given = origin
        self.facts = Facts(origin or "")
        self.last_ttl: int | None = None
        self.soa_at: Where | None = None

    # --- directives ----------------------------------------------------------------------

    def _include(self, where: Where, fields: list[str], state: _State, depth: int) -> Path:
        if len(fields) not in (2, 3):
            raise refuse(where, "$INCLUDE takes a file name and an optional origin")
        target = (self.folder / fields[1].strip('"')).resolve()
        if not target.is_relative_to(self.folder):
            raise refuse(
                where,
                f"$INCLUDE {fields[1]} leaves the zone's folder {self.folder}",
                "put the included file in the zone file's folder (or below it)",
            )
        if not target.is_file():
            raise refuse(where, f"$INCLUDE {fields[1]}: no such file ({target})")
        if depth >= MAX_INCLUDE_DEPTH:
            raise refuse(where, f"$INCLUDE nested more than {MAX_INCLUDE_DEPTH} deep (a loop?)")
        return target

    def _ttl(self, where: Where, text: str) -> int:
        try:
            return int(dns.ttl.from_text(text))
        except dns.exception.DNSException:
            raise refuse(where, f"{text!r} is not a TTL") from None

    # --- records -------------------------------------------------------------------------

    def records(self) -> Iterator[tuple[Where, str]]:
        yield from self._file(self.path, _State(self.given, None), 0)
        if self.soa_at is None:
            raise refuse(
                Where(self.path, 1), "the zone has no SOA record", "add the zone's SOA at its apex"
            )
        if self.facts.apex_ns == 0:
            raise refuse(
                self.soa_at,
                f"the zone has no NS record at its apex {self.facts.origin}",
                "add the apex NS records (the zone's name servers)",
            )

    def _file(self, path: Path, state: _State, depth: int) -> Iterator[tuple[Where, str]]:
        self.facts.files.append(path)
        for number, blank, text in logical_lines(path):
            where = Where(path, number)
            if text.lstrip().startswith("$"):
                fields = tokens(text)
                word = fields[0].upper()
                if word == "$ORIGIN" and len(fields) == 2:
                    state.origin = absolute(fields[1], state.origin or ".").lower()
                elif word == "$TTL" and len(fields) == 2:
                    state.default_ttl = self._ttl(where, fields[1])
                elif word == "$INCLUDE":
                    target = self._include(where, fields, state, depth)
                    inner = _State(state.origin, state.default_ttl)
                    if len(fields) == 3:
                        inner.origin = absolute(fields[2], state.origin or ".").lower()
                    yield from self._file(target, inner, depth + 1)
                elif word == "$GENERATE":
                    for line in generate_lines(where, fields):
                        yield where, self._record(where, False, line, state)
                else:
                    raise refuse(where, f"cannot read the directive {text.strip()!r}")
                continue
            yield where, self._record(where, blank, text, state)

    def _record(self, where: Where, blank: bool, text: str, state: _State) -> str:
        fields = tokens(text)
        if blank:
            if state.owner is None:
                raise refuse(where, "the first record has no owner name")
            owner = state.owner
        else:
            if state.origin is None:  # no $ORIGIN yet: the zone's, once its SOA was read
                state.origin = self.facts.origin or None
            if state.origin is None and not fields[0].endswith("."):
                raise refuse(
                    where,
                    f"the relative name {fields[0]!r} comes before any $ORIGIN",
                    "add $ORIGIN, or set [zones] origin",
                )
            owner = absolute(fields.pop(0), state.origin or ".")
            state.owner = owner
        ttl: int | None = None
        for _ in range(2):
            if fields and fields[0].upper() in _CLASSES:
                fields.pop(0)
            elif fields and fields[0][:1].isdigit() and ttl is None:
                ttl = self._ttl(where, fields.pop(0))
        if not fields:
            raise refuse(where, "the record has no type")
        rtype = fields.pop(0).upper()
        try:
            rtype = dns.rdatatype.to_text(dns.rdatatype.from_text(rtype))
        except dns.exception.DNSException:
            problem = f"{rtype!r} is not a record type (or the class is not IN)"
            raise refuse(where, problem) from None
        if not fields:
            raise refuse(where, f"the {rtype} record has no data")
        if rtype == "SOA":
            self._soa(where, owner, fields)
            if ttl is None and state.default_ttl is None and self.last_ttl is None:
                state.default_ttl = self._ttl(where, fields[-1])
        origin = self._origin_known(where, owner)
        if not in_zone(owner, origin):
            raise refuse(
                where,
                f"{owner} is outside the zone {origin}",
                "remove the record, or check $ORIGIN (a name without its final dot is "
                "relative to it)",
            )
        if ttl is None:
            ttl = state.default_ttl if state.default_ttl is not None else self.last_ttl
            if ttl is None:
                raise refuse(where, "no TTL: the record has none and no $TTL came before it")
        else:
            self.last_ttl = ttl
        rdata = self._rdata(where, rtype, fields, state.origin or origin)
        facts = self.facts
        facts.records += 1
        facts.types[rtype] += 1
        if rtype == "NS" and owner.lower() == origin:
            facts.apex_ns += 1
        return f"{owner}\t{ttl}\tIN\t{rtype}\t{rdata}\n"

    def _origin_known(self, where: Where, owner: str) -> str:
        if not self.facts.origin:
            raise refuse(
                where,
                f"the first record ({owner}) is not an SOA: no SOA comes before it, so the "
                "zone's origin is unknown",
                "put the SOA first, or set [zones] origin",
            )
        return self.facts.origin

    def _soa(self, where: Where, owner: str, fields: list[str]) -> None:
        if self.soa_at is not None:
            raise refuse(where, f"a second SOA (the first is at {self.soa_at})")
        low = owner.lower()
        if self.given is not None and low != self.given:
            raise refuse(
                where,
                f"the SOA is for {low}, not for the origin {self.given} the scenario names",
                f"set [zones] origin = {low!r}, or remove it (the SOA's owner is the origin)",
            )
        self.facts.origin = low
        self.soa_at = where
        try:
            self.facts.serial = int(fields[2])
        except (IndexError, ValueError):
            raise refuse(where, "the SOA has no serial number as its third field") from None

    def _rdata(self, where: Where, rtype: str, fields: list[str], origin: str) -> str:
        if rtype in _NAME_FREE or fields[0] == "\\#":
            return " ".join(fields)
        positions = _NAME_FIELDS.get(rtype)
        if positions is not None and len(fields) > max(positions):
            for i in positions:
                fields[i] = absolute(fields[i], origin)
            return " ".join(fields)
        try:  # a type not known here: dnspython writes its names absolute
            rd = dns.rdata.from_text(
                dns.rdataclass.IN, rtype, " ".join(fields), dns.name.from_text(origin)
            )
        except Exception as exc:  # dnspython raises many types for bad data
            raise refuse(where, f"bad {rtype} data: {exc}") from None
        return rd.to_text(origin=None, relativize=False)


def generate_lines(where: Where, fields: list[str]) -> Iterator[str]:
    """The record lines of a $GENERATE directive (BIND's syntax)."""
    if len(fields) < 4:
        raise refuse(where, "$GENERATE takes a range, an owner, a type and data")
    bounds = _RANGE.match(fields[1])
    if bounds is None:
        raise refuse(where, f"$GENERATE range {fields[1]!r} is not start-stop[/step]")
    start, stop, step = int(bounds[1]), int(bounds[2]), int(bounds[3] or 1)
    if stop < start or step < 1 or (stop - start) // step >= MAX_GENERATE:
        raise refuse(where, f"$GENERATE range {fields[1]!r} is empty or too large")
    template = " ".join(fields[2:])
    for i in range(start, stop + 1, step):
        yield _GENERATE_MOD.sub(lambda m, i=i: _substitute(where, m, i), template)


def _substitute(where: Where, match: re.Match[str], i: int) -> str:
    text = match[0]
    if text == "\\$":
        return "$"
    if text == "$$":
        return "$"
    if text == "$":
        return str(i)
    offset, width, base = int(match[1] or 0), int(match[2] or 0), match[3] or "d"
    value = i + offset
    if base in "nN":
        nibbles = f"{value:0{max(width, 1)}x}"[::-1]
        out = ".".join(nibbles)
        return out.upper() if base == "N" else out
    return format(value, f"0{width}{base}")
