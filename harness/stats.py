"""Shared statistics for transfer durations: pure functions, no I/O.

- Comparing two samples (`xfrbench compare`): Mann-Whitney U, the smallest p a sample size
  allows, percentile-bootstrap intervals of medians and of their ratio.

Every function assumes nothing about the durations' distribution unless its docstring says so.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 5

# --- two samples --------------------------------------------------------------------------


def min_two_sided_p(n_a: int, n_b: int) -> float:
    """The smallest two-sided p an exact Mann-Whitney test can give for these sample sizes
    (every value of one sample below every value of the other): 2 / C(n_a + n_b, n_a)."""
    if n_a == 0 or n_b == 0:
        return 1.0
    return min(1.0, 2 / math.comb(n_a + n_b, n_a))


def repeats_for_alpha(alpha: float) -> int:
    """The fewest transfers per run (equal in both) for which p < alpha is possible at all."""
    n = 1
    while min_two_sided_p(n, n) >= alpha:
        n += 1
    return n


def coefficient_of_variation(values: Sequence[float]) -> float | None:
    """Sample standard deviation over mean; None under 2 values or with a zero mean."""
    if len(values) < 2:
        return None
    mean = statistics.fmean(values)
    return statistics.stdev(values) / mean if mean else None


def mann_whitney_p(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Two-sided Mann-Whitney U p-value: is one sample stochastically larger? Assumes
    independent values within and between samples (no drift). Exact for
    small samples without ties, normal approximation with tie correction otherwise."""
    if not a or not b:
        return None
    from scipy.stats import mannwhitneyu

    p = float(mannwhitneyu(a, b, alternative="two-sided", method="auto").pvalue)
    return 1.0 if math.isnan(p) else p  # every value tied: no evidence of a shift


def _resampled_medians(values: Sequence[float], rng: Any) -> Any:
    import numpy as np

    data = np.asarray(values, dtype=float)
    picks = rng.integers(0, len(data), size=(BOOTSTRAP_RESAMPLES, len(data)))
    return np.median(data[picks], axis=1)


def bootstrap_intervals(
    a: Sequence[float], b: Sequence[float], confidence: float, seed: int = BOOTSTRAP_SEED
) -> tuple[tuple[float, float] | None, tuple[float, float] | None, tuple[float, float] | None]:
    """Percentile-bootstrap intervals of median A, median B and median B / median A - 1.
    None where a sample has fewer than 2 values (no spread to resample). The fixed seed
    makes the same samples always give the same intervals. Percentile intervals of a median
    are rough for small samples (they can only land on sample values)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    tails = [50 * (1 - confidence), 100 - 50 * (1 - confidence)]

    def interval(values: Any) -> tuple[float, float]:
        low, high = np.percentile(values, tails)
        return float(low), float(high)

    meds_a = _resampled_medians(a, rng) if len(a) >= 2 else None
    meds_b = _resampled_medians(b, rng) if len(b) >= 2 else None
    ci_a = interval(meds_a) if meds_a is not None else None
    ci_b = interval(meds_b) if meds_b is not None else None
    ci_change = None
    if meds_a is not None and meds_b is not None and np.all(meds_a > 0):
        ci_change = interval(meds_b / meds_a - 1)
    return ci_a, ci_b, ci_change
