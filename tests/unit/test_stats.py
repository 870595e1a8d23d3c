"""Shared statistics: the median's interval, Mann-Kendall, Sen's slope, first-repeat test."""

from __future__ import annotations

import itertools
import math
import statistics

import numpy as np
import pytest
from scipy.stats import quantile_test

from harness.core.stats import (
    FIRST_REPEAT_THRESHOLD,
    POSSIBLE_DRIFT_CHANGE,
    drift_check,
    first_repeat,
    mann_kendall,
    median_interval,
    min_values_for_interval,
)

ISSUE_14 = [1.373, 1.349, 1.366, 1.598, 1.561, 1.490, 1.722]  # 7 repeats of one TCP transfer


def mk_s(values: list[float]) -> int:
    return sum(
        (values[j] > values[i]) - (values[j] < values[i])
        for i, j in itertools.combinations(range(len(values)), 2)
    )


def permutation_p(values: list[float]) -> float:
    """Two-sided p of S by enumerating every order of the values (no ties)."""
    observed = abs(mk_s(values))
    hits = total = 0
    for order in itertools.permutations(values):
        total += 1
        hits += abs(mk_s(list(order))) >= observed
    return hits / total


def noisy(rng: np.random.Generator, n: int, cv: float, slope: float = 0.0) -> list[float]:
    return [float(1.0 * (1 + slope * i) * (1 + cv * rng.standard_normal())) for i in range(n)]


# --- median interval ----------------------------------------------------------------------


def test_median_interval_is_scipys_order_statistic_interval() -> None:
    rng = np.random.default_rng(1)
    for n in (6, 7, 10, 15, 31):
        values = list(rng.lognormal(size=n))
        got = median_interval(values, 0.95)
        assert got is not None
        want = quantile_test(values, q=float(np.median(values)), p=0.5).confidence_interval(0.95)
        assert (got.low, got.high) == (want.low, want.high)
        assert got.coverage >= 0.95 and got.median == statistics.median(values)


def test_median_interval_smallest_sample() -> None:
    # [min, max] covers the median unless all n values fall on one side: 1 - 2 / 2**n.
    floor = min_values_for_interval(0.95)
    assert 1 - 2 / 2**floor >= 0.95 > 1 - 2 / 2 ** (floor - 1)
    assert median_interval([1.0] * (floor - 1), 0.95) is None
    interval = median_interval([3.0, 1.0, 2.0, 5.0, 4.0, 6.0][:floor], 0.95)
    assert interval is not None and interval.rank == 1
    assert interval.coverage == pytest.approx(1 - 2 / 2**floor)


def test_median_interval_covers_as_promised() -> None:
    # Skewed data (lognormal, true median 1): the share of intervals holding the true median
    # is at least the coverage they claim, within simulation error.
    rng = np.random.default_rng(2)
    trials, n = 2000, 15
    hits = claimed = 0.0
    for _ in range(trials):
        interval = median_interval(list(rng.lognormal(size=n)), 0.9)
        assert interval is not None
        hits += interval.low <= 1.0 <= interval.high
        claimed = interval.coverage
    se = math.sqrt(claimed * (1 - claimed) / trials)
    assert hits / trials > claimed - 3 * se


def test_relative_width() -> None:
    interval = median_interval([1.0, 1.02, 0.98, 1.01, 0.99, 1.03, 0.97], 0.95)
    assert interval is not None
    assert interval.relative_width == pytest.approx((interval.high - interval.low) / 1.0)


# --- Mann-Kendall and Sen's slope ---------------------------------------------------------


def test_mann_kendall_statistic_and_variance_by_hand() -> None:
    # 1 3 2 4: five pairs go up, one goes down; Var(S) = n (n-1) (2n+5) / 18 = 4*3*13/18.
    trend = mann_kendall([1.0, 3.0, 2.0, 4.0])
    assert trend is not None
    assert (trend.s, trend.tau) == (4, pytest.approx(4 / 6))
    assert trend.variance == pytest.approx(4 * 3 * 13 / 18)
    assert trend.method == "exact"


def test_mann_kendall_tie_correction() -> None:
    # 1 2 2 3 5: one tie group of 2 removes 2*1*9 from n (n-1) (2n+5) = 5*4*15.
    values = [1.0, 2.0, 2.0, 3.0, 5.0]
    trend = mann_kendall(values)
    assert trend is not None
    assert trend.s == mk_s(values) == 9
    assert trend.variance == pytest.approx((5 * 4 * 15 - 2 * 1 * 9) / 18)
    assert trend.method == "normal"
    z = (abs(trend.s) - 1) / math.sqrt(trend.variance)
    assert trend.p_value == pytest.approx(math.erfc(z / math.sqrt(2)))


def test_mann_kendall_exact_p_is_the_permutation_p() -> None:
    rng = np.random.default_rng(3)
    for values in (ISSUE_14, [float(v) for v in rng.normal(size=6)], [1.0, 2.0, 3.0, 4.0, 5.0]):
        trend = mann_kendall(values)
        assert trend is not None and trend.method == "exact"
        assert trend.p_value == pytest.approx(permutation_p(values))


def test_sens_slope_of_a_line_and_an_outlier() -> None:
    line = [2.0 + 0.1 * i for i in range(9)]
    line[3] = 50.0  # one wild value does not move the median of pairwise slopes much
    trend = mann_kendall(line)
    assert trend is not None
    assert trend.slope == pytest.approx(0.1, rel=0.2)
    assert trend.relative_slope == pytest.approx(trend.slope / statistics.median(line))


def test_too_few_values() -> None:
    assert mann_kendall([1.0, 2.0, 3.0]) is None
    assert first_repeat([1.0, 2.0, 3.0, 4.0]) is None
    assert drift_check([1.0, 2.0]).verdict == "too few"


# --- drift verdicts on synthetic series ---------------------------------------------------


def test_flat_noisy_series_is_not_drift() -> None:
    rng = np.random.default_rng(4)
    check = drift_check(noisy(rng, 12, 0.02))
    assert check.verdict == "no drift" and check.messages == ()
    # Over many flat series, "drift" comes at about alpha, and "possible drift" rarely.
    verdicts = [drift_check(noisy(rng, 12, 0.02)).verdict for _ in range(400)]
    assert verdicts.count("drift") / 400 < 0.05 + 3 * math.sqrt(0.05 * 0.95 / 400)
    assert verdicts.count("possible drift") / 400 < 0.05


def test_drifting_series_is_flagged() -> None:
    rng = np.random.default_rng(5)
    values = noisy(rng, 10, 0.01, slope=0.03)
    check = drift_check(values)
    assert check.verdict == "drift"
    assert check.trend is not None and check.trend.p_value < 0.05
    # Sen's slope recovers the climb: 0.03 per repeat over a median near 1 + 0.03 * 4.5.
    assert check.trend.relative_slope == pytest.approx(0.03 / statistics.median(values), rel=0.25)
    (message,) = check.messages
    assert message.startswith("drift: +") and "%/repeat (Mann-Kendall p = " in message
    flagged = [drift_check(noisy(rng, 10, 0.01, slope=0.03)).verdict for _ in range(100)]
    assert flagged.count("drift") >= 95


def test_slow_first_repeat_is_an_outlier_not_drift() -> None:
    rng = np.random.default_rng(6)
    values = [1.9, *noisy(rng, 9, 0.01)]
    check = drift_check(values)
    assert check.first is not None and check.first.outlier and check.first.slow
    assert check.first.z > FIRST_REPEAT_THRESHOLD
    assert check.verdict == "no drift"  # the trend is judged without the first repeat
    assert check.messages == (
        f"first repeat slow: {check.first.ratio:.3g}x the median of the rest",
    )
    assert check.first.ratio == pytest.approx(1.9 / statistics.median(values[1:]))


def test_slow_first_repeat_does_not_hide_a_drift() -> None:
    # A slow start before a steady climb: left in, the first value's pairs all go down and
    # cancel the climb's; left out, the climb is found.
    rng = np.random.default_rng(7)
    values = [1.9, *noisy(rng, 7, 0.005, slope=0.02)]
    with_first = mann_kendall(values)
    assert with_first is not None and with_first.p_value > 0.05
    check = drift_check(values)
    assert check.verdict == "drift" and check.trend is not None and check.trend.n == 7
    assert [m.split(":")[0] for m in check.messages] == ["first repeat slow", "drift"]


def test_first_repeat_among_identical_values() -> None:
    # MAD 0: the scale falls back to a small fraction of the median, so a 2x first repeat is
    # flagged and an equal one is not.
    assert first_repeat([2.0, 1.0, 1.0, 1.0, 1.0, 1.0]).outlier  # type: ignore[union-attr]
    assert not first_repeat([1.0] * 6).outlier  # type: ignore[union-attr]


def test_issue_14_series() -> None:
    check = drift_check(ISSUE_14)
    trend = check.trend
    assert trend is not None and check.first is not None
    assert not check.first.outlier  # the first repeat is not what is wrong here
    # Mann-Kendall cannot prove a trend on 7 values with two steps back...
    assert trend.p_value == pytest.approx(permutation_p(ISSUE_14)) and trend.p_value > 0.05
    # ...but Sen's slope says the run climbed by more than the possible-drift threshold.
    slopes = [(ISSUE_14[j] - ISSUE_14[i]) / (j - i) for i, j in itertools.combinations(range(7), 2)]
    relative = statistics.median(slopes) / statistics.median(ISSUE_14)
    assert trend.relative_slope == pytest.approx(relative)
    assert relative * 6 >= POSSIBLE_DRIFT_CHANGE
    assert check.verdict == "possible drift"
    (message,) = check.messages
    assert message.startswith(f"possible drift: {relative * 100:+.1f} %/repeat")
    assert "not significant" in message
