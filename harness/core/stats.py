"""Shared statistics for transfer durations: pure functions, no I/O.

- Comparing two samples (`xfrbench compare`): Mann-Whitney U, the smallest p a sample size
  allows, percentile-bootstrap intervals of medians and of their ratio.
- How precise a median is (adaptive repeats): a distribution-free confidence interval of the
  median from order statistics.
- Percentiles by nearest rank: every percentile the harness prints is a value it measured.
- Whether repeats of one transfer drift (a busy host warming up, a cache filling, a server's
  memory growing): the Mann-Kendall trend test, Sen's slope, and a first-repeat outlier test.

Every function takes the durations in the order they were measured where order matters, and
assumes nothing about their distribution unless its docstring says so.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 5

# --- percentiles --------------------------------------------------------------------------

PERCENTILE_METHOD = "nearest rank"  # how every percentile the harness prints is taken


def nearest_rank(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) of `values` by nearest rank: the smallest value with at
    least q % of the values at or below it, x_(ceil(q n / 100)) (1-based; q = 0 gives the
    smallest). Unlike an interpolated percentile it is always a value that was measured: a
    fleet's p95 is a time at which 95 % of its secondaries really served."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile {q} outside 0..100")
    ordered = sorted(values)
    rank = math.ceil(round(q * len(ordered) / 100, 9))  # round: 95 * 20 / 100 is 19, not 19.0..1
    return ordered[max(rank, 1) - 1]


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
    independent values within and between samples (no drift; see `drift_check`). Exact for
    small samples without ties, normal approximation with tie correction otherwise."""
    if not a or not b:
        return None
    from scipy.stats import mannwhitneyu

    p = float(mannwhitneyu(a, b, alternative="two-sided", method="auto").pvalue)
    return 1.0 if math.isnan(p) else p  # every value tied: no evidence of a shift


BOSCHLOO_MAX_N = 200  # beyond, Boschloo's grid takes seconds: Fisher's test, as exact


def more_failures_p(failed_a: int, total_a: int, failed_b: int, total_b: int) -> float | None:
    """One-sided exact p that run B's failure rate is higher than run A's, from failed of
    total in each: Boschloo's test (as exact as Fisher's and more powerful: 3 of 3 against
    0 of 3 gives 0.016, where Fisher's gives 0.05), Fisher's beyond BOSCHLOO_MAX_N
    attempts. None when a run has no attempt."""
    if total_a <= 0 or total_b <= 0:
        return None
    from scipy.stats import boschloo_exact, fisher_exact

    # Columns are the two samples: B first, so "greater" is B's rate above A's.
    table = [[failed_b, failed_a], [total_b - failed_b, total_a - failed_a]]
    if total_a + total_b <= BOSCHLOO_MAX_N:
        p = float(boschloo_exact(table, alternative="greater").pvalue)
    else:
        p = float(fisher_exact(table, alternative="greater")[1])
    return 1.0 if math.isnan(p) else min(1.0, p)


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


# --- the median's confidence interval -----------------------------------------------------


@dataclass(frozen=True)
class MedianInterval:
    """A distribution-free confidence interval of the median: [low, high] are the order
    statistics x_(rank) and x_(n + 1 - rank) (1-based), and `coverage` the exact probability
    that such an interval holds the true median (at least the confidence asked for)."""

    n: int
    median: float
    low: float
    high: float
    rank: int
    coverage: float

    @property
    def relative_width(self) -> float:
        """(high - low) / median: 0.05 means the median is known to within about +-2.5 %."""
        return (self.high - self.low) / self.median if self.median else math.inf


def _check_confidence(confidence: float) -> None:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence {confidence} is not in (0, 1)")


def median_interval(values: Sequence[float], confidence: float = 0.95) -> MedianInterval | None:
    """The order-statistic confidence interval of the median of `values`.

    Assumes only that the values are independent draws from one continuous distribution:
    the number of values below the true median is then Binomial(n, 1/2), so
    [x_(r), x_(n+1-r)] covers it with probability 1 - 2 P(Bin(n, 1/2) <= r - 1). The
    narrowest such interval with at least `confidence` is returned; None when even
    [min, max] falls short (n < `min_values_for_interval(confidence)`). It is the interval
    scipy.stats.quantile_test(...).confidence_interval gives, with its rank and exact
    coverage. Drift breaks the assumption: check it first (`drift_check`).
    """
    _check_confidence(confidence)
    n = len(values)
    if n == 0:
        return None
    tail = (1 - confidence) / 2

    def below(r: int) -> float:  # P(Bin(n, 1/2) <= r), exact
        return sum(math.comb(n, i) for i in range(r + 1)) / 2**n

    # The largest rank r whose interval still covers with at least `confidence`.
    rank = 0
    while rank + 1 <= (n + 1) // 2 and below(rank) <= tail:
        rank += 1
    if rank == 0:
        return None
    ordered = sorted(float(v) for v in values)
    return MedianInterval(
        n=n,
        median=statistics.median(ordered),
        low=ordered[rank - 1],
        high=ordered[n - rank],
        rank=rank,
        coverage=1 - 2 * below(rank - 1),
    )


def min_values_for_interval(confidence: float = 0.95) -> int:
    """The fewest values for which `median_interval` exists: 1 - 2 / 2**n >= confidence."""
    _check_confidence(confidence)
    n = 1
    while 1 - 2 / 2**n < confidence:
        n += 1
    return n


# --- drift ----------------------------------------------------------------------------------

MIN_TREND_VALUES = 4  # Mann-Kendall needs a few pairs; at 4 no p < 0.083 is possible anyway
EXACT_MAX_N = 50  # exact Mann-Kendall distribution up to here (without ties)
POSSIBLE_DRIFT_CHANGE = 0.10  # see drift_check
MAD_NORMAL = 1.4826  # MAD * this estimates the standard deviation of normal data
FIRST_REPEAT_THRESHOLD = 3.5  # robust z beyond which the first value is an outlier
FIRST_REPEAT_MIN_REST = 4  # values after the first needed for a median and a MAD
MIN_SCALE = 0.005  # relative floor of the robust scale when the MAD is 0


@dataclass(frozen=True)
class Trend:
    """Mann-Kendall test and Sen's slope of a series in measurement order.

    `s` is Mann-Kendall's S (pairs going up minus pairs going down), `variance` its variance
    under "no trend" (tie-corrected), `tau` = S / (n (n - 1) / 2), `p_value` two-sided
    ("exact": from the exact permutation distribution of S, used without ties and for
    n <= EXACT_MAX_N; "normal": normal approximation with tie correction and continuity
    correction). `slope` is Sen's slope (the median of the pairwise slopes, in the values'
    unit per repeat) and `relative_slope` the slope over the series' median: 0.031 means
    +3.1 % per repeat. The test assumes independent values under the null hypothesis, and
    is robust to outliers and to the distribution's shape."""

    n: int
    s: int
    variance: float
    tau: float
    p_value: float
    method: Literal["exact", "normal"]
    slope: float
    relative_slope: float


@functools.lru_cache(maxsize=64)
def _inversions(n: int) -> tuple[int, ...]:
    """How many permutations of n values have k inversions, for each k (Mahonian numbers):
    the null distribution of Mann-Kendall's S = n (n - 1) / 2 - 2 k without ties."""
    counts = [1]
    for size in range(2, n + 1):
        grown = [0] * (len(counts) + size - 1)
        for k, count in enumerate(counts):
            for extra in range(size):
                grown[k + extra] += count
        counts = grown
    return tuple(counts)


def _exact_trend_p(n: int, s: int) -> float:
    """Two-sided exact p of Mann-Kendall's S without ties, as scipy's kendalltau(method=
    "exact") computes it: twice the tail of the smaller of concordant and discordant pairs."""
    pairs = n * (n - 1) // 2
    smaller = (pairs - abs(s)) // 2
    counts = _inversions(n)
    return min(1.0, 2 * sum(counts[: smaller + 1]) / math.factorial(n))


def mann_kendall(values: Sequence[float]) -> Trend | None:
    """The Mann-Kendall trend test and Sen's slope of `values` (in measurement order);
    None under MIN_TREND_VALUES values."""
    values = [float(v) for v in values]  # plain floats: numpy booleans do not subtract
    n = len(values)
    if n < MIN_TREND_VALUES:
        return None
    s = 0
    slopes = []
    for i in range(n - 1):
        for j in range(i + 1, n):
            s += (values[j] > values[i]) - (values[j] < values[i])
            slopes.append((values[j] - values[i]) / (j - i))
    ties = [values.count(v) for v in set(values)]
    variance = (n * (n - 1) * (2 * n + 5) - sum(t * (t - 1) * (2 * t + 5) for t in ties)) / 18
    method: Literal["exact", "normal"]
    if max(ties) == 1 and n <= EXACT_MAX_N:
        # Kendall's exact null distribution of S: the permutations of n by their inversions.
        p = _exact_trend_p(n, s)
        method = "exact"
    elif variance > 0:
        z = (abs(s) - 1) / math.sqrt(variance) if s else 0.0
        p = min(1.0, math.erfc(z / math.sqrt(2)))  # 2 * the normal's upper tail at z
        method = "normal"
    else:  # every value equal: no trend at all
        p, method = 1.0, "normal"
    slope = statistics.median(slopes)  # Sen's slope (scipy.stats.theilslopes's)
    median = statistics.median(values)
    return Trend(
        n=n,
        s=s,
        variance=variance,
        tau=s / (n * (n - 1) / 2),
        p_value=p,
        method=method,
        slope=slope,
        relative_slope=slope / median if median else math.nan,
    )


@dataclass(frozen=True)
class FirstRepeat:
    """The first value against the rest: `ratio` = first / median of the rest, `z` = (first -
    median) / (MAD_NORMAL * MAD of the rest) (a robust z-score: about a standard score for
    normal data, unmoved by a few outliers among the rest; the MAD is floored at MIN_SCALE
    of the median so that identical values do not make every difference infinite).
    `outlier` when |z| > FIRST_REPEAT_THRESHOLD (3.5, Iglewicz and Hoaglin's cut-off)."""

    first: float
    rest_median: float
    ratio: float
    z: float
    outlier: bool

    @property
    def slow(self) -> bool:
        return self.first > self.rest_median


def first_repeat(values: Sequence[float]) -> FirstRepeat | None:
    """Is the first repeat an outlier against the others (a cold cache, a TCP metrics entry,
    a server's first transfer)? None with fewer than FIRST_REPEAT_MIN_REST values after it."""
    if len(values) < FIRST_REPEAT_MIN_REST + 1:
        return None
    first, rest = float(values[0]), [float(v) for v in values[1:]]
    median = statistics.median(rest)
    mad = statistics.median(abs(v - median) for v in rest)
    scale = max(MAD_NORMAL * mad, MIN_SCALE * abs(median))
    if scale == 0:  # every value 0
        return FirstRepeat(first, median, math.nan, 0.0, False)
    z = (first - median) / scale
    return FirstRepeat(
        first=first,
        rest_median=median,
        ratio=first / median if median else math.inf,
        z=z,
        outlier=abs(z) > FIRST_REPEAT_THRESHOLD,
    )


DriftVerdict = Literal["drift", "possible drift", "no drift", "too few"]


@dataclass(frozen=True)
class DriftCheck:
    """A series' drift verdict and the lines a report prints (empty when all is well).

    `trend` is computed without the first repeat when that one is an outlier (a slow start
    is reported as such, not as a trend)."""

    verdict: DriftVerdict
    trend: Trend | None
    first: FirstRepeat | None
    messages: tuple[str, ...]


def drift_check(
    values: Sequence[float],
    *,
    alpha: float = 0.05,
    possible_change: float = POSSIBLE_DRIFT_CHANGE,
) -> DriftCheck:
    """Do repeats of one transfer drift? `values` in measurement order.

    - "drift": Mann-Kendall p < alpha: "drift: +3.1 %/repeat (Mann-Kendall p = 0.01)".
    - "possible drift": not significant, but Sen's slope adds up to at least
      `possible_change` (10 %) over the series. A short series rarely makes a trend
      significant (7 values reach p = 0.0004 only when perfectly monotonic, and each pair out
      of order raises p quickly), yet a 10 % climb across a block of repeats is twice the
      change `xfrbench compare` calls a regression: worth a warning, with the p that says it
      is not proven.
    - "no drift" otherwise; "too few" under MIN_TREND_VALUES values.
    A slow (or fast) first repeat adds "first repeat slow: 1.9x the median of the rest" and
    is left out of the trend.
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha {alpha} is not in (0, 1)")
    first = first_repeat(values)
    messages = []
    series = list(values)
    if first is not None and first.outlier:
        how = "slow" if first.slow else "fast"
        messages.append(f"first repeat {how}: {first.ratio:.3g}x the median of the rest")
        series = series[1:]
    trend = mann_kendall(series)
    if trend is None:
        return DriftCheck("too few", None, first, tuple(messages))
    per_repeat = f"{trend.relative_slope * 100:+.1f} %/repeat"
    total = trend.relative_slope * (trend.n - 1)
    if trend.p_value < alpha:
        verdict: DriftVerdict = "drift"
        messages.append(f"drift: {per_repeat} (Mann-Kendall p = {trend.p_value:.2g})")
    elif abs(total) >= possible_change:
        verdict = "possible drift"
        messages.append(
            f"possible drift: {per_repeat}, {total * 100:+.0f} % over {trend.n} repeats "
            f"(Mann-Kendall p = {trend.p_value:.2g}, not significant)"
        )
    else:
        verdict = "no drift"
    return DriftCheck(verdict, trend, first, tuple(messages))


def check_auto_repeats(
    min_repeats: int, max_repeats: int, target: float, confidence: float
) -> None:
    """Reject settings under which the rule cannot work (ValueError saying why)."""
    floor = min_values_for_interval(confidence)
    if not 0 < target < 1:
        raise ValueError(f"target {target} is not a fraction in (0, 1): 0.05 means 5 %")
    if min_repeats < 1 or max_repeats < min_repeats:
        raise ValueError(f"need 1 <= min_repeats ({min_repeats}) <= max_repeats ({max_repeats})")
    if max_repeats < floor:
        raise ValueError(
            f"max_repeats {max_repeats} is too few for any {confidence:.0%} interval of the "
            f"median (it needs at least {floor} transfers)"
        )


DRIFT_VERDICTS = ("drift", "possible drift")


def drift_messages(durations: list[float]) -> list[str]:
    """drift_check's lines for a case's durations in the order they ran, [] when it does not
    drift (or has too few values to tell: fewer than 4)."""
    check = drift_check(durations)
    if check.verdict in DRIFT_VERDICTS or (check.first is not None and check.first.outlier):
        return list(check.messages)
    return []
