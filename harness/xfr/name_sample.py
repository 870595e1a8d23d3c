"""What a server serves, checked at a sample of names against its copy of the zone as a file.

A secondary's copy on disk, once its sum equals the primary's, holds exactly the primary's
records; what is left to check is that the server serves that copy. ``draw`` picks the
sample: the apex, up to half of it from the names the last change touched (where an
incremental transfer goes wrong), the rest owner names at random places of the file (a
fixed seed: the same copy gives the same sample). ``expected`` reads their records from the
file, ``served`` asks the server for each name and type over one TCP connection, and
``differences`` says where they differ, one line each.

The file is a ``lines`` copy (harness.xfr.zone_copy): one record per line, a name's records
together, as every server writes its zone file. Servers write their names in canonical
order (RFC 4034 §6.1), so a name is found by bisecting the file; where that fails (a file in
another order: ``pdnsutil list-zone``, BIND's NSEC3 records after the rest) the file is
read through once for the names still missing.

RRSIG, NSEC and NSEC3 are not asked for: servers answer them with proofs or not at all, not
as the records of a name; the sum covers them.
"""

from __future__ import annotations

import os
import random
import socket
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dns.exception
import dns.flags
import dns.message
import dns.name
import dns.query
import dns.rdata
import dns.rdataclass
import dns.rdatatype

from harness.core.netns import socket_in
from harness.xfr import XfrError

SAMPLE_NAMES = 32  # names per check: a few milliseconds of queries
WINDOW = 1 << 16  # bytes read at a time
SEARCH_SCAN = 4 << 20  # bytes read on from where a bisection ends before giving up on it
_UNASKED = frozenset({dns.rdatatype.RRSIG, dns.rdatatype.NSEC, dns.rdatatype.NSEC3})
_CLASSES = frozenset({b"IN", b"CH", b"CHAOS", b"HS", b"HESIOD", b"NONE", b"ANY"})

Key = tuple[dns.name.Name, int]  # (owner, rdata type)
Held = tuple[int, frozenset[Any]]  # (TTL, rdata): one RRset as a copy holds or serves it


class SampleError(XfrError):
    """The sample could not be read from the copy or asked of the server."""


def _owner(line: bytes) -> bytes | None:
    """The owner of a record line, lower case; None for comments and blank lines."""
    fields = line.split(None, 1)
    if not fields or fields[0].startswith((b";", b"$")):
        return None
    return fields[0].lower()


class LinesFile:
    """A ``lines`` copy read in windows; its names by their records' lines."""

    def __init__(self, path: Path, origin: str) -> None:
        self.path = path
        self.origin = dns.name.from_text(origin)
        self._fh = open(path, "rb")  # noqa: SIM115 - closed by close()
        self.size = os.fstat(self._fh.fileno()).st_size

    def close(self) -> None:
        self._fh.close()

    def __enter__(self) -> LinesFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def name(self, owner: bytes) -> dns.name.Name:
        return dns.name.from_text(owner.decode(errors="replace"), self.origin)

    def lines_from(self, offset: int) -> Iterator[tuple[int, bytes]]:
        """(start, line) of every whole line starting at or after `offset`."""
        fd = self._fh.fileno()
        pos = offset
        if offset > 0:  # from the first line that starts at `offset` or after it
            while True:
                chunk = os.pread(fd, WINDOW, pos - 1)
                if not chunk:
                    return
                nl = chunk.find(b"\n")
                if nl >= 0:
                    pos += nl
                    break
                pos += len(chunk)
        rest = b""
        while True:
            chunk = os.pread(fd, WINDOW, pos + len(rest))
            if not chunk:
                if rest:
                    yield pos, rest
                return
            data = rest + chunk
            start = 0
            while (nl := data.find(b"\n", start)) >= 0:
                yield pos + start, data[start : nl + 1]
                start = nl + 1
            pos += start
            rest = data[start:]

    def block_after(self, offset: int) -> tuple[bytes, list[bytes]] | None:
        """The first name whose lines start after the name `offset` falls in, with its
        lines; None past the last name."""
        first: bytes | None = None
        name: bytes | None = None
        block: list[bytes] = []
        for _, line in self.lines_from(offset):
            owner = _owner(line)
            if owner is None:
                continue
            if first is None:
                first = owner
                continue
            if name is None:
                if owner == first:
                    continue
                name = owner
            if owner != name:
                break
            block.append(line)
        return (name, block) if name is not None else None

    def block_of(self, target: dns.name.Name) -> list[bytes] | None:
        """The lines of `target` by bisection (the file in canonical order); None when it
        is not found so."""
        lo, hi = 0, self.size
        while hi - lo > WINDOW:
            mid = (lo + hi) // 2
            first = next(
                ((start, o) for start, line in self.lines_from(mid) if (o := _owner(line))), None
            )
            if first is None or self._absolute(first[1]) >= target:
                hi = mid
            else:
                lo = first[0] + 1
        lines: list[bytes] = []
        for start, line in self.lines_from(lo):
            owner = _owner(line)
            if owner is None:
                continue
            name = self._absolute(owner)
            if name == target:
                lines.append(line)
            elif lines or name > target or start - lo > SEARCH_SCAN:
                break
        return lines or None

    def blocks_of(self, targets: Iterable[dns.name.Name]) -> dict[dns.name.Name, list[bytes]]:
        """Each target's lines (bisection, then one pass over the file for the rest);
        names the copy does not hold are left out."""
        found: dict[dns.name.Name, list[bytes]] = {}
        missing = set()
        for target in targets:
            lines = self.block_of(target)
            if lines is None:
                missing.add(target)
            else:
                found[target] = lines
        if missing:
            wanted = {n.to_text().lower().encode(): n for n in missing}
            for _, line in self.lines_from(0):
                owner = _owner(line)
                if owner is None:
                    continue
                name = wanted.get(self._absolute_text(owner))
                if name is not None:
                    found.setdefault(name, []).append(line)
        return found

    def _absolute_text(self, owner: bytes) -> bytes:
        if owner.endswith(b"."):
            return owner
        origin = self.origin.to_text().lower().encode()
        return origin if owner == b"@" else owner + b"." + origin

    def _absolute(self, owner: bytes) -> dns.name.Name:
        return self.name(self._absolute_text(owner))


def parse(line: bytes, origin: dns.name.Name) -> tuple[dns.name.Name, int, Any]:
    """(owner, TTL, rdata) of a ``lines`` record line (class IN when left out)."""
    fields = line.split(None, 2)
    try:
        name = dns.name.from_text(fields[0].decode(), origin)
        ttl = int(fields[1])
        rest = fields[2].split(None, 1)
        rdclass = dns.rdataclass.IN
        if rest[0].upper() in _CLASSES or rest[0].upper().startswith(b"CLASS"):
            rdclass = dns.rdataclass.from_text(rest[0].decode())
            rest = rest[1].split(None, 1)
        rdata = dns.rdata.from_text(
            rdclass, rest[0].decode(), rest[1].decode().strip(), origin, relativize=False
        )
    except (dns.exception.DNSException, ValueError, IndexError, UnicodeDecodeError) as exc:
        raise SampleError(f"cannot read the copy's line {line[:80]!r}: {exc}") from None
    return name, ttl, rdata


@dataclass
class Sample:
    """The names drawn and their records as the copy holds them; `absent`: (name, type)
    the last change deleted and the copy does not hold (they must not be served)."""

    names: list[dns.name.Name] = field(default_factory=list)
    expected: dict[Key, Held] = field(default_factory=dict)
    absent: set[Key] = field(default_factory=set)

    @property
    def keys(self) -> list[Key]:
        return sorted(set(self.expected) | self.absent)


def _rrsets(lines: list[bytes], origin: dns.name.Name) -> dict[Key, Held]:
    ttls: dict[Key, int] = {}
    rdatas: dict[Key, set[Any]] = {}
    for line in lines:
        name, ttl, rdata = parse(line, origin)
        if rdata.rdtype in _UNASKED:
            continue
        key = (name, int(rdata.rdtype))
        ttls.setdefault(key, ttl)
        rdatas.setdefault(key, set()).add(rdata)
    return {key: (ttls[key], frozenset(rdatas[key])) for key in rdatas}


def draw(
    path: Path,
    origin: str,
    changed: Iterable[Key],
    seed: int,
    size: int = SAMPLE_NAMES,
) -> Sample:
    """The sample of the copy in `path`: the apex, up to half of `size` among the owners
    of `changed` (the last change's (name, type)), the rest at random places in the file."""
    rng = random.Random(seed)
    apex = dns.name.from_text(origin)
    touched = sorted({name for name, _ in changed} - {apex})
    chosen = [apex, *rng.sample(touched, min(len(touched), size // 2))]
    sample = Sample()
    with LinesFile(path, origin) as copy:
        blocks = copy.blocks_of(chosen)
        for _ in range(size * 4):
            if len(chosen) >= size or copy.size == 0:
                break
            found = copy.block_after(rng.randrange(copy.size))
            if found is None:
                continue
            name = copy.name(copy._absolute_text(found[0]))
            if name in blocks or not _rrsets(found[1], apex):
                continue
            chosen.append(name)
            blocks[name] = found[1]
    sample.names = chosen
    for name in chosen:
        sample.expected.update(_rrsets(blocks.get(name, []), apex))
    for name, rdtype in changed:
        if name in chosen and (name, rdtype) not in sample.expected and rdtype not in _UNASKED:
            sample.absent.add((name, rdtype))
    return sample


def served(
    address: str, keys: Iterable[Key], *, netns: str | None, timeout: float, port: int = 53
) -> dict[Key, Held | None]:
    """What `address` serves for each (name, type), asked over one TCP connection from
    `netns`: the RRset of that name and type wherever the answer holds it (the answer; a
    referral's NS in authority; its glue in additional), None where it holds none."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    out: dict[Key, Held | None] = {}
    sock = socket_in(netns, family, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect((address, port))
        for name, rdtype in keys:
            query = dns.message.make_query(name, rdtype)
            query.flags &= ~dns.flags.RD
            answer = dns.query.tcp(query, address, timeout=timeout, sock=sock)
            out[(name, rdtype)] = None
            for section in (answer.answer, answer.authority, answer.additional):
                for rrset in section:
                    if rrset.name == name and rrset.rdtype == rdtype:
                        out[(name, rdtype)] = (rrset.ttl, frozenset(rrset))
    except (OSError, dns.exception.DNSException) as exc:
        raise SampleError(f"could not ask {address} for the sampled names: {exc}") from None
    finally:
        sock.close()
    return out


def _show(held: Held) -> str:
    ttl, rdatas = held
    return f"TTL {ttl} " + ", ".join(sorted(r.to_text() for r in rdatas))


def differences(sample: Sample, answers: dict[Key, Held | None]) -> list[str]:
    """One line per (name, type) served otherwise than the copy holds it."""
    out = []
    for key in sample.keys:
        name, rdtype = key
        what = f"{name} {dns.rdatatype.to_text(rdtype)}"
        want = sample.expected.get(key)
        got = answers.get(key)
        if want is None and got is not None:
            out.append(f"{what}: served ({_show(got)}) but not in the copy")
        elif want is not None and got is None:
            out.append(f"{what}: not served (the copy holds {_show(want)})")
        elif want is not None and got is not None and want != got:
            out.append(f"{what}: served {_show(got)}, the copy holds {_show(want)}")
    return out
