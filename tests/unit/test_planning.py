"""What compare could detect, planned (harness/results/planning.py): a run's own spread
measured as the reference's was, the report's lines from it, and the figure names and
thresholds held equal to compare's."""

from __future__ import annotations

import math
import random

import pytest

from harness.compare import figures
from harness.results import planning


def test_the_names_and_thresholds_are_compares() -> None:
    assert planning.DURATION == figures.DURATION
    assert planning.CPU == figures.CPU
    assert planning.DEFAULT_RESOURCE_THRESHOLD == figures.DEFAULT_RESOURCE_THRESHOLD


def test_a_measured_spread_is_the_winsorized_sd_of_logs() -> None:
    rng = random.Random(3)
    # Log-normal values with a log SD of 0.05: a 20 %-winsorized SD is about 0.64 of it.
    cases = [[math.exp(rng.gauss(0, 0.05)) for _ in range(400)] for _ in range(4)]
    spread = planning.measured_spread(cases)
    assert spread == pytest.approx(0.05 * planning.WINSORIZED_SHARE, rel=0.12)
    # A retransmission timeout in a case barely moves it: winsorized, not squared.
    cases[0][7] = 65.0
    assert planning.measured_spread(cases) == pytest.approx(spread, rel=0.05)
    assert planning.measured_spread([[1.0, 2.0]]) is None  # under 5 values: nothing


def test_a_run_says_what_compare_could_detect_with_its_own_spread() -> None:
    rng = random.Random(5)
    steady = {f"c{i}": [0.1 * math.exp(rng.gauss(0, 0.02)) for _ in range(5)] for i in range(16)}
    noisy_cpu = {f"c{i} primary": [0.003 * math.exp(rng.gauss(0, 0.2)) for _ in range(5)]
                 for i in range(16)}  # fmt: skip
    lines = planning.run_plan_lines(steady, noisy_cpu)
    assert lines[0].startswith("compare's power at 5 repeats (this run's spread;")
    assert "over all 16 cases" in lines[0]
    assert lines[1].startswith("repeats needed: duration 5% over all cases needs repeats >= ")
    # The noisier CPU needs more repeats than the steady durations, over all cases.
    duration, cpu = lines[1].removeprefix("repeats needed: ").split("; ")
    over_all = [int(part.split("needs repeats >= ")[1].split(" ")[0]) for part in (duration, cpu)]
    assert over_all[1] > over_all[0]
    assert planning.run_plan_lines({}, {}) == []
    (few,) = planning.run_plan_lines({"c": [0.1, 0.1, 0.1]}, {})
    assert few.startswith("compare's power: 3 verified transfers a case are too few")


def test_the_report_says_what_compare_could_detect() -> None:
    from pathlib import Path

    from harness.report.data import load_report_data

    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "runs" / "report-quick"
    (line,) = load_report_data(fixture).compare_plan  # 3 repeats a case
    assert "too few to measure this run's spread" in line
