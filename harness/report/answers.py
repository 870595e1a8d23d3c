"""The first screen's numbers (pure): what each transport costs, where the time went, whether
the link did what was asked, and how close the transfers came to their bound.

Part of the report's model: ``data.build_report_data`` calls these with the parsed records
and case.json files, and the renderers (HTML, terminal, figures) only format the result.
Every figure comes from the server-to-server records that count (ok and verified); the
statistics are harness/stats.py's, the loss test harness/link/losscheck.py's and the path
arithmetic harness/link/linktest.py's, so the report says what the rest of the harness says.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from harness.results.meta import CaseMeta
from harness.results.model import TransferRecord
from harness.stats import bootstrap_intervals, drift_check, mann_whitney_p, min_two_sided_p
from harness.terms import SERVER_TO_SERVER, TRANSPORTS

BASELINE = "tcp"  # the transport the others are normalised to (= 100)
ALPHA = 0.05  # significance level of the Mann-Whitney test against TCP
CONFIDENCE = 0.95  # of the bootstrap interval of the ratio of medians
STEADY_BDPS = 10.0  # a transfer of at least this many BDPs is long enough to judge a bound
DRIFTING = ("drift", "possible drift")

# --- what each transport costs ------------------------------------------------------------


def transport_group(case: str, transport: str) -> str | None:
    """The case's name without its transport: "bind-bind/preset=tiny/axfr". Case names are
    "pair/axes.../transport/xfr" (harness/spec/loader.py), so the cases of one pair, zone and kind
    differ only in that segment; None for a name that does not follow it."""
    parts = case.split("/")
    if len(parts) < 3 or parts[-2] != transport:
        return None
    return "/".join(parts[:-2] + parts[-1:])


def drift_messages(durations: list[float]) -> list[str]:
    """drift_check's lines for a case's durations in the order they ran, [] when it does not
    drift (or has too few values to tell: fewer than 4)."""
    check = drift_check(durations)
    if check.verdict in DRIFTING or (check.first is not None and check.first.outlier):
        return list(check.messages)
    return []


def host_drift(records: list[TransferRecord]) -> list[str]:
    """drift_messages per secondary host, in the order its transfers ran: a fleet's hosts
    take turns in a case's records, and a first-notified host beside a late one is no
    trend."""
    series: dict[str, list[float]] = {}
    for record in records:
        if record.counts and record.duration_s is not None:
            host = str(record.extra.get("host", ""))
            series.setdefault(host, []).append(float(record.duration_s))
    if len(series) == 1:
        return drift_messages(next(iter(series.values())))
    return [f"{host}: {line}" for host, values in series.items() for line in drift_messages(values)]


@dataclass
class TransportCost:
    transport: str
    case: str | None  # None: the group has no case of this transport
    n: int  # transfers that count
    median_s: float | None
    index: float | None  # 100 x median / TCP's median
    ci: tuple[float, float] | None  # bootstrap interval of the index
    p_value: float | None  # two-sided Mann-Whitney against TCP's durations
    testable: bool  # whether these sample sizes allow p < ALPHA at all
    significant: bool
    drift: list[str] = field(default_factory=list)
    missing: str | None = None  # why there is no figure ("unsupported: ...", "3 failed")

    @property
    def spread(self) -> float | None:
        """The larger side of the interval: "111 ±3" as the CZ.NIC table writes it."""
        if self.ci is None or self.index is None:
            return None
        return max(self.index - self.ci[0], self.ci[1] - self.index)


@dataclass
class TransportGroup:
    key: str  # the case name without its transport
    primary: str | None
    secondary: str | None
    xfr: str | None
    baseline_case: str
    baseline_median_s: float
    baseline_n: int
    costs: list[TransportCost]  # in TRANSPORTS order, TCP first

    @property
    def drifting(self) -> bool:
        return any(cost.drift for cost in self.costs)


def _why_missing(records: list[TransferRecord]) -> str:
    unsupported = [r for r in records if r.unsupported]
    if unsupported:
        return "unsupported: " + (unsupported[0].error or "").removeprefix("unsupported: ")
    failed = [r for r in records if not r.counts]
    return f"{len(failed)} failed" if failed else "no transfer"


def transport_costs(
    records: Iterable[TransferRecord], *, alpha: float = ALPHA, confidence: float = CONFIDENCE
) -> list[TransportGroup]:
    """Per server pair, zone and transfer kind with a TCP case that has figures: each
    transport's median duration as an index (TCP = 100), the bootstrap interval of that
    ratio of medians, the Mann-Whitney p against TCP's durations, and drift flags."""
    by_case: dict[str, list[TransferRecord]] = {}
    for record in records:
        if record.method == SERVER_TO_SERVER:
            by_case.setdefault(record.case, []).append(record)
    groups: dict[str, dict[str, str]] = {}  # group -> transport -> case
    for case, items in by_case.items():
        key = transport_group(case, items[0].transport)
        if key is not None:
            groups.setdefault(key, {})[items[0].transport] = case

    def durations(case: str) -> list[float]:
        return [float(r.duration_s) for r in by_case[case] if r.counts and r.duration_s]

    out = []
    for key, cases in groups.items():
        if BASELINE not in cases or not durations(cases[BASELINE]) or len(cases) < 2:
            continue  # nothing to normalise against, or nothing to compare
        base = durations(cases[BASELINE])
        base_median = statistics.median(base)
        first = by_case[cases[BASELINE]][0]
        costs = []
        for transport in TRANSPORTS:
            case = cases.get(transport)
            if case is None:
                continue
            values = durations(case)
            if not values:
                costs.append(
                    TransportCost(
                        transport, case, 0, None, None, None, None, False, False,
                        missing=_why_missing(by_case[case]),
                    )
                )  # fmt: skip
                continue
            median = statistics.median(values)
            drift = host_drift(by_case[case])
            if transport == BASELINE:
                costs.append(
                    TransportCost(transport, case, len(values), median, 100.0, None, None,
                                  False, False, drift)
                )  # fmt: skip
                continue
            _, _, change = bootstrap_intervals(base, values, confidence)
            ci = (100 * (1 + change[0]), 100 * (1 + change[1])) if change else None
            p = mann_whitney_p(base, values)
            costs.append(
                TransportCost(
                    transport=transport,
                    case=case,
                    n=len(values),
                    median_s=median,
                    index=100 * median / base_median,
                    ci=ci,
                    p_value=p,
                    testable=min_two_sided_p(len(base), len(values)) < alpha,
                    significant=p is not None and p < alpha,
                    drift=drift,
                )
            )
        out.append(
            TransportGroup(
                key=key,
                primary=first.primary,
                secondary=first.secondary,
                xfr=first.xfr,
                baseline_case=cases[BASELINE],
                baseline_median_s=base_median,
                baseline_n=len(base),
                costs=costs,
            )
        )
    return out


# --- where the time went ------------------------------------------------------------------

# The instants a transfer's phases are measured at, in the order they happen, and where each
# is seen. Times in records are seconds since the trigger (t0): the NOTIFY leaving the
# primary, the control command, or the secondary's start; primary_reload and notify_sent
# count from the harness's reload command instead.
ORIGIN_RELOAD = "the harness issues the reload command on the primary (time 0)"
ORIGIN_CONTROL = "the harness runs the control command on the secondary (time 0)"
ORIGIN_START = "the harness starts the secondary (time 0)"
ORIGIN_TRIGGER = "the transfer's trigger, as its record counts it (time 0)"
SEEN = {
    "NOTIFY": "wire: the primary's NOTIFY to this secondary, seen leaving the primary",
    "SOA query": "wire: the secondary's SOA query, seen arriving at the primary",
    "connect": "wire: the secondary's SYN to the primary (the connection that carried it)",
    "transfer end (log)": "the secondary's log: connect + the transfer duration it logged",
    "served": "harness: the first SOA poll (every 5 ms) answered with the new serial",
    "first zone": "harness: the first zone answered with its serial (SOA polls)",
    "median zone": "harness: half of the zones answered (SOA polls)",
    "95 % of zones": "harness: 95 % of the zones answered (SOA polls)",
    "every zone": "harness: the last zone answered (SOA polls)",
}


@dataclass
class Segment:
    name: str  # "SOA query -> connect"
    start_s: float  # on the bar, from its time 0
    seconds: float
    seen: str  # where its end instant is observed


@dataclass
class CasePhases:
    case: str
    site: str | None  # fleets: one bar per case and site
    trigger: str | None
    repeat: int  # the median transfer's repeat
    host: str | None
    n: int  # transfers that count, the median one of which is shown
    origin: str  # what time 0 of the bar is
    offset_s: float  # where the measured duration starts on the bar (the NOTIFY)
    duration_s: float  # the record's duration_s (from its trigger to served)
    segments: list[Segment]
    markers: dict[str, float]  # instants not in sequence: "primary serves it" (from time 0)
    logged_secondary_s: float | None  # the servers' own figures, beside the bar
    logged_primary_s: float | None
    notes: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return self.case if self.site is None else f"{self.case} @ {self.site}"

    @property
    def total_s(self) -> float:
        return self.offset_s + self.duration_s


def _logged(record: TransferRecord, role: str) -> float | None:
    figures = record.server_logged.get(role)
    if isinstance(figures, dict):
        value = figures.get("duration_s")
        if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
            return float(value)
    return None


def _median_record(records: list[TransferRecord]) -> TransferRecord:
    """The transfer whose duration is the (lower) median: one real transfer, whose phases
    add up to its own duration (medians of each phase would not)."""
    ordered = sorted(records, key=lambda r: float(r.duration_s or 0.0))
    return ordered[(len(ordered) - 1) // 2]


def phases_of(record: TransferRecord, n: int, site: str | None) -> CasePhases:
    """The phases of one transfer as consecutive segments on one time axis."""
    phases, duration = record.phases, float(record.duration_s or 0.0)
    logged = _logged(record, "secondary")
    notes: list[str] = []
    markers: dict[str, float] = {}
    offset = 0.0
    points: list[tuple[str, float]] = []  # (instant, seconds since the trigger)
    if record.trigger == "cold-start":
        origin = ORIGIN_START
        for key, name in (
            ("zones_first", "first zone"),
            ("zones_p50", "median zone"),
            ("zones_p95", "95 % of zones"),
        ):
            if key in phases:
                points.append((name, phases[key]))
        points.append(("every zone", duration))
        start = "start"
    else:
        if record.trigger == "notify" and "notify_sent" in phases:
            origin, offset, start = ORIGIN_RELOAD, phases["notify_sent"], "reload command"
            points.append(("NOTIFY", offset))
            if "primary_reload" in phases:
                markers["primary serves it"] = phases["primary_reload"]
        elif record.trigger == "retransfer":
            origin, start = ORIGIN_CONTROL, "control command"
            if "control_returned" in phases:
                markers["command returned"] = phases["control_returned"]
            if "primary_reload" in phases:
                notes.append(
                    f"the primary served the new version {phases['primary_reload']:.3g} s "
                    "after its reload command, before the control command"
                )
        else:  # a record from before phases were kept (or a NOTIFY nobody saw)
            origin, start = ORIGIN_TRIGGER, "trigger"
        if "soa_query" in phases:
            points.append(("SOA query", phases["soa_query"]))
        elif record.transport.startswith("xot"):
            notes.append("no SOA query on the wire: it travels inside TLS")
        if "connect" in phases:
            points.append(("connect", phases["connect"]))
            if logged is not None and phases["connect"] + logged <= duration:
                points.append(("transfer end (log)", phases["connect"] + logged))
            elif logged is not None:
                # A log's clock may start before the connect (at the SOA answer), or round
                # up: the instant would land after served, which is measured, so it goes.
                notes.append(
                    f"the secondary logged {logged:.4g} s, more than connect to served "
                    f"({duration - phases['connect']:.4g} s): not placed"
                )
        elif logged is not None:
            notes.append("no connect seen on the wire: the logged transfer is not placed")
        points.append(("served", duration))
    segments: list[Segment] = []
    previous, at = start, 0.0
    for name, when in points:
        bar = when if name == "NOTIFY" else offset + when  # the NOTIFY is t0 itself
        if bar < at:
            # Clocks of different origins (a log's ms figure, the wire) can disagree by a
            # little; the instant is dropped rather than drawn as a negative segment.
            notes.append(f"{name} ({bar:.4g} s) precedes {previous} ({at:.4g} s): not drawn")
            continue
        segments.append(Segment(f"{previous} -> {name}", at, bar - at, SEEN[name]))
        previous, at = name, bar
    return CasePhases(
        case=record.case,
        site=site,
        trigger=record.trigger,
        repeat=record.repeat,
        host=record.extra.get("host"),
        n=n,
        origin=origin,
        offset_s=offset,
        duration_s=duration,
        segments=segments,
        markers=markers,
        logged_secondary_s=logged,
        logged_primary_s=_logged(record, "primary"),
        notes=notes,
    )


def case_phases(records: Iterable[TransferRecord]) -> list[CasePhases]:
    """Per server-to-server case (and site, in a fleet): the median transfer's phases."""
    groups: dict[tuple[str, str | None], list[TransferRecord]] = {}
    for record in records:
        if record.method == SERVER_TO_SERVER and record.counts:
            site = record.extra.get("site")
            groups.setdefault((record.case, str(site) if site else None), []).append(record)
    return [
        phases_of(_median_record(items), len(items), site) for (_, site), items in groups.items()
    ]


# --- did the link do what was asked -------------------------------------------------------

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
        return {
            k: f"{v}bit" if k == "rate" and isinstance(v, int) else _clean(v)
            for k, v in value.items()
            if v is not None
        }
    return value


def _link_spec(data: Any) -> Any:
    """A LinkSpec from its JSON form in case.json, None when it is not one."""
    from pydantic import ValidationError

    from harness.spec import LinkSpec

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

    hosts: dict[str, Any]  # host -> LinkSpec
    uplink: Any  # LinkSpec or None
    sites: dict[str, str]  # host -> site

    def path(self, host: str) -> Any:
        """The path a transfer to `host` crosses (its link after the uplink), or None."""
        from harness.link.linktest import through

        link = self.hosts.get(host)
        if link is None:
            return None
        return through(link, self.uplink) if self.uplink is not None else link

    def rtt_s(self, host: str) -> float | None:
        from harness.link.linktest import configured_rtt

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

    @property
    def rtt_verdict(self) -> str | None:
        return rtt_verdict(self.rtt_s, self.rtt_min_s)


def _loss_words(spec: Any) -> str | None:
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
    way: str, spec: Any, entries: list[tuple[dict[str, Any], float | None]]
) -> DirectionCheck:
    """A direction's counts summed over the case's repeats, tested against its model."""
    from harness.link.losscheck import check_loss, expected_loss_rate

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
    specs: dict[str, Any] = field(default_factory=dict)

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
        host = str(record.extra.get("host") or only or "secondary")
        path = str(record.extra.get("site") or "link")
        counts = out.setdefault(path, _PathCounts())
        counts.transfers += 1
        rtt = record.extra.get("path_rtt_s")
        if counts.rtt_s is None:
            counts.rtt_s = float(rtt) if isinstance(rtt, int | float) else links.rtt_s(host)
        tcp = record.extra.get("tcp")
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
                where, duration = counts, float(record.duration_s or 0.0)
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
    for record in records:
        if record.method == SERVER_TO_SERVER and record.counts:
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
    return totals + per_case


# --- how close to the bound ---------------------------------------------------------------

BOUND_NAMES = ("rate", "receive_window", "receive_buffer", "send_window", "mathis", "pftk")


def _sysctl(meta: CaseMeta | None, host: str, key: str) -> str | None:
    if meta is None:
        return None
    hosts = meta.testbed.get("hosts") if isinstance(meta.testbed, dict) else None
    entry = hosts.get(host) if isinstance(hosts, dict) else None
    values = entry.get("sysctls") if isinstance(entry, dict) else None
    value = values.get(key) if isinstance(values, dict) else None
    return str(value) if value is not None else None


def _buffer_max(text: str | None) -> int | None:
    """The max of a "min default max" tcp_rmem/tcp_wmem triple."""
    parts = (text or "").split()
    return int(parts[-1]) if len(parts) == 3 and parts[-1].isdigit() else None


@dataclass
class BoundRow:
    case: str
    site: str | None
    n: int  # transfers with a throughput
    bytes: float  # median zone bytes per transfer
    throughput_bps: float  # median bytes x 8 / (served - connect), or / duration
    timed_from: str  # "connect" or "trigger": what the throughput's clock starts at
    bound_bps: float | None  # median model bound
    limited_by: str | None
    bounds_bps: dict[str, float]  # every named bound, median
    rtt_s: float | None  # configured path RTT
    bdp_bytes: float | None  # bound x RTT / 8
    bdps: float | None  # zone bytes / BDP
    steady: bool  # at least STEADY_BDPS: long enough for the bound to apply
    sender_cc: str | None  # the primary's congestion control (it sends the zone)
    receiver_cc: str | None  # the secondary's connection, as sampled
    advertised_window: int | None  # largest window the secondary advertised (median)
    receive_buffer: int | None  # secondary's tcp_rmem max
    send_buffer: int | None  # primary's tcp_wmem max

    @property
    def label(self) -> str:
        return self.case if self.site is None else f"{self.case} @ {self.site}"

    @property
    def ratio(self) -> float | None:
        return self.throughput_bps / self.bound_bps if self.bound_bps else None


def _transfer_rate(record: TransferRecord) -> tuple[float, str] | None:
    """bytes x 8 over the transfer itself (connect to served) when the connect was seen:
    the NOTIFY and SOA round trips before it are no part of what the bound limits."""
    if not record.bytes or not record.duration_s:
        return None
    connect = record.phases.get("connect")
    if connect is not None and record.duration_s > connect:
        return record.bytes * 8 / (record.duration_s - connect), "connect"
    return record.bytes * 8 / record.duration_s, "trigger"


def bound_rows(
    records: Iterable[TransferRecord], metas: dict[str, CaseMeta], *, steady: float = STEADY_BDPS
) -> list[BoundRow]:
    """Per case (and site): median throughput against the median model bound, whether the
    zone is long enough (at least `steady` BDPs) for the bound to apply, and the congestion
    control and buffers that set the bound."""
    groups: dict[tuple[str, str | None], list[TransferRecord]] = {}
    for record in records:
        if record.method == SERVER_TO_SERVER and record.counts and record.bytes:
            site = record.extra.get("site")
            groups.setdefault((record.case, str(site) if site else None), []).append(record)
    out = []
    for (case, site), items in groups.items():
        rated = [(r, got) for r in items if (got := _transfer_rate(r)) is not None]
        if not rated:
            continue
        meta = metas.get(case)
        links = case_links(meta) if meta is not None else CaseLinks({}, None, {})
        host = str(items[0].extra.get("host") or next(iter(links.hosts), "secondary"))
        # The bound of a transfer whose connection was watched holds the window the
        # secondary really advertised; the others only tcp_rmem's (a fleet watches one
        # secondary per site). Mixing both would give a median of neither.
        watched = [r for r in items if "receive_buffer" in r.bound]
        named: dict[str, list[float]] = {}
        for record in watched or items:
            for key, value in record.bound.items():
                if isinstance(value, int | float) and value > 0:
                    named.setdefault(key, []).append(float(value))
        bounds = {key: statistics.median(values) for key, values in named.items()}
        model = bounds.pop("model", None)
        limited = next((k for k in BOUND_NAMES if model and bounds.get(k) == model), None)
        rtt_value = items[0].extra.get("path_rtt_s")
        rtt = float(rtt_value) if isinstance(rtt_value, int | float) else links.rtt_s(host)
        size = statistics.median(float(r.bytes or 0) for r in items)
        bdp = model * rtt / 8 if model and rtt else None
        windows = [
            int(tcp["rcv_wnd_max"])
            for r in items
            if isinstance(tcp := r.extra.get("tcp"), dict) and tcp.get("rcv_wnd_max")
        ]
        ccs = {
            str(tcp["congestion"])
            for r in items
            if isinstance(tcp := r.extra.get("tcp"), dict) and tcp.get("congestion")
        }
        froms = {how for _, (_, how) in rated}
        out.append(
            BoundRow(
                case=case,
                site=site,
                n=len(rated),
                bytes=size,
                throughput_bps=statistics.median(rate for _, (rate, _) in rated),
                timed_from="connect" if froms == {"connect"} else "trigger",
                bound_bps=model,
                limited_by=limited,
                bounds_bps=bounds,
                rtt_s=rtt,
                bdp_bytes=bdp,
                bdps=size / bdp if bdp else None,
                steady=bool(bdp and size / bdp >= steady),
                sender_cc=_sysctl(meta, "primary", "net.ipv4.tcp_congestion_control"),
                receiver_cc=ccs.pop() if len(ccs) == 1 else None,
                advertised_window=int(statistics.median(windows)) if windows else None,
                receive_buffer=_buffer_max(_sysctl(meta, host, "net.ipv4.tcp_rmem")),
                send_buffer=_buffer_max(_sysctl(meta, "primary", "net.ipv4.tcp_wmem")),
            )
        )
    return out
