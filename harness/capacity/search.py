"""The capacity search, pure: step the load up geometrically from `start` until a step fails
its SLA (or `maximum` passes), then bisect between the last pass and the first fail until
they are `resolution` apart. Each step is one call of `run_step(load, attempt)`, which runs
the scenario at that load and calls it pass, fail or noisy (the repeats straddle the SLA:
too noisy to call). A noisy step is run again once with `attempt` 1 (the caller gives it
more repeats); still noisy, it counts as not passing, so the capacity stated is always a
load that passed, and the result names the steps that could not be called.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Verdict = Literal["pass", "fail", "noisy"]


@dataclass(frozen=True)
class StepOutcome:
    """One step: the load, its verdict, the SLA figure (the median over repeats; None when
    it was never reached: a repeat that did not converge) and its interval (the lowest and
    highest repeat), how many repeats, and the run folder that holds it."""

    load: float
    verdict: Verdict
    figure: float | None
    low: float | None = None
    high: float | None = None
    repeats: int = 0
    run: str | None = None
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class SearchResult:
    steps: list[StepOutcome] = field(default_factory=list)  # in the order they ran
    capacity: float | None = None  # the highest load that passed; None: even `start` did not
    first_fail: float | None = None  # the lowest load that did not pass; None: none failed
    reached_max: bool = False  # `maximum` passed: the capacity is at least that, not found
    resolution: float = 1.0

    @property
    def noisy(self) -> list[float]:
        """Loads whose final outcome could not be called, counted as not passing."""
        final: dict[float, StepOutcome] = {s.load: s for s in self.steps}
        return [load for load, step in final.items() if step.verdict == "noisy"]

    def outcome(self, load: float) -> StepOutcome | None:
        """The last outcome at `load` (after a retry, the retry's)."""
        found = [s for s in self.steps if s.load == load]
        return found[-1] if found else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "capacity": self.capacity,
            "first_fail": self.first_fail,
            "reached_max": self.reached_max,
            "resolution": self.resolution,
            "noisy": self.noisy,
            "steps": [s.to_dict() for s in self.steps],
        }


RunStep = Callable[[float, int], StepOutcome]


def next_load(load: float, factor: float, integer: bool) -> float:
    """The next load up: `factor` times this one, at least one more for whole loads."""
    if integer:
        return float(max(int(load) + 1, math.ceil(load * factor)))
    return load * factor


def _run(run_step: RunStep, load: float, result: SearchResult, retries: int) -> bool:
    """Run one step (again while noisy, up to `retries` times); True when it passed."""
    for attempt in range(retries + 1):
        outcome = run_step(load, attempt)
        result.steps.append(outcome)
        if outcome.verdict != "noisy":
            return outcome.verdict == "pass"
    return False


def search(
    run_step: RunStep,
    start: float,
    maximum: float,
    *,
    factor: float = 2.0,
    resolution: float | None = None,
    integer: bool = True,
    noisy_retries: int = 1,
) -> SearchResult:
    """Step up from `start` by `factor` until a step does not pass or `maximum` passed,
    then bisect to `resolution` (default: 1 for whole loads, else 5 % of the first fail)."""
    if not 0 < start <= maximum:
        raise ValueError(f"start {start:g} must be more than 0 and at most maximum {maximum:g}")
    if factor <= 1:
        raise ValueError(f"factor {factor:g} must be more than 1")
    result = SearchResult(resolution=resolution or 1.0)
    load = start
    while True:
        if not _run(run_step, load, result, noisy_retries):
            result.first_fail = load
            break
        result.capacity = load
        if load >= maximum:
            result.reached_max = True
            return result
        load = min(maximum, next_load(load, factor, integer))
    if result.capacity is None:
        return result  # even the first load did not pass: nothing to bisect
    if resolution is None:
        result.resolution = 1.0 if integer else 0.05 * result.first_fail
    low, high = result.capacity, result.first_fail
    while high - low > result.resolution:
        middle = (low + high) / 2
        if integer:
            middle = float(math.floor(middle))
        if middle <= low or middle >= high:
            break
        if _run(run_step, middle, result, noisy_retries):
            low = middle
        else:
            high = middle
    result.capacity, result.first_fail = low, high
    return result
