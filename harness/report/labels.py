"""Case names as people read them (pure): "tld 10 k · XoT · IXFR" for the machine key
"preset=tld,records=10000/xot/ixfr".

A case's name is made of its parts, "/" between them (spec/loader.py): the server pair
("bind-bind", a fleet's "bind-bind+knot+nsd"), the matrix values that are not server kinds
("preset=tld,records=10000", "delay=75ms", a table's own label), the transport, the
transfer kind and a fault's name. Each part is read back here into words; the machine key
stays what transfers.jsonl, summary.json, summary.csv and the page's data-* attributes
hold. The report shortens names once (data.py Labels) and then words each label once.
"""

from __future__ import annotations

from pathlib import PurePath

from harness.core.terms import TRANSPORTS, XFR_KINDS
from harness.servers import DIALECTS

SEPARATOR = " · "
TRANSPORT_WORDS = {"tcp": "TCP", "tcp-tsig": "TCP+TSIG", "xot": "XoT", "xot-tsig": "XoT+TSIG"}
assert set(TRANSPORT_WORDS) == set(TRANSPORTS)  # a new transport needs its words here
ANY = "*"  # short_labels' mark for a part that differs between cases


def count_words(value: str) -> str:
    """ "10000" -> "10 k", "1000000" -> "1 M", "1500" -> "1.5 k"; anything else as given."""
    if not value.isdigit():
        return value
    number = int(value)
    for unit, scale in (("M", 1_000_000), ("k", 1000)):
        if number >= scale:
            return f"{number / scale:.3g} {unit}"
    return value


def _server(kind: str) -> str | None:
    dialect = DIALECTS.get(kind)  # type: ignore[call-overload]
    return dialect.title if dialect is not None else None


def pair_words(part: str) -> str | None:
    """ "bind-knot" -> "BIND → Knot"; a fleet's "bind-bind+knot+nsd" -> "BIND → BIND,
    Knot, NSD"; None when the part is no pair of server kinds."""
    primary, dash, fleet = part.partition("-")
    if not dash or _server(primary) is None:
        return None
    kinds = [_server(kind) for kind in fleet.split("+")]
    if not kinds or None in kinds:
        return None
    return f"{_server(primary)} → {', '.join(k for k in kinds if k)}"


def _values(part: str) -> dict[str, str] | None:
    """ "preset=tld,records=10000" -> {"preset": "tld", "records": "10000"}; None when the
    part is no list of key=value."""
    out = {}
    for item in part.split(","):
        key, eq, value = item.partition("=")
        if not eq or not key:
            return None
        out[key] = value
    return out


def values_words(values: dict[str, str]) -> str:
    """A matrix value in words: a zone as its preset and size ("tld 10 k", "hosting 100
    zones", "tiny") or its file's name; any other key as "key value"."""
    values = dict(values)
    words = []
    if "file" in values:
        words.append(PurePath(values.pop("file")).name)
        values.pop("preset", None)
    elif "preset" in values:
        words.append(values.pop("preset"))
        if "records" in values:
            words[-1] += f" {count_words(values.pop('records'))}"
        if "zones" in values:
            zones = values.pop("zones")
            words[-1] += f" {count_words(zones)} zone{'s' if zones != '1' else ''}"
    words += [f"{key.replace('_', ' ')} {count_words(value)}" for key, value in values.items()]
    return ", ".join(words)


def part_words(part: str) -> str:
    """One part of a case name in words."""
    if part in TRANSPORT_WORDS:
        return TRANSPORT_WORDS[part]
    if part in XFR_KINDS:
        return part.upper()
    if part == ANY:
        return part
    pair = pair_words(part)
    if pair is not None:
        return pair
    values = _values(part)
    if values is not None:
        return values_words(values)
    return part  # a table's own label, a fault's name: words already


def readable(name: str) -> str:
    """A case name (or a part of one, as short_labels leaves it) in words; what a label
    adds after the name stays as it is: a fleet site ("axfr @ near") or a client pull's
    method ("axfr [pull-own]")."""
    if not name:
        return name
    cut = min((i for i in (name.find(" @ "), name.find(" [")) if i >= 0), default=len(name))
    head, tail = name[:cut], name[cut:]
    return SEPARATOR.join(part_words(part) for part in _parts(head)) + tail


def _parts(name: str) -> list[str]:
    """The parts of a name: split at "/", but a zone file's path ("file=zones/v01.zone")
    kept whole up to the next part that is a matrix value, a transport or a kind."""
    parts: list[str] = []
    for part in name.split("/"):
        follows = parts and "file=" in parts[-1] and "=" not in part
        if follows and part not in TRANSPORT_WORDS and part not in XFR_KINDS and part != ANY:
            parts[-1] += "/" + part
        else:
            parts.append(part)
    return parts


def readable_labels(short: dict[str, str]) -> dict[str, str]:
    """Each short label in words; the short labels as they were when two would read alike
    (a label must tell its case apart)."""
    words = {name: readable(label) for name, label in short.items()}
    return words if len(set(words.values())) == len(words) else dict(short)
