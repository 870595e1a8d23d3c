"""The TLD preset: a delegation-only zone like .cz, written as text at millions of records/s.

Layout of the file (one RR per line, absolute owner names, explicit TTL and class, so that a
line of the zone file and a line of a change-set diff are the same text):

    origin SOA, origin NS x APEX_NS, their glue A + AAAA (a.ns.<origin>, b.ns.<origin>, ...)
    then per delegation d = 0, 1, ...:  <label(d)>.<origin> NS ... (+ glue) (+ DS)

Each delegation is rendered from one of ``period`` precomputed templates (``d % period``), a
tuple of text pieces that ``name.join(pieces)`` turns into the delegation's 2 to 5 lines: one C
call per delegation. Templates carry the random parts (which provider's NS pair, whether the
name server is in-bailiwick with glue, whether there is a DS and its rdata, glue addresses), so
those repeat with the period (a 5 M-delegation zone reuses each DS rdata ~80 times, a 1 M-record
one ~24 times; servers do not care). Labels never repeat (see tables.py).
"""

from __future__ import annotations

import bisect
import functools
import random
from collections.abc import Iterator
from dataclasses import dataclass

from harness.zonegen.tables import (
    LABEL_SPACE,
    LO_BITS,
    LO_MASK,
    ds_rdata,
    ipv4,
    ipv6,
    label_table,
    ns_pool,
)

TTL = 3600
APEX_NS = 4
APEX_RECORDS = 1 + APEX_NS * 3  # SOA, NS x4, A + AAAA for each
DS_SHARE = 0.40
GLUE_SHARE = 0.10
# Period candidates (primes, so the period does not line up with anything).
PERIODS = (1021, 16381, 65521)
MAX_REPEATS = 32
BATCH_DELEGATIONS = 40_000  # ~100 k lines, ~5 MB of text per write

_NS = f"\t{TTL}\tIN\tNS\t"
_DS = f"\t{TTL}\tIN\tDS\t"
_A = f"\t{TTL}\tIN\tA\t"
_AAAA = f"\t{TTL}\tIN\tAAAA\t"


def soa_line(origin: str, serial: int) -> str:
    # refresh 900, retry 300, expire 7 days, negative TTL 900: what ccTLDs publish.
    return (
        f"{origin}\t{TTL}\tIN\tSOA\ta.ns.{origin} hostmaster.{origin} {serial} 900 300 604800 900\n"
    )


@dataclass(frozen=True)
class Templates:
    """Parallel tuples, one entry per template (plain tuples: building 131 k dataclass
    instances would cost more than generating a 1 M zone)."""

    pieces: tuple[tuple[str, ...], ...]  # name.join(pieces[t]) == the delegation's text
    size: tuple[int, ...]  # records
    glue: tuple[bool, ...]  # NS ns1.<name> in-bailiwick with A + AAAA glue
    ds: tuple[bool, ...]


@dataclass(frozen=True)
class TldPlan:
    """Everything needed to render any delegation of one zone, by index."""

    origin: str
    seed: int
    records: int
    period: int
    templates: Templates
    prefix: tuple[int, ...]  # prefix[i] = records in templates[0:i]; len == period + 1
    full: int  # delegations rendered in full
    partial: int  # records of one more, truncated delegation (0 if none)

    def cum(self, n: int) -> int:
        """Records in delegations 0..n-1, all rendered in full."""
        whole, rest = divmod(n, self.period)
        return whole * self.prefix[-1] + self.prefix[rest]

    @property
    def delegations(self) -> int:
        return self.full + (1 if self.partial else 0)


def _choose_period(delegations: int) -> int:
    # Each template repeats at most ~MAX_REPEATS times where a period allows it; a bigger
    # period costs table-building time (~3 us a template) that small zones would notice.
    for period in PERIODS:
        if period * MAX_REPEATS >= delegations:
            return period
    return PERIODS[-1]


@functools.lru_cache(maxsize=8)
def _templates(seed: int, origin: str, period: int) -> Templates:
    rng = random.Random(f"xfrbench-tld:{seed}:{period}")
    pool = ns_pool(seed, origin)
    rand = rng.random
    npool = len(pool)
    # Plain delegations (no glue, no DS) are ~54 % of templates and only differ by provider:
    # share their pieces per provider instead of formatting each.
    plain = [("", f"{_NS}{a}\n", f"{_NS}{b}\n") for a, b in pool]
    pieces: list[tuple[str, ...]] = []
    sizes: list[int] = []
    glues: list[bool] = []
    dss: list[bool] = []
    for _ in range(period):
        which = min(npool - 1, int(npool * rand() ** 3))  # skewed: a few big providers
        glue = rand() < GLUE_SHARE
        ds = rand() < DS_SHARE
        if glue:
            p: tuple[str, ...] = (
                "",
                f"{_NS}ns1.",
                "\n",
                f"{_NS}{pool[which][1]}\nns1.",
                f"{_A}{ipv4(rng)}\nns1.",
                f"{_AAAA}{ipv6(rng)}\n",
            )
        else:
            p = plain[which]
        if ds:
            p += (f"{_DS}{ds_rdata(rng)}\n",)
        pieces.append(p)
        sizes.append((4 if glue else 2) + ds)
        glues.append(glue)
        dss.append(ds)
    return Templates(tuple(pieces), tuple(sizes), tuple(glues), tuple(dss))


def plan(origin: str, records: int, seed: int) -> TldPlan:
    budget = records - APEX_RECORDS
    period = _choose_period(max(1, budget * 10 // 26))  # ~2.6 records a delegation
    templates = _templates(seed, origin, period)
    prefix = [0]
    for size in templates.size:
        prefix.append(prefix[-1] + size)
    per_period = prefix[-1]
    # Largest n with cum(n) <= budget: whole periods first, then bisect inside one period.
    whole, rest = divmod(budget, per_period)
    inner = bisect.bisect_right(prefix, rest) - 1
    full = whole * period + inner
    partial = rest - prefix[inner]
    result = TldPlan(origin, seed, records, period, templates, tuple(prefix), full, partial)
    assert result.cum(full) + partial == budget
    if result.delegations > LABEL_SPACE:
        raise ValueError("too many delegations for the label space")
    return result


def apex_text(origin: str, serial: int, seed: int) -> str:
    rng = random.Random(f"xfrbench-apex:{seed}")
    lines = [soa_line(origin, serial)]
    letters = "abcdefgh"[:APEX_NS]
    lines += [f"{origin}{_NS}{x}.ns.{origin}\n" for x in letters]
    for x in letters:
        lines.append(f"{x}.ns.{origin}{_A}{ipv4(rng)}\n")
        lines.append(f"{x}.ns.{origin}{_AAAA}{ipv6(rng)}\n")
    return "".join(lines)


def render_range(p: TldPlan, start: int, stop: int) -> list[str]:
    """Text of delegations start..stop-1 (all full), one string per delegation.

    The hot loop of the generator: the label is two table lookups after an affine bijection,
    the delegation's lines are one str.join over its template's pieces.
    """
    table = label_table(p.seed)
    hi, lo, mul, add = table.hi, table.lo, table.mul, table.add
    mask = LABEL_SPACE - 1
    suffix = "." + p.origin
    pieces = p.templates.pieces
    period = p.period
    return [
        (hi[(j := (mul * d + add) & mask) >> LO_BITS] + lo[j & LO_MASK] + suffix).join(
            pieces[d % period]
        )
        for d in range(start, stop)
    ]


def delegation_name(p: TldPlan, d: int) -> str:
    return f"{label_table(p.seed).label(d)}.{p.origin}"


def delegation_lines(p: TldPlan, d: int) -> list[str]:
    """Lines (with newline) of delegation d rendered in full."""
    text = delegation_name(p, d).join(p.templates.pieces[d % p.period])
    return text.splitlines(keepends=True)


def partial_lines(p: TldPlan, d: int, count: int) -> list[str]:
    """The first ``count`` records of delegation d, chosen so the zone stays valid.

    A prefix would do for out-of-bailiwick delegations (NS, NS, DS), but an in-bailiwick one
    starts with NS ns1.<name>, which needs its glue A right behind it.
    """
    lines = delegation_lines(p, d)
    if not p.templates.glue[d % p.period]:
        return lines[:count]
    # glue lines: 0 NS ns1.<name>, 1 NS <pool>, 2 A, 3 AAAA, (4 DS)
    pick = {1: [1], 2: [0, 2], 3: [0, 1, 2], 4: [0, 1, 2, 3]}[count]
    return [lines[i] for i in pick]


def iter_chunks(
    p: TldPlan,
    serial: int,
    overrides: dict[int, list[str]] | None = None,
    batch: int = BATCH_DELEGATIONS,
) -> Iterator[str]:
    """The zone as text chunks of ~batch delegations; bounded memory for any zone size.

    ``overrides`` maps a delegation index to replacement lines (change sets use it).
    """
    yield apex_text(p.origin, serial, p.seed)
    touched = sorted(overrides) if overrides else []
    for start in range(0, p.full, batch):
        stop = min(start + batch, p.full)
        parts = render_range(p, start, stop)
        if touched:
            lo_i = bisect.bisect_left(touched, start)
            hi_i = bisect.bisect_left(touched, stop)
            for d in touched[lo_i:hi_i]:
                parts[d - start] = "".join(overrides[d])  # type: ignore[index]
        yield "".join(parts)
    if p.partial:
        d = p.full
        lines = overrides[d] if overrides and d in overrides else partial_lines(p, d, p.partial)
        yield "".join(lines)
