"""What `compare` compares, per case and figure, read from one run folder (pure).

- duration: each counted transfer's duration_s, per case, method and (in a fleet) site;
- CPU per transfer of each server role, and the most TIME_WAIT sockets each role held
  during each transfer: one value per transfer, from samples.jsonl
  (harness/results/resources.py ``per_transfer``);
- peak memory of each role: the one peak per case of summary.json's resources, through
  ``peak_memory_bytes`` (from samples.jsonl when the run never wrote a summary);
- failures: per case, the attempts meant to count (all but the unsupported) and how many
  of them failed or were not verified.

A fleet's propagation per repeat comes from harness/results/fleet.py (gate.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from harness.core.terms import ROLES, SERVER_TO_SERVER
from harness.results.folder import RunFolder
from harness.results.model import FAILURE_WORDS, TransferRecord
from harness.results.resources import peak_memory_bytes, per_transfer, summarize_resources

DURATION = "duration"
CPU = "CPU per transfer"
MEMORY = "peak memory"
TIME_WAIT = "TIME_WAIT peak"
FAILURES = "failures"
FLEET_FIGURES = ("fleet last", "fleet p95")  # a fleet's propagation, one value per repeat
# The order the figures are printed in, and what each one's values are in.
KINDS = (DURATION, *FLEET_FIGURES, CPU, MEMORY, TIME_WAIT, FAILURES)
UNITS = {DURATION: "s", CPU: "s", MEMORY: "bytes", TIME_WAIT: "sockets", FAILURES: "attempts"}
UNITS |= {figure: "s" for figure in FLEET_FIGURES}
# Smallest difference that can matter, whatever the ratio: a peak's sampling step.
FLOORS = {MEMORY: 1024.0 * 1024.0, TIME_WAIT: 1.0}


def figure_name(kind: str, role: str | None = None) -> str:
    """ "CPU per transfer, secondary"; a figure of no role is its kind."""
    return kind if role is None else f"{kind}, {role}"


def figure_kind(figure: str) -> str:
    return figure.split(", ", 1)[0]


@dataclass
class Values:
    """One figure of one case in one run."""

    values: list[float]  # in the order they were measured
    attempts: int  # what could have given a value (transfers tried)
    series: dict[str, list[float]] = field(default_factory=dict)  # per host, for drift
    single: bool = False  # one value per run (a peak over the case): nothing to test


Key = tuple[str, str, str | None, str]  # case, method, site (fleets), figure


def duration_values(records: Iterable[TransferRecord]) -> dict[Key, Values]:
    """Each case's (and fleet site's) counted durations, per host for the drift check."""
    out: dict[Key, Values] = {}
    for record in records:
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


def resource_values(folder: RunFolder) -> dict[Key, Values]:
    """CPU and TIME_WAIT per transfer, and the memory peak, per case and server role."""
    out: dict[Key, Values] = {}
    for case, roles in per_transfer(folder.samples or [], folder.records).items():
        for role in ROLES:
            figures = roles.get(role)
            if not figures:
                continue
            for kind, name in ((CPU, "cpu_s"), (TIME_WAIT, "time_wait_left")):
                values = [float(v) for v in figures[name]]
                key = (case, SERVER_TO_SERVER, None, figure_name(kind, role))
                out[key] = Values(values, len(values), {"": values})
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
            key = (case, SERVER_TO_SERVER, None, figure_name(MEMORY, role))
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
