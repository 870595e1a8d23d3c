"""Did the link do what was asked (pure): per case and path (the one link, a fleet's site,
the primary's uplink), the configured round trip against the smallest one measured, loss per
direction summed over the transfers and tested against its model, and the rate per
direction; also each case's configured links as read back from its case.json (``CaseLinks``).

One of the first screen's answers: ``data.build_report_data`` calls ``link_checks`` with the
parsed records and case.json files, and the renderers (HTML, terminal) only format the
result. The loss test is harness/link/losscheck.py's and the path arithmetic
harness/linktest/check.py's, so the report says what the rest of the harness says.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from harness.core.terms import SERVER_TO_SERVER
from harness.link.losscheck import check_loss, expected_loss_rate
from harness.link.path import configured_rtt, through
from harness.results.failures import no_result
from harness.results.meta import CaseMeta
from harness.results.model import TransferRecord
from harness.spec import DirectionSpec, LinkSpec

FORWARD, REVERSE = "forward", "reverse"
UPLINK = "uplink"
# The smoothed RTT's minimum sits a little above the configured delays (the hosts' stacks,
# the emulator's queue): within 10 % + 2 ms of them is "as set".
RTT_SLACK, RTT_SLACK_S = 0.10, 0.002
RATE_AT = 0.8  # a measured rate at 80 % of the configured one or more is "at the rate"
RATE_OVER = 1.05  # above 105 %: the shaper let more through than it was told


def rtt_verdict(configured: float | None, measured: float | None) -> str | None:
    if configured is None or measured is None:
        return None
    if measured < configured * (1 - RTT_SLACK / 2) - RTT_SLACK_S / 4:
        return "shorter than set: the delay was not (fully) applied"
    if measured > configured * (1 + RTT_SLACK) + RTT_SLACK_S:
        return "longer than set: queueing or a busy host"
    return "as set"


def rate_verdict(configured: float | None, measured: float | None) -> str | None:
    if not configured or measured is None:
        return None
    if measured > configured * RATE_OVER:
        return "above the rate: the shaper did not hold it"
    if measured >= configured * RATE_AT:
        return "at the rate"
    return "below the rate: the link was not the bottleneck"


def _clean(value: Any) -> Any:
    """A model_dump'ed spec in the form the schema reads back: no None fields (it forbids
    keys a loss model does not use, even as null), rates with their unit (a bare number
    of bits is refused as ambiguous)."""
    if isinstance(value, dict):
        # A loss model other than random dumps its unused correlation as 0.0, which the
        # schema refuses for it: a Gilbert-Elliott link read back as no link at all.
        unused = {"correlation"} if value.get("model") not in (None, "random") else set()
        return {
            k: f"{v}bit" if k == "rate" and isinstance(v, int) else _clean(v)
            for k, v in value.items()
            if v is not None and not (k in unused and not v)
        }
    return value


def _link_spec(data: Any) -> LinkSpec | None:
    """A LinkSpec from its JSON form in case.json, None when it is not one."""
    if not isinstance(data, dict):
        return None
    try:
        return LinkSpec.model_validate(_clean(data))
    except ValidationError:
        return None


@dataclass
class CaseLinks:
    """One case's configured links, from its case.json: per secondary host its own link,
    and the primary's uplink."""

    hosts: dict[str, LinkSpec]
    uplink: LinkSpec | None
    sites: dict[str, str]  # host -> site

    def path(self, host: str) -> LinkSpec | None:
        """The path a transfer to `host` crosses (its link after the uplink), or None."""
        link = self.hosts.get(host)
        if link is None:
            return None
        return through(link, self.uplink) if self.uplink is not None else link

    def rtt_s(self, host: str) -> float | None:
        path = self.path(host)
        return configured_rtt(path) if path is not None else None


def case_links(meta: CaseMeta) -> CaseLinks:
    testbed = meta.testbed if isinstance(meta.testbed, dict) else {}
    links = testbed.get("links") if isinstance(testbed.get("links"), dict) else {}
    hosts = {name: spec for name, raw in links.items() if (spec := _link_spec(raw)) is not None}
    if not hosts and meta.link is not None:  # older case.json: the scenario's one link
        spec = _link_spec(meta.link)
        if spec is not None:
            hosts["secondary"] = spec
    return CaseLinks(hosts, _link_spec(meta.scenario.get("uplink")), dict(meta.sites))


def _direction_name(name: str) -> tuple[str | None, str] | None:
    """A record's link direction key -> (host or None for the only one / UPLINK, way)."""
    head, _, way = name.rpartition(" ")
    if way not in (FORWARD, REVERSE):
        return None
    return (head or None), way


@dataclass
class DirectionCheck:
    way: str  # forward (primary -> secondary) or reverse
    delay_s: float | None  # configured, one way
    loss: str | None  # the configured model in words ("random 1%"), None without loss
    loss_pct: float | None  # its long-run rate
    packets: int  # judged by the loss model (passed + random drops), summed
    dropped: int  # random drops (linkem) or all drops (netem)
    measured_pct: float | None
    expected_drops: float | None
    verdict: str | None  # harness.link.losscheck's, over the summed counts
    sentence: str | None
    rate_bps: float | None  # configured
    measured_rate_bps: float | None  # median of rate_bytes x 8 / the transfer's duration

    @property
    def rate_verdict(self) -> str | None:
        return rate_verdict(self.rate_bps, self.measured_rate_bps)


@dataclass
class PathCheck:
    case: str
    path: str  # "link" (the one secondary's), a fleet site, or "uplink"
    transfers: int
    rtt_s: float | None  # configured round trip of the path
    rtt_min_s: float | None  # smallest smoothed RTT of the secondary's connection
    rtt_samples: int  # transfers whose connection was sampled
    directions: list[DirectionCheck]
    cases: int = 1  # >1: the sum over that many cases whose paths were configured alike
    missing: str | None = None  # why nothing was measured (no verified transfer)

    @property
    def rtt_verdict(self) -> str | None:
        return rtt_verdict(self.rtt_s, self.rtt_min_s)


def _loss_words(spec: DirectionSpec) -> str | None:
    loss = spec.loss
    if not loss.active:
        return None
    if loss.model == "random":
        text = f"random {loss.p:g}%"
        return text + (f", correlation {loss.correlation:g}%" if loss.correlation else "")
    if loss.model == "gemodel":
        return f"gemodel p {loss.p:g}%, r {loss.r if loss.r is not None else 100 - loss.p:g}%"
    return f"state p13 {loss.p13:g}%"


def _direction_check(
    way: str, spec: DirectionSpec | None, entries: list[tuple[dict[str, Any], float | None]]
) -> DirectionCheck:
    """A direction's counts summed over the case's repeats, tested against its model."""
    dropped = packets = 0
    linkem = any("dropped_loss" in entry for entry, _ in entries)
    for entry, _ in entries:
        if linkem:  # linkem tells random drops from queue overflows (as observe.py does)
            lost = int(entry.get("dropped_loss", 0))
            packets += int(entry.get("emulated", lost + int(entry.get("passed", 0))))
        else:
            lost = int(entry.get("dropped", 0))
            packets += lost + int(entry.get("passed", 0))
        dropped += lost
    rates = [
        entry["rate_bytes"] * 8 / duration
        for entry, duration in entries
        if isinstance(entry.get("rate_bytes"), int | float) and duration
    ]
    verdict = sentence = expected = loss_pct = None
    words = _loss_words(spec) if spec is not None else None
    if spec is not None and spec.loss.active:
        check = check_loss(spec.loss, packets - dropped, dropped)
        verdict, sentence, expected = check.verdict, check.sentence, check.expected_drops
        loss_pct = 100 * expected_loss_rate(spec.loss)
    return DirectionCheck(
        way=way,
        delay_s=spec.delay if spec is not None else None,
        loss=words,
        loss_pct=loss_pct,
        packets=packets,
        dropped=dropped,
        measured_pct=100 * dropped / packets if packets else None,
        expected_drops=expected,
        verdict=verdict,
        sentence=sentence,
        rate_bps=float(spec.rate) if spec is not None and spec.rate else None,
        measured_rate_bps=statistics.median(rates) if rates else None,
    )


@dataclass
class _PathCounts:
    """What a case's transfers over one path recorded, before it is summed."""

    transfers: int = 0
    rtt_s: float | None = None
    rtts: list[float] = field(default_factory=list)
    ways: dict[str, list[tuple[dict[str, Any], float | None]]] = field(default_factory=dict)
    specs: dict[str, DirectionSpec] = field(default_factory=dict)

    def check(self, case: str, path: str) -> PathCheck:
        return PathCheck(
            case=case,
            path=path,
            transfers=self.transfers,
            rtt_s=self.rtt_s if path != UPLINK else None,
            rtt_min_s=min(self.rtts) if self.rtts else None,
            rtt_samples=len(self.rtts),
            directions=[
                _direction_check(way, self.specs.get(way), self.ways[way])
                for way in (FORWARD, REVERSE)
                if way in self.ways
            ],
        )


def _path_counts(items: list[TransferRecord], links: CaseLinks) -> dict[str, _PathCounts]:
    """Per path (the one link, a fleet's site, the uplink): the case's counters."""
    only = next(iter(links.hosts)) if len(links.hosts) == 1 else None
    out: dict[str, _PathCounts] = {}
    seen: set[tuple[int, str]] = set()
    longest: dict[int, float] = {}
    for r in items:
        longest[r.repeat] = max(longest.get(r.repeat, 0.0), float(r.duration_s or 0.0))
    for record in items:
        host = record.host if record.site is not None else (only or record.host)
        path = record.site or "link"
        counts = out.setdefault(path, _PathCounts())
        counts.transfers += 1
        rtt = record.extra.get("path_rtt_s")
        if counts.rtt_s is None:
            counts.rtt_s = float(rtt) if isinstance(rtt, int | float) else links.rtt_s(host)
        # The transfer's connection (sock_diag); on inventory hosts, the primary's TCP on
        # its connections to the host during the repeat (remote/pathwatch.py).
        tcp = record.extra.get("tcp") or record.extra.get("path")
        if isinstance(tcp, dict) and isinstance(tcp.get("rtt_ms_min"), int | float):
            counts.rtts.append(tcp["rtt_ms_min"] / 1000)
        link = record.extra.get("link")
        for name, entry in link.items() if isinstance(link, dict) else []:
            parsed = _direction_name(name)
            if parsed is None or not isinstance(entry, dict):
                continue
            owner, way = parsed
            if owner == UPLINK:
                if (record.repeat, name) in seen:
                    continue  # the uplink's counters are in every record of the repeat
                seen.add((record.repeat, name))
                where = out.setdefault(UPLINK, _PathCounts())
                where.transfers = len(longest)
                spec_link, duration = links.uplink, longest[record.repeat]
            else:
                # A stream's or cold start's counters cover more than its duration.
                span = record.extra.get("link_span_s") or record.duration_s or 0.0
                where, duration = counts, float(span)
                spec_link = links.hosts.get(owner or host)
            where.ways.setdefault(way, []).append((entry, duration))
            if spec_link is not None:
                where.specs[way] = getattr(spec_link, way)
    return out


def link_checks(records: Iterable[TransferRecord], metas: dict[str, CaseMeta]) -> list[PathCheck]:
    """Per case and path: configured against measured RTT, loss per direction (counts summed
    over the case's transfers, the loss check over the sums) and rate per direction. Then,
    where several cases crossed paths configured alike, the same over all of them ("all 16
    cases"): a few packets per case rarely test a small loss rate; a run's worth can."""
    by_case: dict[str, list[TransferRecord]] = {}
    attempts: dict[str, list[TransferRecord]] = {}
    for record in records:
        if record.method == SERVER_TO_SERVER:
            attempts.setdefault(record.case, []).append(record)
            if record.counts:
                by_case.setdefault(record.case, []).append(record)
    per_case: list[PathCheck] = []
    alike: dict[tuple[str, str], list[tuple[str, _PathCounts]]] = {}
    for case, items in by_case.items():
        links = case_links(metas[case]) if case in metas else CaseLinks({}, None, {})
        for path, counts in _path_counts(items, links).items():
            if not counts.ways and not counts.rtts:
                continue  # nothing was measured on it (a run from before link counters)
            per_case.append(counts.check(case, path))
            signature = repr((counts.rtt_s, sorted(counts.specs.items())))
            alike.setdefault((path, signature), []).append((case, counts))
    totals = []
    for (path, _), group in alike.items():
        if len(group) < 2:
            continue
        total = _PathCounts(rtt_s=group[0][1].rtt_s, specs=group[0][1].specs)
        for _, counts in group:
            total.transfers += counts.transfers
            total.rtts += counts.rtts
            for way, entries in counts.ways.items():
                total.ways.setdefault(way, []).extend(entries)
        summed = total.check(f"all {len(group)} cases", path)
        summed.cases = len(group)
        totals.append(summed)
    missing = [
        PathCheck(case, "link", 0, None, None, 0, [], missing=no_result(items))
        for case, items in attempts.items()
        if case not in by_case
    ]
    return totals + per_case + missing


def first_rows(checks: list[PathCheck]) -> list[PathCheck]:
    """The rows the first screen shows: the sums over cases configured alike, each case's
    own row on a path no sum covers (a fault run's sites differ from case to case), then
    the cases without a result."""
    totals = [c for c in checks if c.cases > 1]
    covered = {c.path for c in totals}
    singles = [c for c in checks if c.cases == 1 and not c.missing and c.path not in covered]
    return totals + singles + [c for c in checks if c.missing]
