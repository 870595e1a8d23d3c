"""A fleet's figures from its records (pure): how fast a new serial reached the whole fleet,
whether it reached all of it, which site was last, how often the primary refused a transfer
for want of a slot, per-site tables, and what the primary spent per repeat as the fleet grows.

Convergence is stated, never implied: every repeat says how many of its N secondaries served
the new serial ("14 of 16 served"). Its percentiles are taken by nearest rank over all N
(harness.core.stats.nearest_rank), a secondary that never served counting as later than
any time: p95 is the time by which 95 % of the fleet served it, and "not converged" (None)
when fewer did; "last" is a time only when all N served. Who is missing, and why, is said
in the records' own words (the harness's error, the secondary's first failure line). A
secondary that never got its first copy (one host down from the start) is left out of the
visit's measured set but not out of N: it has a failed record in every repeat, so the fleet
did not converge while its other sites' figures (site_rows) stay measured.

Propagation is counted from one origin per repeat, so that secondaries are comparable:
with trigger "notify" the first NOTIFY the primary sent to any secondary in that repeat,
served or not (a secondary's record is timed from its own NOTIFY: its fleet time adds how
much later that NOTIFY left); with "retransfer" the control command, the records' own
origin.

Waiting for a transfer slot (the primary's transfers-out, xfrd or worker limits) is counted
where it is seen, and guessed only under the name "possibly":
- refusals: the lines the primary wrote for each transfer it refused, in its own wording
  (servers/refusals.py), over the repeat; None where its dialect has no such wording ("not
  logged", never 0). Its lines name no secondary, so the count is the repeat's.
- reconnected: secondaries that opened more than one connection during their transfer,
  connections told apart by source port (a retransmitted SYN is not a second one).
- possibly waited: secondaries whose connect came later after their SOA query than three
  round trips and 50 ms explain. A heuristic: a busy CPU delays a connect just as a slot
  does (bench/README-fleet.md found 46 of 64 "waiting" where the primary refused none).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from harness.core.stats import PERCENTILE_METHOD, nearest_rank
from harness.core.terms import SERVER_TO_SERVER
from harness.results.groups import group_by
from harness.results.model import FAILURE_WORDS, TransferRecord
from harness.results.summary import counted
from harness.servers.failures import FailureCounts

SLOT_GRACE_S = 0.050  # a connect this much (plus 3 RTT) after the SOA query possibly waited
NOT_CONVERGED = "not converged"
NO_RECORD = "no record of this repeat (an interrupted run)"


@dataclass
class FleetRepeat:
    case: str
    repeat: int
    secondaries: int  # N: the fleet
    served: int  # k: verified transfers that count
    first_s: float | None
    # Nearest rank over all N: None when that rank fell on a secondary that never served.
    p50_s: float | None
    p95_s: float | None
    last_s: float | None  # None unless all N served
    last_host: str | None
    last_site: str | None
    times: dict[str, float] = field(default_factory=dict)  # host -> fleet time
    served_of: str = ""  # "k of N served", as every view shows it beside the times
    converged: bool = False  # all N served
    # Who did not serve and why: {host, site, failure, error, server_said, server_silent}.
    missing: list[dict[str, Any]] = field(default_factory=list)
    refusals: int | None = None  # the primary's log, the repeat's; None: not logged
    reconnected: int | None = None  # None: records from before connections were counted
    possibly_waited: int = 0  # a heuristic, see the module's docstring

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def why_missing(self) -> list[str]:
        """One line per missing secondary, in the records' own words."""
        return [missing_text(m) for m in self.missing]


def missing_text(missing: dict[str, Any]) -> str:
    """ "edge-3 (seoul): timed out: timeout after 20 s: ...; its log: '...'"."""
    where = f"{missing.get('host')} ({missing.get('site')})"
    text = f"{where}: {missing.get('failure') or 'failed'}"
    if missing.get("error"):
        text += f": {missing['error']}"
    if missing.get("server_said"):
        text += f"; its log: {missing['server_said']!r}"
    elif missing.get("server_silent"):
        text += f"; its log: {missing['server_silent']}"
    return text


def refused_text(refusals: int) -> str:
    """Beside who is missing: what the primary's log said about its slots."""
    return f"the primary logged {refusals} refusal(s) for want of a slot in this repeat"


def fleet_time(record: TransferRecord) -> float | None:
    """Seconds from the repeat's trigger (the reload command with notify) to served."""
    if record.duration_s is None:
        return None
    return record.duration_s + record.phases.get("notify_sent", 0.0)


def fleet_percentile(served: list[float], fleet: int, q: float) -> float | None:
    """The q-th percentile (nearest rank) of a fleet of `fleet` secondaries of which those
    in `served` served, at those times: None when its rank falls past them."""
    if fleet < 1 or len(served) > fleet:
        raise ValueError(f"{len(served)} served of a fleet of {fleet}")
    value = nearest_rank(sorted(served) + [math.inf] * (fleet - len(served)), q)
    return None if math.isinf(value) else value


def possibly_waited(record: TransferRecord) -> bool:
    """Its connect came later after its SOA query than 3 round trips and 50 ms explain: it
    may have waited for a slot, or for a CPU (a heuristic, never a count of refusals)."""
    soa, connect = record.phases.get("soa_query"), record.phases.get("connect")
    if soa is None or connect is None:
        return False
    rtt = float(record.extra.get("path_rtt_s") or 0.0)
    return connect - soa > SLOT_GRACE_S + 3 * rtt


def refusals(records: list[TransferRecord]) -> int | None:
    """The primary's refusals in a repeat, from its records (each counted the primary's
    log from the repeat's start to its own end: the latest saw the most); None when a
    record says its primary's dialect logs none, or none has a count (older records)."""
    counts = [(r.server_logged.get("primary_refusals") or {}) for r in records]
    if not counts or any("refusals" not in c or c["refusals"] is None for c in counts):
        return None
    return max(int(c["refusals"]) for c in counts)


def reconnected(records: list[TransferRecord]) -> int | None:
    """Secondaries that opened more than one connection (distinct source ports) during
    their transfer; None when no record counted connections (older records)."""
    wires = [r.extra.get("wire") or {} for r in records]
    counted = [w["connections"] for w in wires if "connections" in w]
    return sum(1 for n in counted if n > 1) if counted else None


def _failure_counts(record: TransferRecord) -> tuple[FailureCounts | None, str]:
    """Its secondary's failure counts that say why it is missing, and over what: since its
    start for one the visit left out of its measured set (extra.missing,
    measure/measured.py: why it never got its first copy), else this repeat's; None where
    the record has none."""
    since_start = (record.extra.get("missing") or {}).get("secondary_failures")
    if isinstance(since_start, dict) and since_start:
        return FailureCounts.from_json(since_start), "since its start"
    counts = FailureCounts.from_json(record.server_logged.get("secondary_failures"))
    return counts, "in this repeat"


def server_said(record: TransferRecord) -> str | None:
    """The first failure line its secondary logged (_failure_counts); None when none."""
    counts, _ = _failure_counts(record)
    return None if counts is None else counts.first_failure_line


def server_silent(record: TransferRecord) -> str | None:
    """When its secondary's log holds no failure line at all, that said plainly, with the
    categories its server never logs (NSD 4.6: a transfer given up on its own timer), so
    that silence is not read as health; None when it logged one, or nothing is known."""
    counts, window = _failure_counts(record)
    if counts is None or counts.failing_lines:
        return None
    unlogged = ", ".join(category.replace("_", " ") for category in counts.unlogged)
    server = counts.server or record.secondary_kind
    text = f"no failure line {window}"
    return text + (f" ({server} does not log: {unlogged})" if unlogged else "")


def _missing(record: TransferRecord) -> dict[str, Any]:
    return {
        "host": record.host,
        "site": record.site,
        "failure": FAILURE_WORDS.get(record.failure, record.failure) if record.failure else None,
        "error": record.error,
        "server_said": server_said(record),
        "server_silent": server_silent(record),
    }


def _fleet_update(record: TransferRecord) -> bool:
    """A fleet secondary's record of a measured update (a stream's, one per serial, has
    results/stream.py's figures; a catalog's, one per phase, results/catalog.py's)."""
    return (
        record.method == SERVER_TO_SERVER
        and record.site is not None
        and record.repeat >= 1
        and record.trigger not in ("stream", "catalog")
    )


def fleet_repeats(
    records: Iterable[TransferRecord], fleets: dict[str, dict[str, str]] | None = None
) -> list[FleetRepeat]:
    """One entry per (case, repeat) of fleet records, in the order they ran. `fleets`:
    per case, its secondaries (host -> site); by default every host with a record of the
    case in any repeat (a repeat without a record of one of them was interrupted)."""
    kept = [r for r in records if _fleet_update(r)]
    groups = group_by(kept, lambda r: (r.case, r.repeat))
    hosts: dict[str, dict[str, str]] = {}
    for record in kept:
        hosts.setdefault(record.case, {})[record.host] = record.site or ""
    if fleets is not None:
        hosts |= fleets
    return [_repeat(case, repeat, items, hosts[case]) for (case, repeat), items in groups.items()]


def _repeat(
    case: str, repeat: int, items: list[TransferRecord], fleet: dict[str, str]
) -> FleetRepeat:
    counted = [r for r in items if r.counts]
    raw = {r.host: fleet_time(r) for r in counted}
    times = {host: t for host, t in raw.items() if t is not None}
    # The first NOTIFY to any secondary, served or not (failed records keep their phase).
    notify = [r.phases["notify_sent"] for r in items if "notify_sent" in r.phases]
    origin = min(notify) if notify else 0.0
    times = {host: round(t - origin, 6) for host, t in times.items()}
    ordered = sorted(times.values())
    size = max(len(fleet), len({r.host for r in items}))
    missing = [_missing(r) for r in items if r.host not in times]
    seen = {r.host for r in items}
    missing += [
        {
            "host": host,
            "site": site,
            "failure": None,
            "error": NO_RECORD,
            "server_said": None,
            "server_silent": None,
        }
        for host, site in fleet.items()
        if host not in seen
    ]
    converged = not missing and len(times) == size
    last_host = max(times, key=lambda h: times[h]) if converged else None
    sites = {r.host: r.site for r in items}
    return FleetRepeat(
        case=case,
        repeat=repeat,
        secondaries=size,
        served=len(times),
        first_s=ordered[0] if ordered else None,
        p50_s=fleet_percentile(ordered, size, 50),
        p95_s=fleet_percentile(ordered, size, 95),
        last_s=ordered[-1] if converged else None,
        last_host=last_host,
        last_site=sites.get(last_host) if last_host else None,
        times=times,
        served_of=f"{len(times)} of {size} served",
        converged=converged,
        missing=missing,
        refusals=refusals(items),
        reconnected=reconnected(counted),
        possibly_waited=sum(1 for r in counted if possibly_waited(r)),
    )


def fleet_repeat_values(records: Iterable[TransferRecord]) -> dict[int, float | None]:
    """One value per repeat of one fleet case's records (or one site's), what every
    statistic over a fleet takes: the time its last secondary served, from the repeat's
    first NOTIFY; None for a repeat that did not converge. Never one value per secondary:
    the secondaries of a repeat share its NOTIFY, its primary and its links, and are no
    independent samples (their durations would make p-values too small, and an
    auto-repeated fleet stop after one repeat)."""
    return {r.repeat: r.last_s for r in fleet_repeats(records)}


@dataclass
class SiteRow:
    case: str
    site: str
    secondaries: int
    transfers: int
    ok: int
    median_s: float | None
    throughput_bps: float | None  # median
    bound_bps: float | None  # median model bound of its path
    loss_checks: dict[str, int]  # verdict -> how many direction checks said it

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def site_rows(records: Iterable[TransferRecord]) -> list[SiteRow]:
    """Per case and site: durations, throughput against the site's bound, loss checks."""
    groups = group_by(
        records,
        lambda r: (r.case, r.site),
        lambda r: r.method == SERVER_TO_SERVER and r.site is not None,
    )
    rows = []
    for (case, site), items in groups.items():
        figures = counted(items)
        verdicts: dict[str, int] = {}
        for r in items:
            for direction in (r.extra.get("link") or {}).values():
                check = direction.get("loss_check") if isinstance(direction, dict) else None
                if check:
                    verdicts[check["verdict"]] = verdicts.get(check["verdict"], 0) + 1
        rows.append(
            SiteRow(
                case=case,
                site=site,
                secondaries=len({r.host for r in items}),
                transfers=len(items),
                ok=len(figures.records),
                median_s=figures.median_s,
                throughput_bps=figures.throughput_bps,
                bound_bps=figures.bound_bps,
                loss_checks=verdicts,
            )
        )
    return rows


@dataclass
class PrimaryCost:
    case: str
    repeat: int
    cpu_s: float | None  # the primary's CPU from the repeat's start mark to its end mark
    peak_rss_bytes: int | None  # the highest anonymous memory sampled in the repeat
    peak_connections: int | None  # established TCP connections, highest sampled
    tx_bytes: int | None  # sent on its links during the repeat

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def primary_costs(samples: Iterable[dict[str, Any]]) -> list[PrimaryCost]:
    """Per case and repeat, what the primary spent between the repeat's marks (samples of
    role "primary" with the repeat set: its start mark, periodic ones, its end mark)."""
    groups = group_by(
        samples,
        lambda s: (str(s.get("case")), int(s["repeat"])),
        lambda s: s.get("role") == "primary" and isinstance(s.get("repeat"), int),
    )
    out = []
    for (case, repeat), lines in groups.items():
        lines.sort(key=lambda s: s.get("t", 0))
        start = next((s for s in lines if s.get("event") == "transfer-start"), None)
        end = next((s for s in reversed(lines) if s.get("event") == "transfer-end"), None)
        cpu = tx = None
        if start is not None and end is not None and start.get("pid") == end.get("pid"):
            cpu = _cpu(end) - _cpu(start)
            tx = int(end.get("net_tx_bytes", 0)) - int(start.get("net_tx_bytes", 0))
        rss = [int(s["anon_bytes"]) for s in lines if isinstance(s.get("anon_bytes"), int)]
        conns = [int((s.get("tcp_states") or {}).get("established", 0)) for s in lines]
        out.append(
            PrimaryCost(
                case=case,
                repeat=repeat,
                cpu_s=round(cpu, 6) if cpu is not None and cpu >= 0 else None,
                peak_rss_bytes=max(rss) if rss else None,
                peak_connections=max(conns) if conns else None,
                tx_bytes=tx if tx is not None and tx >= 0 else None,
            )
        )
    return out


def _cpu(sample: dict[str, Any]) -> float:
    return float(sample.get("cpu_user_s", 0.0)) + float(sample.get("cpu_system_s", 0.0))


def median_over_repeats(values: list[float | None]) -> float | None:
    """The median over repeats of a figure that a repeat may lack (it did not converge): a
    missing one counts as later than any, so the median is a time only when at least half
    of the repeats have one."""
    if not values:
        return None
    median = statistics.median(math.inf if v is None else v for v in values)
    return None if math.isinf(median) else median


def _total(counts: list[int | None]) -> int | None:
    """A count over repeats, None when a repeat has none (not logged, not counted)."""
    return None if not counts or None in counts else sum(c for c in counts if c is not None)


def fleet_summary(records: list[TransferRecord], samples: list[dict[str, Any]]) -> dict[str, Any]:
    """summary.json's "fleet" section: per case, its repeats, its sites and the primary's
    cost; {} for a run without fleets."""
    repeats = fleet_repeats(records)
    if not repeats:
        return {}
    sites = site_rows(records)
    costs = primary_costs(samples)
    out: dict[str, Any] = {}
    for case in dict.fromkeys(r.case for r in repeats):
        mine = [r for r in repeats if r.case == case]
        converged = sum(1 for r in mine if r.converged)
        out[case] = {
            "secondaries": max(r.secondaries for r in mine),
            "percentiles": PERCENTILE_METHOD,
            "converged_repeats": converged,
            "converged": f"{converged} of {len(mine)} repeats converged",
            "median_last_s": median_over_repeats([r.last_s for r in mine]),
            "median_p95_s": median_over_repeats([r.p95_s for r in mine]),
            "refusals": _total([r.refusals for r in mine]),
            "reconnected": _total([r.reconnected for r in mine]),
            "possibly_waited": sum(r.possibly_waited for r in mine),
            "repeats": [r.to_dict() for r in mine],
            "sites": [s.to_dict() for s in sites if s.case == case],
            "primary": [c.to_dict() for c in costs if c.case == case],
        }
    return out
