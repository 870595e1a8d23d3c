"""The gate calibrated on a real run's repeats: A/A comparisons must stay quiet at the
stated rate, and a planted 10 % slow-down or CPU increase must be caught.

The fixture, tests/fixtures/compare/quick20-a.json, holds per case and figure the values the
gate reads (durations, each role's CPU per transfer) of a real run of scenarios/quick.toml
with repeats = 20 (16 cases, bind -> bind, 20 ms RTT, 0.1 % loss), in the order they ran;
it was made by

    .venv/bin/python bench/gate/extract.py /work/data/quick20-a \\
        > tests/fixtures/compare/quick20-a.json

Each draw splits every case's 20 transfers at random into A and B (10 and 10: the repeats
the README recommends; one split per case, so a transfer's duration and CPU stay together)
and runs the gate's own pure path (compare/gate.py gate_values: Yuen's tests, the overall
comparisons, Holm within the families, the verdicts) at its defaults: alpha 0.05,
thresholds 5 % (durations) and 10 % (CPU). 200 seeded draws per row; `pytest -s` prints the
table the note quotes. What random splits cannot show: a run-to-run component (two runs'
processes, the machine's state), which is why the interleaved A/B run is the recommended
gate (compare/ab.py).
"""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import pytest

from harness.compare.figures import CPU, DURATION, Key, Values, figure_kind
from harness.compare.gate import EXIT_CANNOT_TELL, EXIT_REGRESSION, gate_values
from harness.core.terms import SERVER_TO_SERVER

pytestmark = pytest.mark.slow  # 200 draws a row: half a minute in all

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "compare" / "quick20-a.json"
DRAWS = 200
RECOMMENDED = 10  # repeats per case and run: README's "An upgrade gate in CI"
ALPHA = 0.05
PLANTED = 1.10


def load() -> dict[str, dict[str, list[float]]]:
    cases = json.loads(FIXTURE.read_text())["cases"]
    assert len(cases) == 16 and all(len(v) == 20 for f in cases.values() for v in f.values())
    return cases


def draw(
    cases: dict[str, dict[str, list[float]]], rng: random.Random, n: int, plant: str | None
) -> tuple[dict[Key, Values], dict[Key, Values]]:
    """One A/A split of n against n transfers per case; B's `plant` figures x PLANTED."""
    a: dict[Key, Values] = {}
    b: dict[Key, Values] = {}
    for case, figures in cases.items():
        order = list(range(20))
        rng.shuffle(order)
        picks_a, picks_b = sorted(order[:n]), sorted(order[n : 2 * n])
        for figure, values in figures.items():
            key = (case, SERVER_TO_SERVER, None, figure)
            factor = PLANTED if plant is not None and figure_kind(figure) == plant else 1.0
            side_a = [values[i] for i in picks_a]
            side_b = [values[i] * factor for i in picks_b]
            a[key] = Values(side_a, n, {"": side_a})
            b[key] = Values(side_b, n, {"": side_b})
    return a, b


def outcomes(n: int, plant: str | None, seed: int = 28) -> Counter[int]:
    cases, rng = load(), random.Random(seed)
    counts: Counter[int] = Counter()
    for _ in range(DRAWS):
        a, b = draw(cases, rng, n, plant)
        counts[gate_values(a, b, alpha=ALPHA).exit_status()] += 1
    return counts


def test_the_gate_is_calibrated_at_the_recommended_repeats() -> None:
    rows = {plant: outcomes(RECOMMENDED, plant) for plant in (None, DURATION, CPU)}
    print(f"\n{DRAWS} draws, {RECOMMENDED} against {RECOMMENDED} repeats of 16 cases "
          "(exit 0 / 1 / 4):")  # fmt: skip
    for plant, counts in rows.items():
        what = "A/A" if plant is None else f"B's {plant} x {PLANTED}"
        shares = " / ".join(f"{counts[s] / DRAWS:.1%}" for s in (0, EXIT_REGRESSION,
                                                                EXIT_CANNOT_TELL))  # fmt: skip
        print(f"  {what:32} {shares}")
    false_alarms = rows[None][EXIT_REGRESSION] / DRAWS
    assert false_alarms <= ALPHA  # the family-wise rate the output states
    assert rows[None][EXIT_CANNOT_TELL] / DRAWS <= 0.10  # a gate that can say "no"
    assert rows[DURATION][EXIT_REGRESSION] / DRAWS >= 0.90
    assert rows[CPU][EXIT_REGRESSION] / DRAWS >= 0.90


@pytest.mark.parametrize("n", [3, 5])
def test_fewer_repeats_cannot_tell_rather_than_pass(n: int) -> None:
    """At 3 or 5 repeats the CPU over all cases cannot resolve 10 %: most A/A draws cannot
    tell (exit 4), false alarms stay under alpha, and none of that is a pass."""
    counts = outcomes(n, None)
    print(f"\nA/A, {n} against {n}: exit 0 / 1 / 4 = {counts[0]} / {counts[1]} / {counts[4]}")
    assert counts[EXIT_REGRESSION] / DRAWS <= ALPHA
    assert counts[EXIT_CANNOT_TELL] / DRAWS >= 0.5


def test_three_repeats_against_a_copy_with_doubled_secondary_cpu_is_a_regression() -> None:
    """Issue 28's try: a 3-repeat run of quick.toml against a copy whose secondary CPU
    counters were doubled exited 0 (no rank test can go under p = 0.1 at 3 against 3)."""
    a: dict[Key, Values] = {}
    b: dict[Key, Values] = {}
    for case, figures in load().items():
        for figure, values in figures.items():
            key = (case, SERVER_TO_SERVER, None, figure)
            first = values[:3]
            doubled = [2 * v for v in first] if figure == f"{CPU}, secondary" else first
            a[key], b[key] = Values(first, 3, {"": first}), Values(doubled, 3, {"": doubled})
    judged = gate_values(a, b)
    assert judged.exit_status() == EXIT_REGRESSION
    overall = next(c for c in judged.cases if c.overall and c.figure == f"{CPU}, secondary")
    assert overall.regression and overall.change is not None and overall.change > 0.9
