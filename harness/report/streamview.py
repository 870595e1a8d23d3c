"""The change-stream section's numbers (pure): each stream case's load times per serial and
site, its latency by site, the SLA share, each secondary's transfers and fallbacks, and
each secondary's lag over the run.

Part of the report's model (data.py). The figures are harness/results/stream.py's, the code
that writes summary.json's "stream" section: the report reads that section when the run
wrote it and computes the same from transfers.jsonl when it did not (an interrupted run).
The lag over time always comes from the records (it is not in the summary).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from harness.results.folder import SUMMARY_JSON, TRANSFERS
from harness.results.model import TransferRecord
from harness.results.stream import (
    FLEET,
    LatencyRow,
    SecondaryFacts,
    SerialLoad,
    lag_series,
    stream_records,
    stream_summary,
)


@dataclass
class StreamCase:
    case: str
    serials: int
    late_publishes: int
    max_late_s: float
    sla_s: float | None
    sla: str | None  # the fleet's SLA sentence
    latency: list[LatencyRow]  # the fleet's row first, then each site's
    loads: list[SerialLoad]
    secondaries: list[SecondaryFacts]
    # (repeat, host) -> [(seconds since the stream started, serials behind, seconds behind)]
    lag: dict[tuple[int, str], list[tuple[float, int, float]]]

    @property
    def sites(self) -> list[str]:
        """The sites with rows of their own (FLEET first)."""
        return [row.site for row in self.latency]

    def fallbacks(self) -> list[tuple[SecondaryFacts, dict[str, Any]]]:
        return [(facts, item) for facts in self.secondaries for item in facts.fallbacks]


@dataclass
class StreamData:
    source: str  # "summary.json" or "transfers.jsonl"
    cases: list[StreamCase]


def _rows(kind: type[Any], items: Any) -> list[Any]:
    """Dataclasses from summary.json's dicts; keys this version does not know are ignored."""
    names = {f.name for f in fields(kind)}
    return [kind(**{k: v for k, v in item.items() if k in names}) for item in items]


def _lags(records: list[TransferRecord], case: str) -> dict[tuple[int, str], Any]:
    groups: dict[tuple[int, str], list[TransferRecord]] = {}
    for record in records:
        if record.case == case:
            groups.setdefault((record.repeat, record.host), []).append(record)
    return {key: lag_series(items) for key, items in groups.items()}


def _cases(section: dict[str, Any], records: list[TransferRecord]) -> list[StreamCase]:
    out = []
    for case, figures in section.items():
        latency = _rows(LatencyRow, figures.get("latency") or [])
        latency.sort(key=lambda row: (row.site != FLEET, row.site))
        out.append(
            StreamCase(
                case=case,
                serials=int(figures.get("serials") or 0),
                late_publishes=int(figures.get("late_publishes") or 0),
                max_late_s=float(figures.get("max_late_s") or 0.0),
                sla_s=figures.get("sla_s"),
                sla=figures.get("sla"),
                latency=latency,
                loads=_rows(SerialLoad, figures.get("loads") or []),
                secondaries=_rows(SecondaryFacts, figures.get("secondaries") or []),
                lag=_lags(records, case),
            )
        )
    return out


def stream_data(summary: dict[str, Any] | None, records: list[TransferRecord]) -> StreamData | None:
    """The stream section, None for a run without streams."""
    chosen = stream_records(records)
    stored = summary.get("stream") if isinstance(summary, dict) else None
    if isinstance(stored, dict) and stored:
        try:
            return StreamData(SUMMARY_JSON, _cases(stored, chosen))
        except (TypeError, ValueError, AttributeError):  # a damaged section: recompute
            pass
    computed = stream_summary(chosen)
    if not computed:
        return None
    return StreamData(TRANSFERS, _cases(computed, chosen))
