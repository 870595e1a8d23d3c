"""When the zones of a cold start were first served: nearest-rank percentiles, the curve
of zones served over time, and how late a served time may be (pure; ``wait_for_zones``
collects the times, the measurement protocol reports these)."""

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


def served_error(served: float, unserved: float | None, origin: float) -> float:
    """How long before ``served`` (the first answer with the wanted serial) the server may
    have begun serving it: back to the send time of the last query it answered without
    it (``unserved``, None when it answered none so) or to ``origin`` (the trigger, before
    which it could not serve), whichever is later. Never negative."""
    start = origin if unserved is None else max(origin, unserved)
    return max(0.0, served - start)


def error_summary(errors: Iterable[float]) -> dict[str, float]:
    """median (nearest rank) and max of error bars, in seconds; {} for none."""
    ordered = sorted(errors)
    if not ordered:
        return {}
    return {"median": round(nearest_rank(ordered, 50), 6), "max": round(ordered[-1], 6)}
