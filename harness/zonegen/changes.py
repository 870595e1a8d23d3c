"""IXFR workloads: change sets that take a zone from serial N to N+1, composed over k steps.

A chain of change sets is defined by (spec, changes). Change set j (j = 1, 2, ...) makes
``changes // 2`` "replace" edits, each deleting one record and adding one with the same owner
and type but new data (a delegation switching provider: NS; a key rollover: DS; a site moving:
A/AAAA; ...), plus one more addition when ``changes`` is odd (a new DS, or a TXT in small
zones). So it deletes ``changes // 2`` records and adds ``changes - changes // 2``, and the zone
at serial base + k is the base zone with change sets 1..k applied in order.

tld: every change set touches its own delegations, picked by a seeded bijection of the full
delegations (``perm(q)`` for q in ``(j-1)*m .. j*m-1``), so a delegation is edited at most once
along the chain and the zone at any serial is rendered by streaming the base generator with a
few overridden delegations: memory grows with the number of changes, never with the zone.

tiny and hosting: the zone is small, so the chain is replayed in memory. For hosting, only the
first zone (index 0) changes; ``zone_path`` is that zone's file.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from harness.core.errors import UserInputError
from harness.zonegen import cache, ownzone, small, tld
from harness.zonegen.generate import cache_key, write_lines_file, zone_file_name
from harness.zonegen.model import MAX_SERIAL, ChangeSet, ZoneSpec, validate
from harness.zonegen.tables import ds_rdata, ns_pool

DIFF_SUFFIX = ".diff"
_TTL_NEW = 300


def split_counts(changes: int) -> tuple[int, int]:
    deletions = changes // 2
    return deletions, changes - deletions


def _fields(line: str) -> list[str]:
    return line.rstrip("\n").split("\t", 4)


def mutate(
    line: str, j: int, u: int, seed: int, pool: tuple[tuple[str, str], ...], siblings: Iterable[str]
) -> str:
    """A replacement for ``line``: same owner, TTL and type, new data, different from the
    data of every record of that RRset (``siblings`` are other lines of the same zone part).
    Unique per (seed, change set j, edit u)."""
    owner, ttl, cls, rtype, rdata = _fields(line)
    taken = {rdata} | {f[4] for f in map(_fields, siblings) if f[0] == owner and f[3] == rtype}
    h = small.mix64(small.mix64(seed) ^ (j << 24) ^ u)
    provider = pool[h % len(pool)][0].split(".", 1)[1]

    def candidate(t: int) -> str:
        if rtype == "NS":
            # Switch to another provider's server (out of zone, so no glue needed).
            return pool[(h + t) % len(pool)][t % 2]
        if rtype == "DS":
            return ds_rdata(random.Random(f"xfrbench-ds:{seed}:{j}:{u}:{t}"))
        if rtype == "A":
            return small.ip4_from(small.mix64(h + t))
        if rtype == "AAAA":
            return f"2a00:{j & 0xFFFF:x}:{(j >> 16) & 0xFFFF:x}:{u & 0xFFFF:x}::{t + 1:x}"
        if rtype == "MX":
            pref, target = rdata.split()
            return f"{10 + (int(pref) - 9 + t) % 80} {target}"
        if rtype == "TXT":
            return f'"v=spf1 a mx include:_spf.c{j}-{u}-{t}.{provider} ~all"'
        if rtype == "CNAME":
            return f"c{j}-{u}-{t}.cdn.{provider}"
        raise ValueError(f"cannot mutate a {rtype} record")

    for t in range(1000):
        new = candidate(t)
        if new not in taken:
            return f"{owner}\t{ttl}\t{cls}\t{rtype}\t{new}\n"
    raise RuntimeError(f"no fresh {rtype} data for {owner}")  # cannot happen with sane zones


# --- tld: streamed -----------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Edit:
    new_lines: list[str]  # the delegation after the edit
    deleted: list[str]
    added: list[str]


def _perm(full: int, seed: int) -> Callable[[int], int]:
    """A seeded bijection of 0..full-1 (affine map with a multiplier coprime to full)."""
    if full <= 1:
        return lambda q: q
    rng = random.Random(f"xfrbench-changes-perm:{seed}:{full}")
    mul = rng.randrange(1, full)
    while math.gcd(mul, full) != 1:
        mul += 1
    add = rng.randrange(full)
    return lambda q: (mul * q + add) % full


def _tld_edits(p: tld.TldPlan, j: int, changes: int) -> dict[int, _Edit]:
    deletions, additions = split_counts(changes)
    per_set = deletions if deletions else additions
    perm = _perm(p.full, p.seed)
    pool = ns_pool(p.seed, p.origin)
    edits: dict[int, _Edit] = {}
    for u in range(per_set):
        d = perm((j - 1) * per_set + u)
        lines = tld.delegation_lines(p, d)
        new, deleted, added = list(lines), [], []
        if u < deletions:
            # Key rollover where there is a DS (always the last line), else a provider switch
            # of the out-of-zone NS (line 1 in both delegation layouts).
            idx = len(lines) - 1 if p.templates.ds[d % p.period] else 1
            new[idx] = mutate(lines[idx], j, u, p.seed, pool, lines)
            deleted.append(lines[idx])
            added.append(new[idx])
        if u == 0 and additions > deletions:
            rdata = ds_rdata(random.Random(f"xfrbench-ds-extra:{p.seed}:{j}"))
            extra = f"{tld.delegation_name(p, d)}\t{tld.TTL}\tIN\tDS\t{rdata}\n"
            new.append(extra)
            added.append(extra)
        edits[d] = _Edit(new, deleted, added)
    return edits


def _check_room(available: int, k: int, changes: int, what: str) -> None:
    deletions, additions = split_counts(changes)
    per_set = deletions if deletions else additions
    if k * per_set > available:
        raise UserInputError(
            f"{k} change sets of {changes} changes need {k * per_set} {what}, "
            f"the zone has {available}",
            key="--changes",
            fix="use fewer changes, a lower --serial-to, or a bigger zone",
        )


def _build_tld(
    spec: ZoneSpec, k: int, changes: int, folder: Path, serial_to: int, whole: bool
) -> dict[str, Any]:
    p = tld.plan(spec.origin, spec.records, spec.seed)
    _check_room(p.full, k, changes, "distinct delegations")
    zone_name = zone_file_name(spec.origin)
    # A delegation is edited at most once along the chain, so change set k alone gives
    # the diff; the whole zone at serial_to needs every set's edits.
    last = _tld_edits(p, k, changes)
    size = None
    if whole:
        overrides: dict[int, list[str]] = {}
        for j in range(1, k + 1):
            edits = last if j == k else _tld_edits(p, j, changes)
            overrides.update({d: e.new_lines for d, e in edits.items()})
        size = write_lines_file(folder / zone_name, tld.iter_chunks(p, serial_to, overrides))
    deleted = [line for e in last.values() for line in e.deleted]
    added = [line for e in last.values() for line in e.added]
    soa_from = tld.soa_line(spec.origin, serial_to - 1)
    soa_to = tld.soa_line(spec.origin, serial_to)
    deletions, additions = split_counts(changes)
    records = spec.records + k * (additions - deletions)
    return _finish(
        folder, spec.origin, zone_name, size, records, serial_to, soa_from, soa_to, deleted, added
    )


# --- tiny and hosting: replayed in memory ----------------------------------------------


def _small_base(spec: ZoneSpec, serial: int) -> tuple[str, list[str]]:
    if spec.preset == "tiny":
        return spec.origin, small.tiny_lines(spec.origin, serial, spec.seed)
    origin = small.hosting_zone_name(spec.origin, spec.seed, 0)
    return origin, small.hosting_lines(spec.origin, spec.seed, 0, spec.records, serial)


def _build_small(
    spec: ZoneSpec, k: int, changes: int, folder: Path, serial_to: int, whole: bool
) -> dict[str, Any]:
    origin, base = _small_base(spec, serial_to)
    soa_to, body = base[0], base[1:]
    soa_from = _small_base(spec, serial_to - 1)[1][0]
    pool = ns_pool(spec.seed, spec.origin)
    deletions, additions = split_counts(changes)
    deleted: list[str] = []
    added: list[str] = []
    for j in range(1, k + 1):
        if deletions > len(body):
            _check_room(len(body), 1, changes, "records to replace (SOA excluded)")
        rng = random.Random(f"xfrbench-changes:{spec.seed}:{changes}:{j}")
        deleted, added = [], []
        for u, idx in enumerate(sorted(rng.sample(range(len(body)), deletions))):
            new = mutate(body[idx], j, u, spec.seed, pool, body)
            deleted.append(body[idx])
            added.append(new)
            body[idx] = new
        if additions > deletions:
            extra = f'_xfrbench-c{j}.{origin}\t{_TTL_NEW}\tIN\tTXT\t"change set {j}"\n'
            body.append(extra)
            added.append(extra)
    zone_name = zone_file_name(origin)
    size = write_lines_file(folder / zone_name, [soa_to, *body]) if whole else None
    return _finish(
        folder, origin, zone_name, size, 1 + len(body), serial_to, soa_from, soa_to, deleted, added
    )


# --- common ------------------------------------------------------------------------------


def _finish(
    folder: Path,
    origin: str,
    zone_name: str,
    size: int | None,
    records: int,
    serial_to: int,
    soa_from: str,
    soa_to: str,
    deleted: list[str],
    added: list[str],
) -> dict[str, Any]:
    diff_name = zone_name + DIFF_SUFFIX
    header = (
        f"; xfrbench change set for {origin}: serial {serial_to - 1} -> {serial_to}, "
        f"{len(deleted)} deleted, {len(added)} added (RFC 1995 order)\n"
    )
    write_lines_file(folder / diff_name, [header, soa_from, *deleted, soa_to, *added])
    meta = {
        "origin": origin,
        "serial_from": serial_to - 1,
        "serial_to": serial_to,
        "zone": zone_name,
        "diff": diff_name,
        "added": len(added),
        "deleted": len(deleted),
        "records": records,
        # The whole zone at serial_to, when it was written (None: the diff alone).
        "files": [] if size is None else [{"file": zone_name, "bytes": size, "records": records}],
    }
    cache.write_meta(folder, meta)
    return meta


def change_set(
    spec: ZoneSpec,
    serial_to: int,
    changes: int,
    cache_dir: Path | None = None,
    *,
    whole_zone: bool = True,
) -> ChangeSet:
    """The zone at ``serial_to`` and the diff from ``serial_to - 1``; see the module docstring.
    ``whole_zone=False``: the diff alone (``zone_path`` None), for a primary that takes
    changes by update: a stream of a 1 M-record zone then writes kilobytes per serial,
    not the whole zone every time."""
    spec = validate(spec)
    if spec.preset == "file":
        return _own_change(spec, serial_to, whole_zone, cache_dir)
    if spec.signed:
        raise UserInputError(
            "change sets of signed zones are not supported (every signature would change)",
            key="--signed",
            fix="drop --signed; let the primary sign (inline signing) if needed",
        )
    if not isinstance(changes, int) or changes < 0:
        raise UserInputError(f"changes must be 0 or more, not {changes!r}", key="--changes")
    k = serial_to - spec.serial
    if k < 1 or serial_to > MAX_SERIAL:
        raise UserInputError(
            f"serial-to {serial_to} must be above the base serial {spec.serial} "
            f"and at most {MAX_SERIAL}",
            key="--serial-to",
            fix=f"e.g. --serial-to {spec.serial + 1}",
        )
    root = cache.cache_root(cache_dir)
    cache.sweep_stale(root)
    key = f"changes-{cache_key(spec)}-c{changes}-to{serial_to}"
    meta = cache.read_meta(root / key)
    if meta is None and not whole_zone:
        key += "-diff"
        meta = cache.read_meta(root / key)
    if meta is None:
        build = _build_tld if spec.preset == "tld" else _build_small
        with cache.building(root, key) as tmp:
            meta = build(spec, k, changes, tmp, serial_to, whole_zone)
    return _from_meta(meta, root / key)


def _from_meta(meta: dict[str, Any], entry: Path) -> ChangeSet:
    """The change set a cache entry's meta describes (an own zone's: with its bytes and
    version file)."""
    return ChangeSet(
        meta["origin"],
        meta["serial_from"],
        meta["serial_to"],
        entry / meta["zone"] if meta["files"] else None,
        entry / meta["diff"],
        meta["added"],
        meta["deleted"],
        meta.get("changed_bytes"),
        meta.get("version"),
    )


def _own_change(
    spec: ZoneSpec, serial_to: int, whole_zone: bool, cache_dir: Path | None
) -> ChangeSet:
    """An own zone's next version (or, without versions, its records under a new serial)."""
    chain = ownzone.chain(spec, cache_dir)
    meta = ownzone.version_change(
        chain, chain[0].serial, serial_to, whole_zone=whole_zone, cache_dir=cache_dir
    )
    return _from_meta(meta, Path(meta["entry"]))
