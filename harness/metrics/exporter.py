"""Live Prometheus view of a run: transfer records and resource samples as metrics.

``MetricState`` is the pure part: it folds ``TransferRecord``s and samples (the dicts of
samples.jsonl, see the sampler) into the current value of every series, and says which series
each event changed. The live ``Exporter`` serves that state through prometheus-client (its own
registry, never the global one); ``harness.metrics.openmetrics`` replays the same fold over a
finished run's files, so the live exposition and the backfilled file carry the same names,
types and labels.

Naming (base units, ``_total`` counters, ``promtool check metrics`` clean):
- Throughput and model bounds are in bytes per second, not bits: Prometheus' base unit for
  information is the byte and promtool's linter rejects ``_bits_``. Dashboards multiply by 8.
- A transfer's duration is a histogram (``xfrbench_transfer_duration_seconds``) plus a gauge
  holding the last one (``xfrbench_transfer_last_duration_seconds``): a per-transfer value in
  the file cannot reuse the histogram's name with another type.
- Labels are bounded: run id, case, server kind, role, host, site, transport, xfr, method,
  TCP state, link direction. Never zone names, pids or repeats.
- ``host`` is the testbed host everywhere: a server's ("primary", "secondary", a fleet's
  "<site>-<n>"), a transfer's secondary, a link's secondary (or "uplink", the primary's
  shared access link). ``site`` is a fleet secondary's site, "" for the primary, for a
  single secondary and for the uplink. ``secondary`` keeps its meaning in transfers.jsonl
  (the secondary's server kind); the host is ``host`` in every family, so one
  ``host=~"seoul-.*"`` selector works across transfers, servers and links.
- Fleet figures are per case and repeat-free: the latest repeat's, computed here from its
  records with ``harness.results.fleet`` (the functions that write summary.json), not left
  to PromQL: a repeat's origin is its first NOTIFY, which a per-secondary gauge cannot
  carry, and a PromQL quantile over per-secondary gauges would mix repeats while one runs.
- Counters that come from cumulative readings (CPU seconds, retransmits, link packets) report
  the latest reading per series; a restarted server shows as a counter reset, which
  ``rate()`` handles.
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, get_args

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.exposition import generate_latest
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from harness.errors import UserInputError
from harness.link.losscheck import Verdict
from harness.results.fleet import fleet_repeats, primary_costs
from harness.results.model import TransferRecord
from harness.terms import SERVER_TO_SERVER

if TYPE_CHECKING:
    from harness.plan import CasePlan

Kind = Literal["counter", "gauge", "histogram"]

# From a tiny zone on a LAN (ms) to a TLD over a long lossy link: the finite buckets reach
# past the longest timeout a shipped scenario sets (tld.toml, lfn.toml: 1800 s), so a slow
# transfer that still made it lands in a bucket and not only in +Inf.
DURATION_BUCKETS = (
    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 1800, 3600,
)  # fmt: skip
# le label values, spelled as prometheus-client spells them, in the live and the file output.
BUCKET_LABELS = (*(floatToGoString(b) for b in DURATION_BUCKETS), "+Inf")

# The usual Linux TCP states: always exported (0 when absent) so that a state that empties
# shows as 0 and not as a gap.
TCP_STATES = (
    "established",
    "syn_sent",
    "syn_recv",
    "fin_wait1",
    "fin_wait2",
    "time_wait",
    "close",
    "close_wait",
    "last_ack",
    "listen",
    "closing",
)
_SAFE_VALUE = re.compile(r"^[a-z0-9_]{1,32}$")  # state and bound names taken from data
_SAFE_HOST = re.compile(r"^[a-z0-9][a-z0-9_-]{0,47}$")  # host and site names (spec.SITE_NAME)

T_LABELS = (
    "run_id", "case", "primary", "secondary", "host", "site", "transport", "xfr", "method",
)  # fmt: skip
S_LABELS = ("run_id", "case", "server", "role", "host", "site")
L_LABELS = ("run_id", "case", "host", "site", "direction")  # one way of one link
C_LABELS = ("run_id", "case")
FLEET_STATS = ("first", "p50", "p95", "last")
FLEET_STATUSES = ("recorded", "served", "waited")
LOSS_VERDICTS = tuple(v.replace(" ", "_") for v in get_args(Verdict))


@dataclass(frozen=True)
class Family:
    """One metric family: ``name`` without ``_total`` for counters; ``unit`` is a suffix of
    ``name`` (OpenMetrics UNIT) or empty."""

    name: str
    kind: Kind
    help: str
    labels: tuple[str, ...]
    unit: str = ""


FAMILIES: tuple[Family, ...] = (
    Family(
        "xfrbench_run_info",
        "gauge",
        "The run this exporter reports on (value 1).",
        ("run_id", "scenario", "spec_hash"),
    ),
    Family(
        "xfrbench_transfer_duration_seconds",
        "histogram",
        "Duration of ok and verified transfers, as the method measures it.",
        T_LABELS,
        "seconds",
    ),
    Family(
        "xfrbench_transfer_last_duration_seconds",
        "gauge",
        "Duration of the last ok and verified transfer.",
        T_LABELS,
        "seconds",
    ),
    Family(
        "xfrbench_transfers",
        "counter",
        "Transfer attempts by result (ok = ok and verified).",
        (*T_LABELS, "result"),
    ),
    Family(
        "xfrbench_transfer_bytes",
        "counter",
        "Bytes moved by ok and verified transfers.",
        T_LABELS,
        "bytes",
    ),
    Family(
        "xfrbench_transfer_throughput_bytes_per_second",
        "gauge",
        "Throughput of the last ok and verified transfer (bytes / duration).",
        T_LABELS,
        "bytes_per_second",
    ),
    Family(
        "xfrbench_transfer_bound_bytes_per_second",
        "gauge",
        "Model bound on throughput, primary to secondary (model = the lowest that applies).",
        ("run_id", "case", "host", "site", "bound"),
        "bytes_per_second",
    ),
    Family(
        "xfrbench_server_cpu_seconds",
        "counter",
        "CPU time of the server since it started.",
        (*S_LABELS, "mode"),
        "seconds",
    ),
    Family(
        "xfrbench_server_memory_rss_bytes",
        "gauge",
        "Resident anonymous memory of the server.",
        S_LABELS,
        "bytes",
    ),
    Family(
        "xfrbench_server_memory_peak_bytes",
        "gauge",
        "Peak resident memory of the server.",
        S_LABELS,
        "bytes",
    ),
    Family(
        "xfrbench_server_memory_bytes",
        "gauge",
        "Memory of the server's cgroup including page cache.",
        S_LABELS,
        "bytes",
    ),
    Family(
        "xfrbench_tcp_time_wait_sockets",
        "gauge",
        "TCP sockets in TIME_WAIT in the server's network namespace (sockstat).",
        S_LABELS,
    ),
    Family(
        "xfrbench_tcp_sockets",
        "gauge",
        "TCP sockets by state in the server's network namespace.",
        (*S_LABELS, "state"),
    ),
    Family(
        "xfrbench_ephemeral_ports_in_use",
        "gauge",
        "Local ports of the ephemeral range held by TCP sockets in the server's namespace.",
        S_LABELS,
    ),
    Family(
        "xfrbench_tcp_retransmitted_segments",
        "counter",
        "TCP segments retransmitted in the server's network namespace.",
        S_LABELS,
    ),
    Family(
        "xfrbench_tcp_timeouts",
        "counter",
        "TCP retransmission timeouts in the server's network namespace.",
        S_LABELS,
    ),
    Family(
        "xfrbench_network_transmit_bytes",
        "counter",
        "Bytes the server's network namespace sent on its links.",
        S_LABELS,
        "bytes",
    ),
    Family(
        "xfrbench_network_receive_bytes",
        "counter",
        "Bytes the server's network namespace received on its links.",
        S_LABELS,
        "bytes",
    ),
    Family(
        "xfrbench_link_packets",
        "counter",
        "Packets the emulated link passed or dropped (host: whose link, or uplink).",
        ("run_id", "case", "host", "direction", "verdict"),
    ),
    Family(
        "xfrbench_link_loss_configured_ratio",
        "gauge",
        "Loss rate the link's model should produce, in the last transfer's loss check.",
        L_LABELS,
        "ratio",
    ),
    Family(
        "xfrbench_link_loss_measured_ratio",
        "gauge",
        "Loss rate the link really applied during the last transfer (its random drops).",
        L_LABELS,
        "ratio",
    ),
    Family(
        "xfrbench_link_loss_check",
        "gauge",
        "Verdict of the last transfer's loss check (1 for the verdict given, 0 for others).",
        (*L_LABELS, "verdict"),
    ),
    Family(
        "xfrbench_fleet_propagation_seconds",
        "gauge",
        "Latest repeat: seconds from its first NOTIFY (or command) until the first, median, "
        "95th percentile and last secondary served the new serial, over those so far.",
        (*C_LABELS, "stat"),
        "seconds",
    ),
    Family(
        "xfrbench_fleet_secondaries",
        "gauge",
        "Latest repeat: secondaries with a record, served (verified), waited for a slot.",
        (*C_LABELS, "status"),
    ),
    Family(
        "xfrbench_primary_repeat_cpu_seconds",
        "gauge",
        "CPU the primary spent in the latest repeat (between its start and end marks).",
        C_LABELS,
        "seconds",
    ),
    Family(
        "xfrbench_primary_repeat_peak_connections",
        "gauge",
        "Most established TCP connections the primary held in the latest repeat.",
        C_LABELS,
    ),
    Family(
        "xfrbench_primary_repeat_transmit_bytes",
        "gauge",
        "Bytes the primary sent on its links in the latest repeat.",
        C_LABELS,
        "bytes",
    ),
)
FAMILY = {f.name: f for f in FAMILIES}

SeriesKey = tuple[str, tuple[str, ...]]  # (family name, label values in Family.labels order)


@dataclass
class HistogramValue:
    """Per-bucket (not cumulative) counts, one per BUCKET_LABELS entry, plus sum and count."""

    counts: list[int] = field(default_factory=lambda: [0] * len(BUCKET_LABELS))
    sum: float = 0.0

    def observe(self, value: float) -> None:
        index = next(
            (i for i, bound in enumerate(DURATION_BUCKETS) if value <= bound), len(DURATION_BUCKETS)
        )
        self.counts[index] += 1
        self.sum += value

    @property
    def count(self) -> int:
        return sum(self.counts)

    def cumulative(self) -> list[tuple[str, int]]:
        total = 0
        out = []
        for label, count in zip(BUCKET_LABELS, self.counts, strict=True):
            total += count
            out.append((label, total))
        return out

    def copy(self) -> HistogramValue:
        return HistogramValue(list(self.counts), self.sum)


Value = float | HistogramValue


def transfer_result(record: TransferRecord) -> str:
    if record.unsupported:
        return "unsupported"
    return "ok" if record.counts else "failed"


def record_place(record: TransferRecord) -> tuple[str, str]:
    """(host, site) of a record's secondary: a fleet's records name them; a lone
    secondary is the host "secondary" at no site."""
    host = record.extra.get("host")
    site = record.extra.get("site")
    return (
        host if isinstance(host, str) and _SAFE_HOST.match(host) else "secondary",
        site if isinstance(site, str) and _SAFE_HOST.match(site) else "",
    )


def transfer_time(record: TransferRecord) -> float:
    """When a record's figures became known: its start plus its duration."""
    return record.started_at + (record.duration_s or 0.0)


class MetricState:
    """Current value of every series, folded from records and samples. Not thread-safe;
    ``Exporter`` guards it with a lock."""

    def __init__(self, run_id: str, scenario: str, spec_hash: str) -> None:
        self.run_id = run_id
        self.values: dict[SeriesKey, Value] = {}
        self._states: dict[tuple[str, ...], set[str]] = {}  # TCP states seen per server series
        # The secondaries' hosts seen per case: names the link of a lone secondary, whose
        # link lines carry no host.
        self._secondaries: dict[str, set[str]] = {}
        self._fleet: dict[str, tuple[int, list[TransferRecord]]] = {}  # case -> latest repeat
        self._primary: dict[str, list[dict[str, Any]]] = {}  # case -> lines since its mark
        self._set("xfrbench_run_info", (run_id, scenario, spec_hash), 1.0)

    def _set(self, family: str, labels: tuple[str, ...], value: float) -> SeriesKey:
        key = (family, labels)
        self.values[key] = float(value)
        return key

    def _add(self, family: str, labels: tuple[str, ...], amount: float) -> SeriesKey:
        key = (family, labels)
        old = self.values.get(key, 0.0)
        assert isinstance(old, float)
        self.values[key] = old + amount
        return key

    def _t_values(
        self,
        case: str,
        primary: str,
        secondary: str,
        host: str,
        site: str,
        transport: str,
        xfr: str,
        method: str,
    ) -> tuple[str, ...]:
        return (self.run_id, case, primary, secondary, host, site, transport, xfr, method)

    def expect_transfers(
        self,
        case: str,
        primary: str,
        secondary: str,
        transport: str,
        xfr: str,
        method: str,
        host: str = "secondary",
        site: str = "",
    ) -> list[SeriesKey]:
        """Create a case's transfer counters and histogram at zero before its first transfer:
        without a zero point, ``rate()`` cannot see the first increase of a new series."""
        t_values = self._t_values(case, primary, secondary, host, site, transport, xfr, method)
        keys: list[SeriesKey] = [
            *(("xfrbench_transfers", (*t_values, r)) for r in ("ok", "failed", "unsupported")),
            ("xfrbench_transfer_bytes", t_values),
        ]
        for key in keys:
            self.values.setdefault(key, 0.0)
        histogram: SeriesKey = ("xfrbench_transfer_duration_seconds", t_values)
        self.values.setdefault(histogram, HistogramValue())
        return [*keys, histogram]

    def expect_record(self, record: TransferRecord) -> list[SeriesKey]:
        """``expect_transfers`` for the series ``record`` will change (a replay's zero point)."""
        return self.expect_transfers(
            record.case,
            record.primary,
            record.secondary,
            record.transport,
            record.xfr,
            record.method,
            *record_place(record),
        )

    def add_transfer(self, record: TransferRecord) -> list[SeriesKey]:
        """Fold one transfer attempt; returns the series it changed."""
        host, site = record_place(record)
        t_values = self._t_values(
            record.case,
            record.primary,
            record.secondary,
            host,
            site,
            record.transport,
            record.xfr,
            record.method,
        )
        changed = [self._add("xfrbench_transfers", (*t_values, transfer_result(record)), 1)]
        for name, bps in sorted(record.bound.items()):
            if _SAFE_VALUE.match(name) and _finite(bps):
                changed.append(
                    self._set(
                        "xfrbench_transfer_bound_bytes_per_second",
                        (self.run_id, record.case, host, site, name),
                        bps / 8,
                    )
                )
        changed += self._loss_checks(record, host, site)
        changed += self._fleet_figures(record)
        if not record.counts:
            return changed
        duration = record.duration_s
        assert duration is not None  # record.counts says so
        key: SeriesKey = ("xfrbench_transfer_duration_seconds", t_values)
        histogram = self.values.setdefault(key, HistogramValue())
        assert isinstance(histogram, HistogramValue)
        histogram.observe(duration)
        changed.append(key)
        changed.append(self._set("xfrbench_transfer_last_duration_seconds", t_values, duration))
        if record.bytes is not None:
            changed.append(self._add("xfrbench_transfer_bytes", t_values, record.bytes))
            if duration > 0:
                changed.append(
                    self._set(
                        "xfrbench_transfer_throughput_bytes_per_second",
                        t_values,
                        record.bytes / duration,
                    )
                )
        return changed

    def _loss_checks(self, record: TransferRecord, host: str, site: str) -> list[SeriesKey]:
        """Each direction's loss check of the transfer: configured and measured rate, verdict.
        A fleet names directions "<host> forward" and "uplink forward"; a lone secondary
        "forward" (its own link) and "uplink forward"."""
        link = record.extra.get("link")
        if not isinstance(link, dict):
            return []
        changed: list[SeriesKey] = []
        for name, entry in sorted(link.items()):
            check = entry.get("loss_check") if isinstance(entry, dict) else None
            if not isinstance(name, str) or not isinstance(check, dict):
                continue
            owner, _, direction = name.rpartition(" ")
            if direction not in ("forward", "reverse"):
                continue
            owner = owner or host
            labels = (self.run_id, record.case, owner, site if owner == host else "", direction)
            for family, key in (
                ("xfrbench_link_loss_configured_ratio", "configured_pct"),
                ("xfrbench_link_loss_measured_ratio", "measured_pct"),
            ):
                if _finite(check.get(key)):
                    changed.append(self._set(family, labels, check[key] / 100))
            verdict = str(check.get("verdict", "")).replace(" ", "_")
            if verdict in LOSS_VERDICTS:
                for known in LOSS_VERDICTS:
                    family = "xfrbench_link_loss_check"
                    changed.append(self._set(family, (*labels, known), float(known == verdict)))
        return changed

    def _fleet_figures(self, record: TransferRecord) -> list[SeriesKey]:
        """The propagation figures of the record's repeat, over its records so far, exactly
        as summary.json's fleet section computes them at the end."""
        if record.method != SERVER_TO_SERVER or "host" not in record.extra or record.repeat < 1:
            return []
        case = record.case
        repeat, records = self._fleet.get(case, (0, []))
        if record.repeat < repeat:
            return []  # a straggler from an earlier repeat: the figures are the latest's
        if record.repeat > repeat:
            repeat, records = record.repeat, []
            self._fleet[case] = (repeat, records)
            for stat in FLEET_STATS:  # no figure from an older repeat may stand for this one
                self.values.pop(
                    ("xfrbench_fleet_propagation_seconds", (self.run_id, case, stat)), None
                )
        records.append(record)
        (figures,) = fleet_repeats(records)
        changed = []
        for stat, seconds in zip(
            FLEET_STATS,
            (figures.first_s, figures.p50_s, figures.p95_s, figures.last_s),
            strict=True,
        ):
            if seconds is not None:
                labels = (self.run_id, case, stat)
                changed.append(self._set("xfrbench_fleet_propagation_seconds", labels, seconds))
        for status, count in zip(
            FLEET_STATUSES, (figures.secondaries, figures.served, figures.waited), strict=True
        ):
            changed.append(
                self._set("xfrbench_fleet_secondaries", (self.run_id, case, status), count)
            )
        return changed

    def add_sample(self, sample: dict[str, Any]) -> list[SeriesKey]:
        """Fold one samples.jsonl object; returns the series it changed. A sample without a
        known role or case is a ValueError (a sampler bug); a null or missing reading leaves
        its series alone."""
        role = sample.get("role")
        case = sample.get("case")
        if not isinstance(case, str) or not case:
            raise ValueError(f"sample without a case: {sample!r}")
        if role == "link":
            return self._add_link(case, sample)
        if role in ("primary", "secondary"):
            return self._add_server(case, role, sample)
        raise ValueError(f"sample role {role!r} is not primary, secondary or link")

    def _add_link(self, case: str, sample: dict[str, Any]) -> list[SeriesKey]:
        direction = sample.get("direction")
        if direction not in ("forward", "reverse"):
            raise ValueError(f"link sample direction {direction!r} is not forward or reverse")
        host = sample.get("host")
        if not host:
            # A lone secondary's link is named for no host: it is the case's only secondary's.
            # Until that secondary's first sample says its name the line is left out, which
            # loses nothing: the link's counters are cumulative, the next line has them all.
            seen = self._secondaries.get(case, set())
            if len(seen) != 1:
                return []
            host = next(iter(seen))
        if not isinstance(host, str) or not _SAFE_HOST.match(host):
            raise ValueError(f"link sample with a bad host {host!r}")
        changed = []
        for verdict in ("passed", "dropped"):
            value = sample.get(verdict)
            if _finite(value):
                labels = (self.run_id, case, host, direction, verdict)
                changed.append(self._set("xfrbench_link_packets", labels, value))
        return changed

    def _add_server(self, case: str, role: str, sample: dict[str, Any]) -> list[SeriesKey]:
        server = sample.get("server")
        if not isinstance(server, str) or not _SAFE_VALUE.match(server):
            raise ValueError(f"server sample with a bad server kind {server!r}")
        host = sample.get("host") or role  # lines from before fleets name no host
        site = sample.get("site") or ""
        if not isinstance(host, str) or not _SAFE_HOST.match(host):
            raise ValueError(f"server sample with a bad host {host!r}")
        if not isinstance(site, str) or not _SAFE_HOST.match(site or "x"):
            raise ValueError(f"server sample with a bad site {site!r}")
        if role == "secondary":
            self._secondaries.setdefault(case, set()).add(host)
        s_values = (self.run_id, case, server, role, host, site)
        changed: list[SeriesKey] = []

        def put(family: str, value: Any, labels: tuple[str, ...] = s_values) -> None:
            if _finite(value):
                changed.append(self._set(family, labels, value))

        put("xfrbench_server_cpu_seconds", sample.get("cpu_user_s"), (*s_values, "user"))
        put("xfrbench_server_cpu_seconds", sample.get("cpu_system_s"), (*s_values, "system"))
        put("xfrbench_server_memory_rss_bytes", sample.get("rss_bytes"))
        put("xfrbench_server_memory_peak_bytes", sample.get("peak_rss_bytes"))
        put("xfrbench_server_memory_bytes", sample.get("memory_bytes"))
        tcp = sample.get("tcp")
        if isinstance(tcp, dict):
            put("xfrbench_tcp_time_wait_sockets", tcp.get("time_wait"))
        states = sample.get("tcp_states")
        if isinstance(states, dict):
            seen = self._states.setdefault(s_values, set(TCP_STATES))
            seen.update(s for s in states if isinstance(s, str) and _SAFE_VALUE.match(s))
            for state in sorted(seen):
                put("xfrbench_tcp_sockets", states.get(state, 0), (*s_values, state))
        put("xfrbench_ephemeral_ports_in_use", sample.get("ephemeral_ports_in_use"))
        put("xfrbench_tcp_retransmitted_segments", sample.get("retrans_segs"))
        put("xfrbench_tcp_timeouts", sample.get("tcp_timeouts"))
        put("xfrbench_network_transmit_bytes", sample.get("net_tx_bytes"))
        put("xfrbench_network_receive_bytes", sample.get("net_rx_bytes"))
        if role == "primary":
            changed += self._primary_cost(case, sample)
        return changed

    def _primary_cost(self, case: str, sample: dict[str, Any]) -> list[SeriesKey]:
        """At a repeat's end mark: what the primary spent since its start mark, as
        summary.json's fleet section computes it (``harness.results.fleet.primary_costs``)."""
        event = sample.get("event")
        if event == "transfer-start":
            self._primary[case] = []
        lines = self._primary.get(case)
        if lines is None or not isinstance(sample.get("repeat"), int):
            return []
        lines.append(sample)
        if event != "transfer-end":
            return []
        del self._primary[case]
        costs = primary_costs(lines)
        if len(costs) != 1:
            return []  # marks of different repeats: a sampler bug, no figure
        cost, labels = costs[0], (self.run_id, case)
        changed = []
        for family, figure in (
            ("xfrbench_primary_repeat_cpu_seconds", cost.cpu_s),
            ("xfrbench_primary_repeat_peak_connections", cost.peak_connections),
            ("xfrbench_primary_repeat_transmit_bytes", cost.tx_bytes),
        ):
            if figure is not None:
                changed.append(self._set(family, labels, figure))
        return changed

    def families(self) -> Iterator[Metric]:
        """prometheus-client metric families of the current state (families with no series
        are left out)."""
        by_family: dict[str, list[tuple[tuple[str, ...], Value]]] = {}
        for (name, labels), value in self.values.items():
            by_family.setdefault(name, []).append((labels, value))
        for family in FAMILIES:
            series = by_family.get(family.name)
            if not series:
                continue
            labelnames = list(family.labels)
            metric: Metric
            if family.kind == "histogram":
                histogram = HistogramMetricFamily(family.name, family.help, labels=labelnames)
                for labels, value in sorted(series, key=_by_labels):
                    assert isinstance(value, HistogramValue)
                    histogram.add_metric(list(labels), value.cumulative(), value.sum)
                metric = histogram
            elif family.kind == "counter":
                counter = CounterMetricFamily(family.name, family.help, labels=labelnames)
                for labels, value in sorted(series, key=_by_labels):
                    assert isinstance(value, float)
                    counter.add_metric(list(labels), value)
                metric = counter
            else:
                gauge = GaugeMetricFamily(family.name, family.help, labels=labelnames)
                for labels, value in sorted(series, key=_by_labels):
                    assert isinstance(value, float)
                    gauge.add_metric(list(labels), value)
                metric = gauge
            yield metric


def _by_labels(item: tuple[tuple[str, ...], Value]) -> tuple[str, ...]:
    return item[0]


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


class _StateCollector(Collector):
    """Hands the registry a consistent snapshot of the state, taken under its lock."""

    def __init__(self, state: MetricState, lock: threading.Lock) -> None:
        self._state = state
        self._lock = lock

    def collect(self) -> Iterable[Metric]:
        with self._lock:
            return list(self._state.families())

    def describe(self) -> Iterable[Metric]:
        return []  # no fixed names to reserve; the registry need not collect at register time


class Exporter:
    """Serves a run's metrics on ``address:port`` while the ``with`` block lasts; port 0 picks
    a free port (see ``.port``), port None serves nothing (``exposition()`` still works).
    ``observe_*`` may be called from any thread."""

    def __init__(
        self,
        run_id: str,
        scenario: str,
        spec_hash: str,
        port: int | None,
        address: str = "127.0.0.1",
    ) -> None:
        self.run_id = run_id
        self.address = address
        self._requested_port = port
        self._lock = threading.Lock()
        self._state = MetricState(run_id, scenario, spec_hash)
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_StateCollector(self._state, self._lock))
        self._server: Any = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int | None:
        """The port actually served (after ``__enter__``), or None when not serving."""
        if self._server is None:
            return None
        return int(self._server.server_port)

    @property
    def url(self) -> str | None:
        port = self.port
        return None if port is None else f"http://{_host(self.address)}:{port}/metrics"

    def observe_transfer(self, record: TransferRecord) -> None:
        with self._lock:
            self._state.add_transfer(record)

    def expect_transfers(
        self,
        case: str,
        primary: str,
        secondary: str,
        transport: str,
        xfr: str,
        methods: Iterable[str] = ("server-to-server",),
        host: str = "secondary",
        site: str = "",
    ) -> None:
        """Announce a case before its first transfer (see ``MetricState.expect_transfers``)."""
        with self._lock:
            for method in methods:
                self._state.expect_transfers(
                    case, primary, secondary, transport, xfr, method, host, site
                )

    def expect_case(self, plan: CasePlan) -> None:
        """Announce every transfer series of a case with the labels its records will carry:
        one per secondary (server to server), client pulls on the first secondary's host."""
        for index, host in enumerate(plan.secondaries):
            self.expect_transfers(
                plan.name,
                plan.primary.server.kind,
                host.server.kind,
                plan.transport,
                plan.xfr,
                plan.methods if index == 0 else (SERVER_TO_SERVER,),
                host=host.name if plan.is_fleet else "secondary",
                site=host.site if plan.is_fleet else "",
            )

    def observe_sample(self, sample: dict[str, Any]) -> None:
        with self._lock:
            self._state.add_sample(sample)

    def exposition(self) -> bytes:
        """The Prometheus text format, as a scrape would get it."""
        return generate_latest(self.registry)

    def __enter__(self) -> Exporter:
        if self._requested_port is not None:
            try:
                self._server, self._thread = start_http_server(
                    self._requested_port, addr=self.address, registry=self.registry
                )
            except OSError as exc:
                raise UserInputError(
                    f"cannot serve metrics on {self.address}:{self._requested_port}: "
                    f"{exc.strerror or exc}",
                    key="--prometheus-port",
                    fix="pick a free port, or 0 for any",
                ) from None
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None


def _host(address: str) -> str:
    return f"[{address}]" if ":" in address else address
