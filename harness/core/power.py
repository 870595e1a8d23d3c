"""The comparison gate's statistics (pure): a test that can reach significance at small n
and survives single outliers, the smallest change it can detect, the repeats it needs, the
combination of many cases into one figure, and Holm's correction over a family.

- `yuen`: Yuen's test, Welch's t on 20 %-trimmed means with winsorized variances (Yuen
  1974; scipy.stats.ttest_ind(..., trim=0.2, equal_var=False) computes the same t and df).
  On log values for positive figures (durations, CPU seconds, bytes), so the effect is the
  ratio of trimmed geometric means and a 10 % slow-down is the same size on a 70 ms and a
  2 s transfer. Trimming 20 % of each tail keeps a retransmission timeout (a transfer 65x
  its median in the reference run) from deciding anything, and unlike a rank test it can
  reach p < 0.001 with 10 values a side: Mann-Whitney's smallest p at 3 against 3 is 0.1.
- `mde`: the smallest true change the gate calls a regression with `POWER` (80 %, the usual
  reading: one real change in five of exactly that size goes unseen; larger ones less
  often) at a one-sided level; `repeats_needed` solves it for n from the observed spread.
- `combine`: the mean of per-case effects (benchstat's geomean row turned into a test),
  with Satterthwaite's degrees of freedom: a broad 10 % CPU increase that no single case
  can resolve (CPU per transfer spreads 10-35 % per case) is clear over 16 cases.
- `holm`: Holm's step-down procedure, which keeps the family-wise error rate at alpha under
  any dependence between the tests (the figures of one case are not independent).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

TRIM = 0.2  # of each tail: Wilcox's recommendation; at n = 10 two values a side go
POWER = 0.80
SMALLEST = 1.0e-12  # log of a value at or below 0 is no value: such samples go absolute

LOG = "log"  # the effect is the ratio of trimmed geometric means
ABSOLUTE = "absolute"  # the effect is the difference of trimmed means (counts, shares)


@dataclass(frozen=True)
class Trimmed:
    """One sample's trimmed mean and the variance of it Yuen's test uses."""

    n: int
    mean: float  # 20 %-trimmed mean
    d: float  # (n - 1) s_w^2 / (h (h - 1)): the squared standard error of `mean`
    h: int  # values left after trimming

    @property
    def df(self) -> float:
        return float(self.h - 1)


def trimmed(values: Sequence[float], trim: float = TRIM) -> Trimmed | None:
    """The trimmed mean and Yuen's variance of it; None under 2 values left after trimming."""
    ordered = sorted(float(v) for v in values)
    n = len(ordered)
    g = math.floor(trim * n)
    h = n - 2 * g
    if h < 2:
        return None
    kept = ordered[g : n - g]
    low, high = kept[0], kept[-1]
    winsorized = [min(max(v, low), high) for v in ordered]
    mean_w = math.fsum(winsorized) / n
    s2 = math.fsum((v - mean_w) ** 2 for v in winsorized) / (n - 1)
    return Trimmed(n=n, mean=math.fsum(kept) / h, d=(n - 1) * s2 / (h * (h - 1)), h=h)


@dataclass(frozen=True)
class Effect:
    """B against A on one scale: `estimate` is log(B / A) of the trimmed geometric means
    (scale LOG) or B - A of the trimmed means (ABSOLUTE); `se` its standard error, `df`
    Welch's degrees of freedom. `level_a` is A's trimmed (geometric) mean in the figure's
    unit, what a relative change is taken against."""

    scale: str
    estimate: float
    se: float
    df: float
    level_a: float
    level_b: float

    @property
    def change(self) -> float:
        """B against A: a ratio minus 1 (LOG), or B - A in the figure's unit (ABSOLUTE)."""
        return math.expm1(self.estimate) if self.scale == LOG else self.estimate

    @property
    def relative(self) -> float | None:
        """The change as a share of A's level (None when A's level is 0)."""
        if self.scale == LOG:
            return self.change
        return self.estimate / abs(self.level_a) if self.level_a else None

    def p_worse(self) -> float:
        """One-sided p that B is higher than A (the gate's figures are worse when higher).
        A difference with no spread at all (every value of each side the same, and the
        sides different) is certain: p 0 when B is higher, 1 otherwise."""
        if self.se <= 0:
            return 0.0 if self.estimate > 0 else 1.0
        return t_upper(self.estimate / self.se, self.df)

    def interval(self, level: float) -> tuple[float, float]:
        """The two-sided `1 - level` confidence interval of the change (LOG: as a ratio - 1)."""
        if self.se <= 0:
            low = high = self.estimate
        else:
            half = t_quantile(1 - level / 2, self.df) * self.se
            low, high = self.estimate - half, self.estimate + half
        if self.scale == LOG:
            return math.expm1(low), math.expm1(high)
        return low, high


def scale_of(a: Sequence[float], b: Sequence[float]) -> str:
    """LOG when every value of both samples is positive, else ABSOLUTE (a CPU counter that
    read 0 for a transfer, a count)."""
    return LOG if all(v > SMALLEST for v in (*a, *b)) else ABSOLUTE


def yuen(a: Sequence[float], b: Sequence[float], scale: str | None = None) -> Effect | None:
    """Yuen's trimmed Welch test of B against A on `scale` (chosen by `scale_of` when None;
    a ratio asked of samples with a 0 in them falls back to ABSOLUTE, as `scale_of` would);
    None when a side has under 2 values left after trimming (under 2 values)."""
    if scale is None or (scale == LOG and scale_of(a, b) != LOG):
        scale = scale_of(a, b)
    way = math.log if scale == LOG else float
    side_a, side_b = trimmed([way(v) for v in a]), trimmed([way(v) for v in b])
    if side_a is None or side_b is None:
        return None
    variance = side_a.d + side_b.d
    if variance > 0:
        df = variance**2 / (side_a.d**2 / side_a.df + side_b.d**2 / side_b.df)
    else:
        df = side_a.df + side_b.df
    back = math.exp if scale == LOG else float
    return Effect(
        scale=scale,
        estimate=side_b.mean - side_a.mean,
        se=math.sqrt(variance),
        df=df,
        level_a=back(side_a.mean),
        level_b=back(side_b.mean),
    )


def combine(effects: Sequence[Effect]) -> Effect | None:
    """The mean of per-case effects on one scale (benchstat's geomean row for ratios: the
    mean of log ratios), with its standard error from the cases' own and Satterthwaite's
    degrees of freedom for those estimated variances. None without effects.

    Equal weights, not inverse-variance ones: with 10 values a side each case's variance
    is itself a noisy estimate, and weighting by its inverse favours the cases whose spread
    came out small by chance, which is where the estimate strays. On the reference run's
    A/A splits (10 against 10, 16 cases) inverse-variance weights gave p < 0.0083 in 2.2 %
    (CPU, primary) to 3.6 % (CPU, secondary) of draws, equal weights in 0.5-0.8 %; the
    price is a detectable CPU change of 9 % instead of 8 %.

    The level of each side is the cases' geometric (LOG) or arithmetic mean, for reading:
    the test is on the combined estimate."""
    if not effects:
        return None
    scales = {e.scale for e in effects}
    if len(scales) > 1:
        raise ValueError(f"effects on different scales: {sorted(scales)}")
    k = len(effects)
    estimate = math.fsum(e.estimate for e in effects) / k
    parts = [e.se**2 / k**2 for e in effects]
    variance = math.fsum(parts)
    denominator = math.fsum(p**2 / e.df for p, e in zip(parts, effects, strict=True) if p > 0)
    df = variance**2 / denominator if denominator > 0 else math.inf
    scale = effects[0].scale
    if scale == LOG:
        level_a = math.exp(math.fsum(math.log(e.level_a) for e in effects) / k)
        level_b = level_a * math.exp(estimate)
    else:
        level_a = math.fsum(e.level_a for e in effects) / k
        level_b = level_a + estimate
    return Effect(scale, estimate, math.sqrt(variance), df, level_a, level_b)


# --- power ----------------------------------------------------------------------------------

FLOOR_SHARE = 0.5  # of the threshold: a smaller change is never called a regression


def t_quantile(p: float, df: float) -> float:
    """Student's t quantile (the normal's for infinite df): scipy.special's, which is what
    scipy.stats.t.ppf calls, without its argument checks (the gate takes thousands)."""
    from scipy.special import ndtri, stdtrit

    return float(ndtri(p)) if not math.isfinite(df) else float(stdtrit(df, p))


def t_upper(value: float, df: float) -> float:
    """P(T > value) for Student's t with df degrees of freedom."""
    from scipy.special import ndtr, stdtr

    return float(ndtr(-value)) if not math.isfinite(df) else float(stdtr(df, -value))


def detectable(se: float, df: float, level: float, threshold: float, power: float = POWER) -> float:
    """The smallest true effect (on the test's scale: a log ratio, or a difference) called a
    regression with probability `power`: the estimate must pass the one-sided test at
    `level` (t_(1 - level) * se) and exceed FLOOR_SHARE of the threshold, and at a true
    effect delta it does so with probability `power` when delta = max(those two) +
    t_power * se. `threshold` is on the same scale."""
    if se <= 0:
        return FLOOR_SHARE * threshold
    return max(t_quantile(1 - level, df) * se, FLOOR_SHARE * threshold) + t_quantile(power, df) * se


def yuen_factor(n: int, trim: float = TRIM) -> float:
    """h (h - 1) / (n - 1): Yuen's variance of a trimmed mean is s_w^2 over this."""
    h = n - 2 * math.floor(trim * n)
    return h * (h - 1) / (n - 1) if h >= 2 and n > 1 else 0.0


def scaled(se: float, df: float, n_now: float, n_new: int) -> tuple[float, float]:
    """The standard error and degrees of freedom the same spread would give at `n_new`
    values a side instead of `n_now` (the average of the two sides): the standard error of
    a trimmed mean falls as 1 / sqrt(n), its degrees of freedom grow as n - 1. (Yuen's
    own factor is not monotonic in n: 8 values trim one a side, 10 trim two.)"""
    if n_now < 2 or n_new < 2:
        return math.inf, 1.0
    return se * math.sqrt(n_now / n_new), max(1.0, df * (n_new - 1) / (n_now - 1))


MAX_REPEATS = 1000  # beyond, "needs n >= 1000+": the spread, not n, is the problem


def repeats_needed(
    se: float, df: float, n_now: float, level: float, threshold: float, power: float = POWER
) -> int | None:
    """The fewest values a side (repeats per case) at which the same spread would make the
    detectable effect at most `threshold` (same scale as `se`); None beyond MAX_REPEATS."""
    if se <= 0:
        return 2

    def enough(n: int) -> bool:
        se_n, df_n = scaled(se, df, n_now, n)
        return math.isfinite(se_n) and detectable(se_n, df_n, level, threshold, power) <= threshold

    # The detectable effect only falls as n grows (its standard error falls and its degrees
    # of freedom grow): the fewest n that is enough, by bisection.
    if not enough(MAX_REPEATS):
        return None
    low, high = 1, MAX_REPEATS  # not enough at low (n < 2), enough at high
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if enough(middle) else (middle, high)
    return high


# --- the family -----------------------------------------------------------------------------


def holm(p_values: Sequence[float], alpha: float) -> tuple[list[bool], list[float]]:
    """Holm's step-down procedure: which hypotheses are rejected at family-wise level
    `alpha`, and each one's adjusted p (the smallest alpha at which it would be)."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    rejected = [False] * m
    adjusted = [1.0] * m
    running = 0.0
    still = True
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[index]))
        adjusted[index] = running
        still = still and p_values[index] <= alpha / (m - rank)
        rejected[index] = still
    return rejected, adjusted
