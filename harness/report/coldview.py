"""A cold start's answer (pure): per case, how long its secondaries took from their start to
serving every zone, and what kept the others from it, in the records' words.

The first screen of a cold-start run (report/screen.py) leads with it; the figures come
from the records of trigger "cold-start" (harness/measure/cold_start_flow.py writes one per
secondary and repeat: the time of its last zone in `duration_s`, the zones in
`extra.zones`).
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field

from harness.results.failures import reason_text
from harness.results.model import FAILURE_WORDS, TransferRecord

COLD_START = "cold-start"


@dataclass
class ColdStartCase:
    case: str
    zones: int | None  # zones each secondary loaded
    secondaries: int  # distinct hosts
    attempts: int  # (secondary, repeat) pairs
    served: int  # of them, every zone served and verified
    median_s: float | None  # from the start to its last zone served, over those served
    fastest_s: float | None
    slowest_s: float | None
    slowest_host: str | None
    # (kind in words, how many, the first one's reason), most frequent first
    failures: list[tuple[str, int, str]] = field(default_factory=list)

    @property
    def answer(self) -> str:
        """ "3 of 3 secondaries served all 100 zones; median 2.41 s" in a line."""
        zones = f"all {self.zones} zones" if self.zones and self.zones > 1 else "the zone"
        return f"{self.served} of {self.attempts} started secondaries served {zones}"


def cold_starts(records: list[TransferRecord]) -> list[ColdStartCase]:
    """Per case of trigger "cold-start", in the order the cases first ran."""
    by_case: dict[str, list[TransferRecord]] = {}
    for record in records:
        if record.trigger == COLD_START and not record.unsupported:
            by_case.setdefault(record.case, []).append(record)
    out = []
    for case, items in by_case.items():
        counted = [r for r in items if r.counts]
        times = [float(r.duration_s or 0.0) for r in counted]
        slowest = max(counted, key=lambda r: float(r.duration_s or 0.0), default=None)
        zones = next((r.extra.get("zones") for r in items if r.extra.get("zones")), None)
        kinds: Counter[str] = Counter()
        first: dict[str, str] = {}
        for record in items:
            if record.counts:
                continue
            words = FAILURE_WORDS[record.failure or "harness"]
            kinds[words] += 1
            first.setdefault(words, f"{record.host}: {reason_text(record)}")
        out.append(
            ColdStartCase(
                case=case,
                zones=int(zones) if isinstance(zones, int) else None,
                secondaries=len({r.host for r in items}),
                attempts=len(items),
                served=len(counted),
                median_s=statistics.median(times) if times else None,
                fastest_s=min(times, default=None),
                slowest_s=max(times, default=None),
                slowest_host=slowest.host if slowest is not None else None,
                failures=[(words, n, first[words]) for words, n in kinds.most_common()],
            )
        )
    return out
