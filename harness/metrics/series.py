"""The current value of every series, folded from a run's events.

``MetricState`` is pure: it folds ``TransferRecord``s and samples (the dicts of
samples.jsonl, see the sampler) into the current value of every series of
``harness.metrics.families``, and says which series each event changed. The live exporter
(``harness.metrics.exporter``) serves that state; ``harness.metrics.openmetrics`` replays the
same fold over a finished run's files, so both carry the same names, types and labels.

- Fleet figures are per case and repeat-free: the latest repeat's, computed here from its
  records with ``harness.results.fleet`` (the functions that write summary.json), not left
  to PromQL: a repeat's origin is its first NOTIFY, which a per-secondary gauge cannot
  carry, and a PromQL quantile over per-secondary gauges would mix repeats while one runs.
  Percentiles are over the whole fleet, as announced (``expect_transfers`` with a site),
  once every secondary of the repeat has a record: a last or p95 the fleet did not reach
  (a secondary failed) is absent, and so is every figure while records are still to come,
  never the time of the secondaries recorded so far.
- Counters that come from cumulative readings (CPU seconds, retransmits, link packets) report
  the latest reading per series; a restarted server shows as a counter reset, which
  ``rate()`` handles.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from harness.core.terms import SERVER_TO_SERVER
from harness.metrics.families import (
    BUCKET_LABELS,
    DURATION_BUCKETS,
    FAMILIES,
    FLEET_STATS,
    FLEET_STATUSES,
    LOSS_VERDICTS,
    TCP_STATES,
)
from harness.results.fleet import fleet_repeats, primary_costs
from harness.results.model import TransferRecord
from harness.results.summary import transfer_rate

_SAFE_VALUE = re.compile(r"^[a-z0-9_]{1,32}$")  # state and bound names taken from data
# A flow's own lines of samples.jsonl, by role: (family, the line's key) each.
LIVE_FIGURES = {
    "stream": (
        ("xfrbench_stream_behind_serials", "behind_serials"),
        ("xfrbench_stream_behind_seconds", "behind_s"),
    ),
    "catalog": (
        ("xfrbench_catalog_members_served", "served"),
        ("xfrbench_catalog_members_behind", "behind"),
    ),
}
_SAFE_HOST = re.compile(r"^[a-z0-9][a-z0-9_-]{0,47}$")  # host and site names (spec.SITE_NAME)
_SAFE_FAULT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")  # a fault's name (its label)

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


TRANSFER_RESULTS = ("ok", "failed", "unsupported", "unchecked")


def transfer_result(record: TransferRecord) -> str:
    if record.unsupported:
        return "unsupported"
    if record.unchecked:
        return "unchecked"
    return "ok" if record.counts else "failed"


def record_place(record: TransferRecord) -> tuple[str, str]:
    """(host, site) of a record's secondary: a fleet's records name them; a lone
    secondary is the host "secondary" at no site."""
    host, site = record.host, record.site
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
        self._fleet_hosts: dict[str, dict[str, str]] = {}  # case -> its secondaries' sites
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
        if site:  # a fleet's secondary: its percentiles are over all of them
            self._fleet_hosts.setdefault(case, {})[host] = site
        keys: list[SeriesKey] = [
            *(
                ("xfrbench_transfers", (*t_values, r))
                for r in ("ok", "failed", "unsupported", "unchecked")
            ),
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
            record.primary_kind,
            record.secondary_kind,
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
            record.primary_kind,
            record.secondary_kind,
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
        changed += self._fault_figures(record, host, site)
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
            rate = transfer_rate(record)
            if rate is not None:
                changed.append(
                    self._set("xfrbench_transfer_throughput_bytes_per_second", t_values, rate / 8)
                )
        return changed

    def _fault_figures(self, record: TransferRecord, host: str, site: str) -> list[SeriesKey]:
        """A faulted repeat's healing of one secondary (measure/faults.py extra.fault)."""
        fault = record.extra.get("fault")
        if not isinstance(fault, dict) or not _SAFE_FAULT.match(str(fault.get("name", ""))):
            return []
        labels = (self.run_id, record.case, str(fault["name"]), host, site)
        changed = [self._set("xfrbench_fault_stuck", labels, float(bool(fault.get("stuck"))))]
        key: SeriesKey = ("xfrbench_fault_heal_seconds", labels)
        if _finite(fault.get("heal_s")):
            changed.append(self._set(*key, fault["heal_s"]))
        else:  # stuck or unaffected this repeat: no heal time stands for it
            self.values.pop(key, None)
        return changed

    def _add_fault(self, case: str, sample: dict[str, Any]) -> list[SeriesKey]:
        """A fault began (active 1) or ended (0), as the fault flow noted it."""
        name = sample.get("fault")
        if not isinstance(name, str) or not _SAFE_FAULT.match(name):
            raise ValueError(f"fault sample with a bad fault name {name!r}")
        if not _finite(sample.get("active")):
            return []
        return [self._set("xfrbench_fault_active", (self.run_id, case, name), sample["active"])]

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
        """The propagation figures of the record's repeat from its records so far, exactly as
        summary.json's fleet section computes them at the end: over the whole fleet, once
        every secondary of the repeat has a record."""
        if record.method != SERVER_TO_SERVER or record.site is None or record.repeat < 1:
            return []
        if record.trigger in ("stream", "catalog"):
            # A stream's figures are per serial (results/stream.py), a catalog's per phase
            # (results/catalog.py): neither is one propagation per repeat.
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
        fleet = self._fleet_hosts.get(case)
        (figures,) = fleet_repeats(records, {case: fleet} if fleet else None)
        # A secondary still to be recorded may have served at any time, or never.
        complete = bool(fleet) and set(fleet) <= {r.host for r in records}
        changed = []
        for stat, seconds in zip(
            FLEET_STATS,
            (figures.first_s, figures.p50_s, figures.p95_s, figures.last_s),
            strict=True,
        ):
            key: SeriesKey = ("xfrbench_fleet_propagation_seconds", (self.run_id, case, stat))
            if seconds is not None and complete:
                changed.append(self._set(*key, seconds))
            else:  # not reached, not known yet, or of a fleet of unknown size: no figure
                self.values.pop(key, None)
        counts = (
            figures.secondaries,
            len(records),
            figures.served,
            figures.reconnected,
            figures.possibly_waited,
        )
        for status, count in zip(FLEET_STATUSES, counts, strict=True):
            key = ("xfrbench_fleet_secondaries", (self.run_id, case, status))
            if count is not None:
                changed.append(self._set(*key, count))
            else:  # not counted: no series rather than a 0
                self.values.pop(key, None)
        key = ("xfrbench_fleet_refusals", (self.run_id, case))
        if figures.refusals is not None:
            changed.append(self._set(*key, figures.refusals))
        else:  # not logged: no series rather than a 0
            self.values.pop(key, None)
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
        if role == "fault":
            return self._add_fault(case, sample)
        if role in LIVE_FIGURES:
            return self._add_live(case, role, sample)
        raise ValueError(
            f"sample role {role!r} is not primary, secondary, link, fault, stream or catalog"
        )

    def _add_live(self, case: str, role: str, sample: dict[str, Any]) -> list[SeriesKey]:
        """A flow's own live figures of one secondary: a change stream's lag
        (measure/live_stream.py), a catalog consumer's members (measure/live_catalog.py)."""
        host, site = sample.get("host"), sample.get("site") or ""
        if not isinstance(host, str) or not _SAFE_HOST.match(host):
            raise ValueError(f"{role} sample with a bad host {host!r}")
        if not isinstance(site, str) or not _SAFE_HOST.match(site or "x"):
            raise ValueError(f"{role} sample with a bad site {site!r}")
        labels = (self.run_id, case, host, site)
        changed = []
        for family, key in LIVE_FIGURES[role]:
            if _finite(sample.get(key)):
                changed.append(self._set(family, labels, sample[key]))
        return changed

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
        put("xfrbench_server_memory_anon_bytes", sample.get("anon_bytes"))
        put("xfrbench_server_memory_charged_bytes", sample.get("charged_bytes"))
        put("xfrbench_server_memory_charged_peak_bytes", sample.get("charged_peak_bytes"))
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
