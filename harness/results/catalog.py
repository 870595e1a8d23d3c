"""summary.json's "catalog" section: per case, catalog phase (provision, add, remove,
restart) and consumer, and for all consumers together, the members served (k of N) and
the provisioning latency p50 / p95 / last by nearest rank over every (consumer, member)
pair of every repeat, a member never served ranking last ("not reached", None, when the
rank falls on one: never dropped); the consumer's CPU seconds (median over repeats), its
charged memory peak (the highest), and what a restart transferred again (a change of
ownership: the moved members it transferred again, in the same column)."""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from typing import Any

from harness.results.model import TransferRecord
from harness.results.stream import reached

ALL = ""  # the consumer of the rows over every consumer


def catalog_records(records: Iterable[TransferRecord]) -> list[TransferRecord]:
    return [r for r in records if r.trigger == "catalog" and "catalog" in r.extra]


def _row(case: str, phase: str, host: str, mine: list[TransferRecord]) -> dict[str, Any]:
    values: list[float | None] = []
    members = served = 0
    cpu, peaks, again = [], [], []
    for record in mine:
        facts = record.extra["catalog"]
        members += facts["members"]
        served += facts["served"]
        values += [ms / 1000 for ms in facts.get("latencies_ms", [])]
        values += [None] * (facts["members"] - facts["served"])
        if facts.get("consumer_cpu_s") is not None:
            cpu.append(facts["consumer_cpu_s"])
        if facts.get("consumer_peak_bytes") is not None:
            peaks.append(facts["consumer_peak_bytes"])
        if facts.get("transfers_after_restart") is not None:
            again.append(facts["transfers_after_restart"])
        if facts.get("retransfers") is not None:  # a change of ownership's moved members
            again.append(facts["retransfers"])
    return {
        "case": case,
        "phase": phase,
        "consumer": host,
        "repeats": len({r.repeat for r in mine}),
        "members": members,
        "served": served,
        "p50_s": reached(values, 50),
        "p95_s": reached(values, 95),
        "last_s": reached(values, 100),
        "consumer_cpu_s": statistics.median(cpu) if cpu else None,
        "consumer_peak_bytes": max(peaks) if peaks else None,
        "transfers_after_restart": max(again) if again else None,
        "failed": sum(1 for r in mine if not r.counts),
    }


def catalog_summary(records: list[TransferRecord]) -> list[dict[str, Any]]:
    """One row per case, phase and consumer, then the phase's row over all consumers, in
    the order they ran; [] for a run without catalogs."""
    groups: dict[tuple[str, str], dict[str, list[TransferRecord]]] = {}
    for record in catalog_records(records):
        phase = str(record.extra["catalog"]["phase"])
        groups.setdefault((record.case, phase), {}).setdefault(record.host, []).append(record)
    rows = []
    for (case, phase), by_host in groups.items():
        for host, mine in by_host.items():
            rows.append(_row(case, phase, host, mine))
        if len(by_host) > 1:
            rows.append(_row(case, phase, ALL, [r for m in by_host.values() for r in m]))
    return rows
