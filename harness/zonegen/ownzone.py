"""An operator's own zone files: read once (masterfile.py), cached by content, and their
change history as change sets.

``load`` hashes the file and what it ``$INCLUDE``s (a cheap pass), and on a cache miss reads
it record by record into ``<cache>/file-<origin>-<hash>-v<N>/<origin>zone``: one RR per line,
absolute names, the form zonegen writes, so everything after (the reference sum, BIND's raw
conversion, the primary's zone file) treats it as a generated zone. ``check``, when given,
sees the written lines in batches (the compiled RRSUM, which parses every record's data:
zonegen cannot import it) and a batch it refuses is searched for the line, named in the
source file.

Versions: the zone at serial ``base + k`` is version k of the history (version 0 is loaded).
Each version's SOA is the first version's with the serial ``base + k``: the harness's serials
count publishes, and a dynamic update keeps the serving SOA's other fields, so the reference
stays what the primary serves whichever way it publishes. The change set from version k-1 to
k is the difference of the two as sorted record streams (``sort -u``, then a merge), in the
RFC 1995 order zonegen's change sets have; memory stays bounded for any size.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from harness.core.errors import UserInputError
from harness.zonegen import cache
from harness.zonegen.masterfile import Reader, Where, refuse

READER_VERSION = 1
BATCH_LINES = 20_000
SORTED = "records.sorted"
_INCLUDE = re.compile(rb"^\$INCLUDE\s+(\S+)", re.IGNORECASE | re.MULTILINE)

Check = Callable[[bytes], Any]


@dataclass(frozen=True)
class OwnZone:
    """A zone file read: its source, the normalised copy, and what reading it found."""

    source: Path
    origin: str
    path: Path  # the normalised copy in the cache
    serial: int
    records: int
    bytes: int
    types: dict[str, int]
    soa: str  # the SOA's line in the copy
    digest: str  # sha256 of the source and its includes
    cached: bool

    @property
    def entry(self) -> Path:
        return self.path.parent

    def type_mix(self, top: int = 6) -> str:
        """ "NS 52 %, DS 21 %, ...": the most frequent types' shares of the records."""
        ranked = sorted(self.types.items(), key=lambda item: (-item[1], item[0]))
        parts = [f"{t} {100 * n / max(1, self.records):.0f} %" for t, n in ranked[:top]]
        if len(ranked) > top:
            parts.append(f"{len(ranked) - top} more types")
        return ", ".join(parts)


def content_digest(path: Path) -> str:
    """sha256 over the file and, recursively, the files it $INCLUDEs (those the reader
    would open; a bad include is the reader's to refuse)."""
    folder = path.resolve().parent
    digest = hashlib.sha256()
    seen: set[Path] = set()

    def feed(file: Path, depth: int) -> None:
        if file in seen or depth > 16:
            return
        seen.add(file)
        included: list[bytes] = []
        with open(file, "rb") as fh:
            while chunk := fh.read(1 << 22):
                digest.update(chunk)
                if b"$" in chunk:  # a directive may straddle a chunk: the reader is the judge
                    included += _INCLUDE.findall(chunk)
        digest.update(b"\0" + str(file.relative_to(folder)).encode() + b"\0")
        for name in included:
            target = (folder / name.decode("utf-8", "replace").strip('"')).resolve()
            if target.is_relative_to(folder) and target.is_file():
                feed(target, depth + 1)

    feed(path.resolve(), 0)
    return digest.hexdigest()


def _entry_name(origin: str | None, digest: str) -> str:
    label = (origin or "auto").rstrip(".") or "root"
    return f"file-{label}-{digest[:24]}-v{READER_VERSION}"


def _from_meta(source: Path, entry: Path, meta: dict[str, Any], cached: bool) -> OwnZone:
    item = meta["files"][0]
    return OwnZone(source, meta["origin"], entry / item["file"], meta["serial"],
                   item["records"], item["bytes"], dict(meta["types"]), meta["soa"],
                   meta["digest"], cached)  # fmt: skip


def load(
    source: Path | str, origin: str | None = None, *, check: Check | None = None,
    cache_dir: Path | None = None,
) -> OwnZone:  # fmt: skip
    """The zone file ``source`` read and cached (see the module docstring). ``origin``:
    the origin the scenario names, which the SOA must own (None: the SOA's owner)."""
    source = Path(source)
    if not source.is_file():
        raise UserInputError("no such zone file", file=source, fix="give the path of a zone file")
    digest = content_digest(source)
    root = cache.cache_root(cache_dir)
    cache.sweep_stale(root)
    name = _entry_name(origin, digest)
    meta = cache.read_meta(root / name)
    if meta is not None:
        return _from_meta(source, root / name, meta, True)
    with cache.building(root, name) as tmp:
        meta = _read_into(source, origin, tmp, check, digest)
    return _from_meta(source, root / name, meta, False)


def _read_into(
    source: Path, origin: str | None, folder: Path, check: Check | None, digest: str
) -> dict[str, Any]:
    reader = Reader(source, origin)
    batch: list[tuple[Where, str]] = []
    soa = ""
    size = 0
    out = folder / "zone"  # renamed once the origin is known
    with open(out, "w", encoding="utf-8", errors="surrogateescape", buffering=1 << 20) as fh:
        for where, line in reader.records():
            if not soa and reader.soa_at == where and "\tSOA\t" in line:
                soa = line
            batch.append((where, line))
            if len(batch) >= BATCH_LINES:
                size += _flush(fh, batch, check)
        size += _flush(fh, batch, check)
    facts = reader.facts
    name = f"{facts.origin}zone"
    os.rename(out, folder / name)
    meta = {
        "source": str(source.resolve()),
        "origin": facts.origin,
        "serial": facts.serial,
        "types": dict(facts.types),
        "soa": soa,
        "digest": digest,
        "includes": [str(p) for p in facts.files[1:]],
        "files": [{"file": name, "records": facts.records, "bytes": size}],
    }
    cache.write_meta(folder, meta)
    return meta


def _flush(fh: IO[str], batch: list[tuple[Where, str]], check: Check | None) -> int:
    text = "".join(line for _, line in batch)
    if check is not None and batch:
        try:
            check(text.encode("utf-8", "surrogateescape"))
        except ValueError:
            for where, line in batch:
                try:
                    check(line.encode("utf-8", "surrogateescape"))
                except ValueError as exc:
                    shown = " ".join(line.split())
                    raise refuse(where, f"cannot read the record {shown!r}: {exc}") from None
            raise
    fh.write(text)
    batch.clear()
    return len(text.encode("utf-8", "surrogateescape"))


# --- versions ----------------------------------------------------------------------------


def version_files(given: Path) -> list[Path]:
    """A folder's versions: its files in name order, leaving out hidden ones and those
    another file of the folder $INCLUDEs."""
    files = sorted(p for p in given.iterdir() if p.is_file() and not p.name.startswith("."))
    included: set[Path] = set()
    for file in files:
        with open(file, "rb") as fh:
            for name in _INCLUDE.findall(fh.read()):
                included.add((given / name.decode("utf-8", "replace").strip('"')).resolve())
    return [p for p in files if p.resolve() not in included]


def load_versions(
    paths: list[Path], origin: str | None, *, check: Check | None = None,
    cache_dir: Path | None = None,
) -> list[OwnZone]:  # fmt: skip
    """Every version read, the same origin in each, serials increasing (RFC 1982)."""
    zones: list[OwnZone] = []
    for path in paths:
        zone = load(path, origin or (zones[0].origin if zones else None), check=check,
                    cache_dir=cache_dir)  # fmt: skip
        if zones and not _serial_gt(zone.serial, zones[-1].serial):
            before = zones[-1]
            raise UserInputError(
                f"version {len(zones) + 1}'s SOA serial {zone.serial} does not increase on "
                f"{before.source.name}'s {before.serial}",
                file=f"{path}:{_soa_line(path)}",
                fix=f"raise its serial above {before.serial}, or list the versions in order",
            )
        zones.append(zone)
    return zones


def _serial_gt(a: int, b: int) -> bool:
    return a != b and ((a < b and b - a > 2**31) or (a > b and a - b < 2**31))


def _soa_line(path: Path) -> int:
    with open(path, "rb") as fh:
        for number, line in enumerate(fh, 1):
            if re.search(rb"\sSOA\s", line, re.IGNORECASE):
                return number
    return 1


def with_serial(soa_line: str, serial: int) -> str:
    owner, ttl, cls, rtype, rdata = soa_line.rstrip("\n").split("\t", 4)
    fields = rdata.split()
    fields[2] = str(serial)
    return f"{owner}\t{ttl}\t{cls}\t{rtype}\t{' '.join(fields)}\n"


def sorted_records(zone: OwnZone) -> Path:
    """The zone's records but its SOA, sorted and unique (``sort -u``, bounded memory),
    kept in its cache entry."""
    target = zone.entry / SORTED
    if target.exists():
        return target
    tmp = zone.entry / f".{SORTED}.tmp-{os.getpid()}"
    env = {**os.environ, "LC_ALL": "C"}
    with open(zone.path, "rb") as src, open(tmp, "wb") as out:
        proc = subprocess.Popen(
            ["sort", "-u", "-S", "256M", "-T", str(zone.entry)], stdin=subprocess.PIPE,
            stdout=out, env=env,
        )  # fmt: skip
        assert proc.stdin is not None
        for line in src:
            if line != zone.soa.encode("utf-8", "surrogateescape"):
                proc.stdin.write(line)
        proc.stdin.close()
        if proc.wait() != 0:
            raise OSError(f"sort failed for {zone.path}")
    os.replace(tmp, target)
    return target


def diff_streams(old: IO[bytes], new: IO[bytes]) -> Iterator[tuple[str, bytes]]:
    """("-", line) for lines only in ``old``, ("+", line) for lines only in ``new``: a
    merge of two sorted streams (byte order, as ``sort`` with LC_ALL=C)."""
    a, b = old.readline(), new.readline()
    while a or b:
        if a and (not b or a < b):
            yield "-", a
            a = old.readline()
        elif b and (not a or b < a):
            yield "+", b
            b = new.readline()
        else:
            a, b = old.readline(), new.readline()


def _copy_with_soa(zone: OwnZone, soa: str, target: Path) -> int:
    old = zone.soa.encode("utf-8", "surrogateescape")
    size = 0
    with open(zone.path, "rb") as src, open(target, "wb", buffering=1 << 20) as out:
        for line in src:
            line = soa.encode() if line == old else line
            out.write(line)
            size += len(line)
    return size


def version_change(
    chain: list[OwnZone], base: int, serial_to: int, *, whole_zone: bool,
    cache_dir: Path | None = None,
) -> dict[str, Any]:  # fmt: skip
    """The change set to ``serial_to`` = base + k: from version k-1 to k of ``chain`` (a
    chain of one: the same records under a new serial). Returns its cache entry's meta,
    with ``entry`` its folder."""
    k = serial_to - base
    if k < 1:
        raise ValueError(f"serial {serial_to} is not above the base serial {base}")
    if len(chain) > 1 and k >= len(chain):
        raise UserInputError(
            f"publishing serial {serial_to} needs version {k + 1}, and the history has "
            f"{len(chain)}",
            key="zones.versions",
            fix="give more versions, or fewer repeats",
        )
    before, after = (chain[k - 1], chain[k]) if len(chain) > 1 else (chain[0], chain[0])
    first = chain[0]
    root = cache.cache_root(cache_dir)
    name = (f"file-changes-{before.digest[:16]}-{after.digest[:16]}-{first.digest[:8]}"
            f"-to{serial_to}-{'whole' if whole_zone else 'diff'}-v{READER_VERSION}")  # fmt: skip
    meta = cache.read_meta(root / name)
    if meta is None:
        with cache.building(root, name) as tmp:
            meta = _build_change(before, after, first, base, serial_to, whole_zone, tmp)
    return meta | {"entry": str(root / name)}


def _build_change(
    before: OwnZone, after: OwnZone, first: OwnZone, base: int, serial_to: int,
    whole_zone: bool, folder: Path,
) -> dict[str, Any]:  # fmt: skip
    soa_from = with_serial(first.soa, serial_to - 1)
    soa_to = with_serial(first.soa, serial_to)
    deleted = added = 0
    size = 0
    removed = folder / "removed"
    with open(sorted_records(before), "rb") as old, open(sorted_records(after), "rb") as new, \
            open(removed, "wb") as minus, open(folder / "added", "wb") as plus:  # fmt: skip
        for sign, line in diff_streams(old, new):
            (minus if sign == "-" else plus).write(line)
            size += len(line)
            if sign == "-":
                deleted += 1
            else:
                added += 1
    diff = folder / f"{first.origin}zone.diff"
    with open(diff, "wb") as out:
        header = (f"; xfrbench change set for {first.origin}: serial {serial_to - 1} -> "
                  f"{serial_to}, {deleted} deleted, {added} added (RFC 1995 order)\n")  # fmt: skip
        out.write(header.encode() + soa_from.encode())
        with open(removed, "rb") as part:
            out.writelines(part)
        out.write(soa_to.encode())
        with open(folder / "added", "rb") as part:
            out.writelines(part)
    removed.unlink()
    (folder / "added").unlink()
    files = []
    if whole_zone:
        zone_size = _copy_with_soa(after, soa_to, folder / f"{first.origin}zone")
        files = [{"file": f"{first.origin}zone", "bytes": zone_size, "records": after.records}]
    meta = {
        "origin": first.origin,
        "serial_from": serial_to - 1,
        "serial_to": serial_to,
        "zone": f"{first.origin}zone",
        "diff": diff.name,
        "added": added,
        "deleted": deleted,
        "changed_bytes": size,
        "records": after.records,
        "version": str(after.source),
        "files": files,
    }
    cache.write_meta(folder, meta)
    return meta


_MEMO: dict[tuple[Any, ...], OwnZone] = {}


def _memo_load(path: Path, origin: str | None, cache_dir: Path | None) -> OwnZone:
    """load(), remembered in this process while the file and its cache entry are
    unchanged: a change set per publish would otherwise hash every version again."""
    st = path.stat()
    key = (str(path), origin, str(cache_dir), st.st_ino, st.st_size, st.st_mtime_ns)
    zone = _MEMO.get(key)
    if zone is None or not zone.path.exists():
        zone = _MEMO[key] = load(path, origin, cache_dir=cache_dir)
    return zone


def chain(spec: Any, cache_dir: Path | None = None) -> list[OwnZone]:
    """A file spec's zones: its versions in order, or its one file."""
    paths = [Path(p) for p in (spec.versions or (spec.file,))]
    zones = [_memo_load(paths[0], spec.origin, cache_dir)]
    zones += [_memo_load(p, zones[0].origin, cache_dir) for p in paths[1:]]
    return zones


def facts(spec: Any, cache_dir: Path | None = None) -> dict[str, Any]:
    """What run.json keeps of an operator's zone: its origin, file, versions, records and
    their types (of the loaded version), for the report to name it by."""
    zones = chain(spec, cache_dir)
    first = zones[0]
    return {
        "origin": first.origin,
        "file": str(first.source),
        "versions": len(zones),
        "records": first.records,
        "bytes": first.bytes,
        "types": dict(first.types),
        "type_mix": first.type_mix(),
    }
