"""What `compare` compares, per case and figure, read from one run folder (pure).

Every gated figure is a sample of values, one per transfer (or, in a fleet or a stream, one
per repeat), so that each has a spread to be judged by:
- duration: each counted transfer's duration_s, per case, method and (in a fleet) site;
- CPU per transfer of each server role (``cpu_s``) and memory per transfer (``memory_peak``:
  the highest anonymous memory from the transfer's start mark to its end mark), from
  harness/results/resources.py ``per_transfer``;
- connections per transfer and TIME_WAIT sockets left per transfer of each role, from each
  record's extra["sockets"] (what the transfer opened and left on its own address pair);
- failures: per case, the attempts meant to count (all but the unsupported) and how many
  of them failed or were not verified.
The names of those keys are here and nowhere else in compare/ (``PER_TRANSFER_KEYS``,
``SOCKET_KEYS``). A run that did not record a figure (an older run: no memory per transfer,
no sockets) has no values for it: compare names it "not recorded", never reads it as 0.

The one memory peak per case and run (summary.json's resources) is reported, never gated:
one value has no spread, and two runs' processes differ by more than a threshold in it.

A fleet's propagation per repeat comes from harness/results/fleet.py (case.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from harness.core.power import ABSOLUTE, LOG
from harness.core.terms import ROLES, SERVER_TO_SERVER
from harness.results.folder import RunFolder
from harness.results.model import FAILURE_WORDS, TransferRecord
from harness.results.resources import peak_memory_bytes, per_transfer, summarize_resources

DURATION = "duration"
CPU = "CPU per transfer"
MEMORY = "memory per transfer"
CONNECTIONS = "connections per transfer"
TIME_WAIT = "TIME_WAIT left per transfer"
PEAK_MEMORY = "peak memory"  # one per case and run: reported, never gated
FAILURES = "failures"
FLEET_FIGURES = ("fleet last", "fleet p95")  # a fleet's propagation, one value per repeat
STREAM_LOAD = "stream load time"  # a stream's load time at a site, one value per repeat
STREAM_MISSED = "stream serials over the SLA"  # share of a repeat's serials, one per repeat
# A catalog's, one value per repeat and consumer (compare/catalog.py).
CATALOG_P95 = "catalog p95"  # its members' provisioning p95 in a phase
CATALOG_LAST = "catalog last"  # ...and the last member's
CATALOG_CPU = "catalog CPU per change"  # the consumer's CPU for a one-member add
CATALOG_RETRANSFERS = "catalog re-transfers"  # members transferred again after a restart
CATALOG_FIGURES = (CATALOG_P95, CATALOG_LAST, CATALOG_CPU, CATALOG_RETRANSFERS)
# per_transfer()'s keys (harness/results/resources.py) and the records' extra["sockets"]
# keys (per role) each figure is read from.
PER_TRANSFER_KEYS = {CPU: "cpu_s", MEMORY: "memory_peak"}
RESOLUTION_KEYS = {CPU: "cpu_resolution"}  # the step each transfer's value moves in
SOCKETS = "sockets"
SOCKET_KEYS = {CONNECTIONS: "connections", TIME_WAIT: "time_wait_left"}
# The order the figures are printed in, and what each one's values are in.
KINDS = (DURATION, *FLEET_FIGURES, STREAM_LOAD, STREAM_MISSED, *CATALOG_FIGURES, CPU, MEMORY,
         CONNECTIONS, TIME_WAIT, PEAK_MEMORY, FAILURES)  # fmt: skip
# The figures a run may not have recorded (an older harness, a backend without samples).
RECORDED_KINDS = (CPU, MEMORY, CONNECTIONS, TIME_WAIT)
UNITS = {DURATION: "s", CPU: "s", MEMORY: "bytes", PEAK_MEMORY: "bytes", CONNECTIONS: "count",
         TIME_WAIT: "sockets", FAILURES: "attempts", STREAM_LOAD: "s",
         STREAM_MISSED: "share"}  # fmt: skip
UNITS |= {figure: "s" for figure in FLEET_FIGURES}
UNITS |= {CATALOG_P95: "s", CATALOG_LAST: "s", CATALOG_CPU: "s", CATALOG_RETRANSFERS: "count"}
# Counts and shares are compared as differences (a connection more per transfer), the rest
# as ratios of trimmed geometric means.
SCALES = {CONNECTIONS: ABSOLUTE, TIME_WAIT: ABSOLUTE, STREAM_MISSED: ABSOLUTE,
          CATALOG_RETRANSFERS: ABSOLUTE}  # fmt: skip
MIB = 1024.0 * 1024.0
# The smallest absolute change that matters whatever the ratio. Counts: one socket or
# connection per transfer. Memory: 4 MiB. In the reference run (quick20-a) one secondary's
# per-transfer memory had medians 1.8 MiB apart in its two processes (two visits of one
# case, one binary and config), while its trimmed spread within a process is under 1 %:
# two runs, or the two sides of an A/B run, never share a process, so a change of that size
# is the process's, not the server's. Half the floor (2 MiB) is the least a regression may
# be (harness/core/power.py FLOOR_SHARE).
FLOORS = {MEMORY: 4 * MIB, CONNECTIONS: 1.0, TIME_WAIT: 1.0, STREAM_MISSED: 0.05,
          CATALOG_RETRANSFERS: 1.0}  # fmt: skip


# CPU and memory per transfer are judged against a threshold of their own: in the reference
# run (quick20-a) CPU per transfer spreads 10-35 % per case, so even over its 16 cases at
# 10 repeats the smallest detectable CPU change is 6-9 %, and a 5 % threshold would need
# some 30 repeats (tests/unit/test_compare_calibration.py). At 10 % the gate decides at 10
# repeats and still catches a 10 % increase (the MDE is under it).
DEFAULT_RESOURCE_THRESHOLD = 0.10
RESOURCE_KINDS = (CPU, MEMORY)


@dataclass(frozen=True)
class Thresholds:
    """The change each figure must be able to show: `change` for durations, fleets,
    streams, counts (with their floors); `resources` for CPU and memory per transfer."""

    change: float
    resources: float = DEFAULT_RESOURCE_THRESHOLD

    def of(self, figure: str) -> float:
        return self.resources if figure_kind(figure) in RESOURCE_KINDS else self.change


def figure_name(kind: str, role: str | None = None) -> str:
    """ "CPU per transfer, secondary"; a figure of no role is its kind."""
    return kind if role is None else f"{kind}, {role}"


def figure_kind(figure: str) -> str:
    return figure.split(", ", 1)[0]


def scale_of_figure(figure: str) -> str:
    return SCALES.get(figure_kind(figure), LOG)


@dataclass
class Values:
    """One figure of one case in one run."""

    values: list[float]  # in the order they were measured
    attempts: int  # what could have given a value (transfers tried)
    series: dict[str, list[float]] = field(default_factory=dict)  # per host, for drift
    single: bool = False  # one value per run (a peak over the case): reported, not gated
    # The step its values move in, where that is coarse enough to matter (CPU read from
    # /proc: a 10 ms clock tick); None: finer than any difference the gate could call.
    resolution: float | None = None


Key = tuple[str, str, str | None, str]  # case, method, site (fleets), figure


def duration_values(records: Iterable[TransferRecord]) -> dict[Key, Values]:
    """Each case's (and fleet site's) counted durations, per host for the drift check. A
    stream's records are its serials' latencies: compare/stream.py takes them per repeat; a
    catalog's, its phases: compare/catalog.py."""
    out: dict[Key, Values] = {}
    for record in records:
        if record.trigger in ("stream", "catalog"):
            continue
        key = (record.case, record.method, record.site, DURATION)
        entry = out.setdefault(key, Values([], 0))
        entry.attempts += 1
        if record.counts and record.duration_s is not None:
            value = float(record.duration_s)
            entry.values.append(value)
            entry.series.setdefault(record.host, []).append(value)
    return out


def _resources(folder: RunFolder) -> dict[str, Any]:
    stored = folder.summary.get("resources") if folder.summary else None
    if isinstance(stored, dict) and stored:
        return stored
    return summarize_resources(folder.samples) if folder.samples else {}


def _add(
    out: dict[Key, Values],
    case: str,
    kind: str,
    role: str,
    values: list[float],
    resolution: float | None = None,
) -> None:
    key = (case, SERVER_TO_SERVER, None, figure_name(kind, role))
    out[key] = Values(values, len(values), {"": values}, resolution=resolution)


def socket_values(records: Iterable[TransferRecord]) -> dict[Key, Values]:
    """Connections and TIME_WAIT left per transfer and role, from extra["sockets"]; records
    without them (a run from before, a transfer that failed before the observation) give no
    value, never a 0."""
    found: dict[tuple[str, str, str], list[float]] = {}
    for record in records:
        sockets = record.extra.get(SOCKETS) if record.method == SERVER_TO_SERVER else None
        if not isinstance(sockets, dict) or "error" in sockets:
            continue
        for role in ROLES:
            side = sockets.get(role)
            for kind, name in SOCKET_KEYS.items():
                value = side.get(name) if isinstance(side, dict) else None
                if isinstance(value, int | float) and not isinstance(value, bool):
                    found.setdefault((record.case, kind, role), []).append(float(value))
    out: dict[Key, Values] = {}
    for (case, kind, role), values in found.items():
        _add(out, case, kind, role, values)
    return out


def resource_values(folder: RunFolder) -> dict[Key, Values]:
    """CPU and memory per transfer and role (those per_transfer() holds), the sockets of
    each transfer, and the one memory peak per case (reported, not gated)."""
    out: dict[Key, Values] = {}
    for case, roles in per_transfer(folder.samples or [], folder.records).items():
        for role in ROLES:
            figures = roles.get(role) or {}
            for kind, name in PER_TRANSFER_KEYS.items():
                values = figures.get(name)
                steps = figures.get(RESOLUTION_KEYS.get(kind, ""))
                if values:  # absent (an older run) or empty: not recorded
                    _add(out, case, kind, role, [float(v) for v in values],
                         max(steps) if steps else None)  # fmt: skip
    out |= socket_values(folder.records)
    for case, hosts in _resources(folder).items():
        if not isinstance(hosts, dict):
            continue
        peaks: dict[str, int] = {}
        for host, figures in hosts.items():
            if host == "link" or not isinstance(figures, dict):
                continue
            role = str(figures.get("role") or host)  # a fleet's hosts name their role
            peak = peak_memory_bytes(figures)
            if role in ROLES and peak is not None:
                peaks[role] = max(peaks.get(role, 0), peak)
        for role, peak in peaks.items():
            key = (case, SERVER_TO_SERVER, None, figure_name(PEAK_MEMORY, role))
            out[key] = Values([float(peak)], 1, single=True)
    return out


@dataclass
class FailureCount:
    counted: int  # attempts meant to count: all but the unsupported
    failed: int  # of those, not ok or not verified
    unsupported: int
    kinds: dict[str, int] = field(default_factory=dict)  # FAILURE_WORDS -> how many


def failure_counts(records: Iterable[TransferRecord]) -> dict[Key, FailureCount]:
    out: dict[Key, FailureCount] = {}
    for record in records:
        key = (record.case, record.method, record.site, FAILURES)
        entry = out.setdefault(key, FailureCount(0, 0, 0))
        if record.unsupported:
            entry.unsupported += 1
            continue
        entry.counted += 1
        if not record.counts:
            entry.failed += 1
            words = FAILURE_WORDS[record.failure or "harness"]
            entry.kinds[words] = entry.kinds.get(words, 0) + 1
    return out
