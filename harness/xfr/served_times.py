"""When the zones of a cold start were first served: nearest-rank percentiles and the curve
of zones served over time (pure; ``wait_for_zones`` collects the times, the measurement
protocol reports these)."""

from __future__ import annotations

from collections.abc import Iterable

from harness.core.stats import nearest_rank


def served_distribution(times: Iterable[float], since: float) -> dict[str, float]:
    """first, p50, p95, last of the times zones were first served, in seconds after
    ``since`` (nearest-rank percentiles: each is one zone's real time). Empty: {}."""
    ordered = sorted(t - since for t in times)
    if not ordered:
        return {}
    return {
        "first": ordered[0],
        "p50": nearest_rank(ordered, 50),
        "p95": nearest_rank(ordered, 95),
        "last": ordered[-1],
    }


def served_curve(times: Iterable[float], since: float, points: int = 50) -> list[list[float]]:
    """The curve of zones served over time: ``points`` pairs [seconds after since, zones
    served by then], evenly spaced up to the last zone's time (which ends the curve)."""
    if points < 1:
        raise ValueError(f"a curve needs at least one point, not {points}")
    ordered = sorted(t - since for t in times)
    if not ordered:
        return []
    last = ordered[-1]
    out: list[list[float]] = []
    count = 0
    for k in range(1, points + 1):
        at = last * k / points
        while count < len(ordered) and ordered[count] <= at:
            count += 1
        out.append([round(at, 6), count])
    out[-1][1] = len(ordered)  # the last zone counts despite rounding
    return out
