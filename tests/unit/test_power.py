"""harness/core/power.py: Yuen's trimmed test against scipy's, the detectable change and the
repeats it needs, the combination of cases, Holm's procedure."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from scipy import stats

from harness.core.power import (
    ABSOLUTE,
    FLOOR_SHARE,
    LOG,
    combine,
    detectable,
    holm,
    repeats_needed,
    scaled,
    trimmed,
    yuen,
)


def test_yuen_is_scipys_trimmed_welch_test() -> None:
    rng = random.Random(4)
    for _ in range(20):
        a = [rng.lognormvariate(0, 0.1) for _ in range(rng.randint(3, 25))]
        b = [rng.lognormvariate(0.05, 0.2) for _ in range(rng.randint(3, 25))]
        effect = yuen(a, b)
        assert effect is not None and effect.scale == LOG
        ref = stats.ttest_ind(np.log(b), np.log(a), equal_var=False, trim=0.2)
        assert effect.estimate / effect.se == pytest.approx(ref.statistic)
        assert effect.df == pytest.approx(ref.df)
        one_sided = ref.pvalue / 2 if ref.statistic > 0 else 1 - ref.pvalue / 2
        assert effect.p_worse() == pytest.approx(one_sided)


def test_one_outlier_in_ten_moves_nothing() -> None:
    """A retransmission timeout (65x the median in the reference run) is trimmed away."""
    a = [0.075, 0.077, 0.074, 0.078, 0.076, 0.075, 0.079, 0.074, 0.076, 0.077]
    b = [*a[:9], 5.0]
    effect = yuen(a, b)
    assert effect is not None and abs(effect.change) < 0.005 and effect.p_worse() > 0.3
    side = trimmed(b)
    assert side is not None and side.h == 6 and side.mean < 0.08


def test_values_at_or_below_zero_are_compared_as_differences() -> None:
    effect = yuen([0.0, 0.001, 0.002, 0.001], [0.002, 0.003, 0.002, 0.004])
    assert effect is not None and effect.scale == ABSOLUTE and effect.estimate > 0
    assert yuen([1.0], [1.0, 2.0]) is None  # one value: no spread, no test
    # A ratio asked of a figure that read 0 (a per-transfer counter on a remote host): a
    # difference instead, never a crash (a lab-versus-netns compare hit this).
    asked = yuen([0.0, 1.0, 2.0, 1.0], [1.0, 2.0, 1.0, 2.0], LOG)
    assert asked is not None and asked.scale == ABSOLUTE


def test_constant_samples_are_certain() -> None:
    more = yuen([1.0] * 5, [2.0] * 5, ABSOLUTE)
    assert more is not None and more.se == 0 and more.p_worse() == 0.0
    same = yuen([1.0] * 5, [1.0] * 5, ABSOLUTE)
    assert same is not None and same.p_worse() == 1.0


def test_the_detectable_change_is_the_tests_reach_plus_its_power() -> None:
    se, df, level = 0.02, 30.0, 0.01
    reach = stats.t.ppf(1 - level, df) * se
    assert detectable(se, df, level, 0.05) == pytest.approx(reach + stats.t.ppf(0.8, df) * se)
    # with a tiny spread, the smallest regression counted (half the threshold) decides
    tiny = detectable(1e-5, df, level, 0.05)
    assert tiny == pytest.approx(FLOOR_SHARE * 0.05, abs=1e-4)


def test_repeats_needed_resolve_the_threshold() -> None:
    se, df, n = 0.04, 16.0, 10
    assert detectable(se, df, 0.001, 0.05) > 0.05
    needed = repeats_needed(se, df, n, 0.001, 0.05)
    assert needed is not None and needed > n
    se_n, df_n = scaled(se, df, n, needed)
    assert detectable(se_n, df_n, 0.001, 0.05) <= 0.05
    se_less, df_less = scaled(se, df, n, needed - 1)
    assert detectable(se_less, df_less, 0.001, 0.05) > 0.05
    assert repeats_needed(5.0, df, n, 0.001, 0.05) is None  # beyond 1000


def test_combine_is_the_mean_of_the_cases() -> None:
    rng = random.Random(9)
    effects = []
    for shift in (0.1, 0.1, 0.1, 0.1):
        a = [rng.lognormvariate(0, 0.1) for _ in range(10)]
        b = [rng.lognormvariate(shift, 0.1) for _ in range(10)]
        effect = yuen(a, b)
        assert effect is not None
        effects.append(effect)
    combined = combine(effects)
    assert combined is not None
    assert combined.estimate == pytest.approx(sum(e.estimate for e in effects) / 4)
    assert combined.se == pytest.approx(math.sqrt(sum(e.se**2 for e in effects)) / 4)
    assert combined.df > max(e.df for e in effects)  # four cases' worth
    assert combined.p_worse() < min(e.p_worse() for e in effects)


def test_holm_steps_down() -> None:
    rejected, adjusted = holm([0.01, 0.04, 0.03, 0.005], 0.05)
    # sorted: 0.005 <= 0.05/4, 0.01 <= 0.05/3, 0.03 > 0.05/2: stop
    assert rejected == [True, False, False, True]
    assert adjusted == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([], 0.05) == ([], [])


def test_repeats_needed_is_the_fewest_enough_as_a_linear_search_finds_it() -> None:
    """Bisection (the detectable effect only falls with n) gives the linear search's n."""
    import random

    from harness.core import power

    rng = random.Random(11)
    for _ in range(200):
        se, df = rng.uniform(0.001, 0.2), rng.uniform(2, 40)
        n_now, level = rng.uniform(3, 20), rng.choice([0.05, 0.01, 0.001])
        threshold = rng.choice([0.05, 0.1])
        linear = next(
            (
                n
                for n in range(2, power.MAX_REPEATS + 1)
                if power.detectable(*power.scaled(se, df, n_now, n), level, threshold) <= threshold
            ),
            None,
        )
        assert power.repeats_needed(se, df, n_now, level, threshold) == linear
