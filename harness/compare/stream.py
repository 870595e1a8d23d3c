"""What `xfrbench compare` compares of two change-stream runs (pure), one value per repeat:
the serials of one repeat share its primary, its links and its moment, so they are no
independent samples (the rule every fleet statistic follows, harness/results/fleet.py).

- per case and site (and the fleet), the repeat's median load time there: each serial's
  load time is when ceil(0.95 n) of the site's n secondaries served it (its p95
  publication latency, nearest rank); a serial that never got there counts as slower than
  any, and a repeat whose median serial never got there has no value;
- per case with an SLA ([stream] sla, A's applied to both runs), the share of the repeat's
  serials whose fleet load time missed it (never loaded included): higher is worse, a
  difference in share points, with a floor of 5 points (compare/figures.py).
Both are compared like every figure (compare/case.py) and drift is checked over repeats.
"""

from __future__ import annotations

import math

from harness.compare.case import CaseComparison, compare_sides, side_of
from harness.compare.figures import STREAM_LOAD, STREAM_MISSED, Values, scale_of_figure
from harness.core.stats import nearest_rank
from harness.core.terms import SERVER_TO_SERVER
from harness.results.model import TransferRecord
from harness.results.stream import FLEET, serial_loads, sla_targets, stream_records

PER_STREAM_REPEAT = "repeat: the median of its serials' load times, or its share over the SLA"


def _repeat_values(
    records: list[TransferRecord], sla: dict[str, float]
) -> dict[tuple[str, str, str], Values]:
    """(case, site, figure) -> one value per repeat, in the order the repeats ran."""
    loads: dict[tuple[str, str, int], list[float | None]] = {}
    for load in sorted(serial_loads(records), key=lambda x: (x.repeat, x.serial)):
        loads.setdefault((load.case, load.site, load.repeat), []).append(load.load_s)
    out: dict[tuple[str, str, str], Values] = {}
    for (case, site, _repeat), times in loads.items():
        figure = STREAM_LOAD if site else f"{STREAM_LOAD}, fleet"
        entry = out.setdefault((case, site, figure), Values([], 0))
        entry.attempts += 1
        median = nearest_rank([math.inf if t is None else t for t in times], 50)
        if math.isfinite(median):
            entry.values.append(median)
        target = sla.get(case)
        if site == FLEET and target is not None:
            missed = sum(1 for t in times if t is None or t > target) / len(times)
            share = out.setdefault((case, site, STREAM_MISSED), Values([], 0))
            share.attempts += 1
            share.values.append(missed)
    return out


def stream_comparisons(
    records_a: list[TransferRecord], records_b: list[TransferRecord], **options: float
) -> list[CaseComparison]:
    """Per stream case and site (and fleet) in both runs: load times and the share over the
    SLA, one value per repeat (module docstring). The fleet's figures are required."""
    chosen_a, chosen_b = stream_records(records_a), stream_records(records_b)
    if not chosen_a or not chosen_b:
        return []
    sla = sla_targets(chosen_a)
    samples_a, samples_b = _repeat_values(chosen_a, sla), _repeat_values(chosen_b, sla)
    threshold, out = options["threshold"], []
    for (case, site, figure), values_a in samples_a.items():
        values_b = samples_b.get((case, site, figure))
        if values_b is None:
            continue
        scale = scale_of_figure(figure)
        a, b = side_of(values_a, threshold, scale), side_of(values_b, threshold, scale)
        item = compare_sides(case, SERVER_TO_SERVER, a, b, site=site or None, figure=figure,
                             threshold=threshold, alpha=options["alpha"])  # fmt: skip
        item.per = PER_STREAM_REPEAT
        item.required = site == FLEET
        out.append(item)
    return out
