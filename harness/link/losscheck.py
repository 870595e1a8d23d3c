"""Did a direction lose as many packets as its loss model says it should?

`check_loss(loss, passed, dropped)` compares the drops the emulator counted in one direction
during a transfer (the deltas of linkem's `passed` and `dropped_loss`; netem's qdisc counter
mixes loss with queue overflow, so use it only when nothing overflowed) with the configured
model (harness/spec/link.py LossSpec, netem's meanings, percent) and returns a verdict a report
can print:

- "ok": the count is consistent with the model;
- "implausible": it is not (p < alpha): the emulator did not apply the model, or the counts
  are not the transfer's (a stale stats snapshot, another flow on the link);
- "too few packets": the count is consistent with the model, and the model expects so few
  drops (fewer than MIN_EXPECTED_DROPS, or, for bursty models, fewer than
  MIN_EFFECTIVE_DROPS independent ones) that being consistent says little: "0 of 1,251
  dropped (0 %); 1.25 expected at 0.1 %". The test comes first: 100 of those 1,251 dropped
  is "implausible", however few drops were expected;
- "not tested": the model's statistics could not be computed (named in the sentence).

Expected rate. Each model is the per-packet loss process linkem and netem implement:
- random, no correlation: independent drops with probability p;
- random with correlation rho: netem draws X_n = (1 - rho) U_n + rho X_(n-1) (U uniform) and
  drops when X_n <= p. X is not uniform, so the long-run rate is not p (p = 5 %, rho = 25 %
  loses about 0.2 %): the rate is P(X <= p), computed numerically (X's distribution on a
  lattice of 2**14 points, absolute error below about 1e-4);
- gemodel (Gilbert-Elliott): a two-state chain Good -> Bad with p, Bad -> Good with r; a
  packet is lost with 1-k in Good and 1-h in Bad (the state it arrives in);
- state (4-state, Salsano et al.): a packet is lost when its transition lands in state 3
  (burst loss) or 4 (isolated loss).
For the Markov models the rate is the stationary loss probability (pi . e, pi the stationary
distribution, e the loss probability per state). A transfer that starts with the chain in
its initial state loses slightly less over its first ~1/(leaving probability) packets; over
thousands of packets this is negligible.

Test. Drops of the random model without correlation are independent: the count is binomial
and the exact two-sided binomial test applies. Drops of the other models are not independent
(they come in bursts), so the binomial variance n m (1 - m) is too small and the binomial test
would call ordinary bursts implausible. For them the count is compared with the variance the
model really has: by the central limit theorem for Markov chains, Var(drops) ~ n sigma2 with
sigma2 = m (1 - m) + 2 sum_(k>=1) Cov(L_0, L_k) (L_k the loss indicator of packet k), computed
from the fundamental matrix Z = (I - P + 1 pi)^-1 for the Markov models (sum_(k>=1) (P^k - 1 pi)
= Z - I) and numerically for correlated random loss. The test is two-sided, normal with a
continuity correction, and so only used when the effective number of independent drops
(expected drops / dispersion, dispersion = sigma2 / (m (1 - m))) is at least
MIN_EFFECTIVE_DROPS. Below that, Chebyshev's inequality P(|D - n m| >= t) <= n sigma2 / t^2
bounds the p-value whatever the count's distribution (conservative: it rejects only gross
departures; for bursty models, whose covariances are positive, n sigma2 is at least the
variance of n packets). The dispersion is also a burst measure: about twice the mean burst
length minus one for a simple Gilbert model.

Checked against linkem itself: tests/fixtures/linkem_loss_counts.json holds linkem's counts
per model (linkem/tests/loss_counts.rs); over 2,000 seeds of 20,000 packets the share of
counts called implausible matched alpha for the random, correlated random and Gilbert models.

Counts: `passed + dropped` is the number of packets the loss model judged. With duplication a
duplicated packet the model "loses" still passes once (netem's rule), so drops then undercount
the model's losses by about the duplication rate times the loss rate.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from harness.link.netem import gemodel_params, state_params
from harness.spec import LossSpec

Verdict = Literal["ok", "implausible", "too few packets", "not tested"]
OK: Verdict = "ok"
IMPLAUSIBLE: Verdict = "implausible"
TOO_FEW: Verdict = "too few packets"
NOT_TESTED: Verdict = "not tested"

# A run checks every direction of every case: 1 % keeps false alarms rare across a matrix.
DEFAULT_ALPHA = 0.01
# Below this many expected drops no count is surprising (P(0 drops) = e^-3 = 5 % at 3).
MIN_EXPECTED_DROPS = 3.0
# The normal approximation for dependent drops needs many independent loss episodes.
MIN_EFFECTIVE_DROPS = 10.0
_LATTICE = 2**14  # points of the lattice for netem's correlated random values
Floats = npt.NDArray[np.float64]
_CERTAIN = 1e-12  # a rate this close to 0 or 1 is certain: any other count is impossible


@dataclass(frozen=True)
class LossStatistics:
    """A loss model's long-run figures: `rate` (probability a packet is dropped) and
    `dispersion` (Var(drops in n packets) / (n rate (1 - rate)) as n grows; 1 for
    independent drops, larger for bursts). `independent` is true when the binomial test
    applies exactly."""

    rate: float
    dispersion: float
    independent: bool
    description: str


@dataclass(frozen=True)
class LossCheck:
    """One direction's drops against its model. Rates are fractions; p_value is None when
    no test was made."""

    model: str
    packets: int
    dropped: int
    expected_rate: float
    measured_rate: float | None
    expected_drops: float
    dispersion: float
    test: str | None
    p_value: float | None
    verdict: Verdict
    sentence: str


# --- the models ---------------------------------------------------------------------------


def _markov_statistics(matrix: list[list[float]], loss: list[float]) -> tuple[float, float]:
    """(rate, dispersion) of drops from a chain with transition `matrix` whose packet is lost
    with probability loss[state] (state before or after the packet's transition: the
    stationary figures are the same). Only states reachable from state 0 count (the model
    starts there). Raises ValueError when the reachable chain has no unique stationary law."""
    full = np.asarray(matrix, dtype=float)
    reach = {0}
    frontier = [0]
    while frontier:
        i = frontier.pop()
        for j in np.flatnonzero(full[i] > 0):
            if int(j) not in reach:
                reach.add(int(j))
                frontier.append(int(j))
    states = sorted(reach)
    p = full[np.ix_(states, states)]
    e = np.asarray(loss, dtype=float)[states]
    size = len(states)
    # pi (P - I) = 0 with sum(pi) = 1, as one least-squares system.
    system = np.vstack([p.T - np.eye(size), np.ones(size)])
    rhs = np.zeros(size + 1)
    rhs[-1] = 1.0
    pi = np.linalg.lstsq(system, rhs, rcond=None)[0]
    fundamental = np.eye(size) - p + np.outer(np.ones(size), pi)
    if not np.allclose(pi @ p, pi, atol=1e-9) or np.linalg.cond(fundamental) > 1e12:
        raise ValueError("the loss chain has no unique stationary distribution")
    z = np.linalg.inv(fundamental)
    rate = float(pi @ e)
    variance = rate * (1 - rate) + 2 * float(e @ np.diag(pi) @ (z - np.eye(size)) @ e)
    return rate, _dispersion(rate, variance)


def _dispersion(rate: float, variance: float) -> float:
    if rate <= 0 or rate >= 1:
        return 1.0
    return max(variance / (rate * (1 - rate)), 0.0)


# Lattice variables: masses at points j h (j >= 0), each spread over its hat function
# (a triangle of half-width h), which keeps means exact and sums on the lattice.


def _hat_below(u: Floats) -> Floats:
    """The part of a hat centred at 0 (half-width 1) below u."""
    u = np.clip(u, -1.0, 1.0)
    return np.where(u <= 0, (1 + u) ** 2 / 2, 1 - (1 - u) ** 2 / 2)


def _box(width: float, h: float, size: int) -> Floats:
    """Lattice masses of width * U, U uniform on [0, 1): the density integrated against
    each point's hat, from the second antiderivative G of the density."""
    points = math.ceil(width / h) + 2
    x = np.arange(-1, points + 1) * h
    g = np.where(x <= 0, 0.0, np.where(x <= width, x * x / (2 * width), width / 2 + (x - width)))
    masses: Floats = (g[2:] - 2 * g[1:-1] + g[:-2]) / h
    return masses[:size]


def _cdf(masses: Floats, h: float, y: Floats | float) -> Floats:
    """P(V <= y) for the lattice variable V with these masses (only the two points around
    y are partly below it)."""
    y = np.asarray(y, dtype=float)
    m = np.floor(y / h).astype(int)
    u = y / h - m
    padded = np.concatenate([masses, [0.0, 0.0]])
    below = np.concatenate([[0.0], np.cumsum(padded)])  # below[i] = mass of points < i
    i = np.clip(m, 0, len(masses))
    inside = below[i] + padded[i] * _hat_below(u) + padded[i + 1] * _hat_below(u - 1)
    return np.where(m >= 0, inside, np.where(m == -1, padded[0] * _hat_below(u - 1), 0.0))


@functools.lru_cache(maxsize=64)
def correlated_random_statistics(p: float, rho: float) -> tuple[float, float]:
    """(rate, dispersion) of netem's correlated random loss, p and rho fractions.

    X_n = (1 - rho) U_n + rho X_(n-1) is, in its stationary law, sum_k a_k U_k with
    a_k = (1 - rho) rho^k; X_k = rho^k X_0 + W_k with W_k the sum of the first k terms,
    independent of X_0. So the rate is P(X <= p) and Cov(L_0, L_k) =
    P(X_0 <= p, rho^k X_0 + W_k <= p) - rate^2, both from lattice convolutions of the boxes
    (terms stop once the rest of the weights sums below a tenth of the lattice step)."""
    if rho <= 0:
        return p, 1.0
    h = 1.0 / _LATTICE
    size = _LATTICE + 1
    widths = []
    while rho ** len(widths) >= h / 10:
        widths.append((1 - rho) * rho ** len(widths))

    def add(masses: Floats, width: float) -> Floats:
        box = _box(width, h, size)
        length = 1 << (len(masses) + len(box) - 2).bit_length()  # FFT size, a power of two
        spectrum = np.fft.rfft(masses, length) * np.fft.rfft(box, length)
        out: Floats = np.clip(np.fft.irfft(spectrum, length)[:size], 0.0, None)  # FFT noise < 0
        return out / out.sum()

    x = np.eye(1, size)[0]  # all mass at 0
    for width in widths:
        x = add(x, width)
    rate = float(_cdf(x, h, p))
    # Only points whose hat reaches below p can have L_0 = 1; weight each by that part.
    top = min(size, math.floor(p / h) + 2)
    points = np.arange(top) * h
    lost_first = x[:top] * _hat_below((p - points) / h)
    covariance = 0.0
    w = np.eye(1, size)[0]
    for lag, width in enumerate(widths, start=1):
        w = add(w, width)
        covariance += float(lost_first @ _cdf(w, h, p - rho**lag * points)) - rate * rate
    return rate, _dispersion(rate, rate * (1 - rate) + 2 * covariance)


def loss_statistics(loss: LossSpec) -> LossStatistics:
    """The long-run rate and dispersion of a configured loss model (see the module)."""
    if not loss.active:
        return LossStatistics(0.0, 1.0, True, "no loss")
    if loss.model == "random":
        p, rho = loss.p / 100, loss.correlation / 100
        if rho == 0:
            return LossStatistics(p, 1.0, True, f"random {_pct(p)} loss")
        rate, dispersion = correlated_random_statistics(p, rho)
        return LossStatistics(
            rate, dispersion, False, f"random {_pct(p)} loss, correlation {_pct(rho)}"
        )
    if loss.model == "gemodel":
        p, r, one_minus_h, one_minus_k = (v / 100 for v in gemodel_params(loss))
        rate, dispersion = _markov_statistics([[1 - p, p], [r, 1 - r]], [one_minus_k, one_minus_h])
        return LossStatistics(
            rate,
            dispersion,
            _same(one_minus_h, one_minus_k) or _same(p + r, 1.0),
            f"gemodel p {_pct(p)} r {_pct(r)} 1-h {_pct(one_minus_h)} 1-k {_pct(one_minus_k)}",
        )
    p13, p31, p32, p23, p14 = (v / 100 for v in state_params(loss))
    matrix = [
        [1 - p13 - p14, 0.0, p13, p14],
        [0.0, 1 - p23, p23, 0.0],
        [p31, p32, 1 - p31 - p32, 0.0],
        [1.0, 0.0, 0.0, 0.0],
    ]
    rate, dispersion = _markov_statistics(matrix, [0.0, 0.0, 1.0, 1.0])
    return LossStatistics(
        rate,
        dispersion,
        False,
        f"4-state p13 {_pct(p13)} p31 {_pct(p31)} p32 {_pct(p32)} p23 {_pct(p23)} p14 {_pct(p14)}",
    )


def expected_loss_rate(loss: LossSpec) -> float:
    """The long-run fraction of packets `loss` drops (stationary for the Markov models)."""
    return loss_statistics(loss).rate


def _same(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=0, abs_tol=1e-12)


# --- the check ----------------------------------------------------------------------------


def _pct(fraction: float) -> str:
    value = fraction * 100
    if value == 0:
        return "0 %"
    if abs(value) < 0.01:
        return f"{value:.2g} %"
    return f"{value:.3g} %"


def check_loss(
    loss: LossSpec, passed: int, dropped: int, *, alpha: float = DEFAULT_ALPHA
) -> LossCheck:
    """Are `dropped` drops out of `passed + dropped` packets plausible under `loss`?

    See the module docstring for the rate, the tests and their assumptions.
    """
    if passed < 0 or dropped < 0:
        raise ValueError(f"packet counts cannot be negative (passed {passed}, dropped {dropped})")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha {alpha} is not in (0, 1)")
    packets = passed + dropped
    counts = f"{dropped:,} of {packets:,} dropped"
    if packets:
        counts += f" ({_pct(dropped / packets)})"

    def result(
        stats: LossStatistics | None,
        verdict: Verdict,
        why: str,
        test: str | None = None,
        p_value: float | None = None,
    ) -> LossCheck:
        rate = stats.rate if stats else math.nan
        expected = packets * rate
        sentence = (
            counts if stats is None else f"{counts}; {expected:,.2f} expected at {_pct(rate)}"
        )
        return LossCheck(
            model=loss.model,
            packets=packets,
            dropped=dropped,
            expected_rate=rate,
            measured_rate=dropped / packets if packets else None,
            expected_drops=expected,
            dispersion=stats.dispersion if stats else math.nan,
            test=test,
            p_value=p_value,
            verdict=verdict,
            sentence=f"{sentence}: {why}",
        )

    try:
        stats = loss_statistics(loss)
    except ValueError as error:
        return result(None, NOT_TESTED, f"{loss.model} loss not tested: {error}")
    m = stats.rate
    expected = packets * m
    if m < _CERTAIN or m > 1 - _CERTAIN:
        # Any other count is impossible, not merely unlikely.
        if dropped == round(expected):
            return result(stats, OK, f"as set ({stats.description})", "certain outcome", 1.0)
        return result(
            stats, IMPLAUSIBLE, f"impossible ({stats.description})", "certain outcome", 0.0
        )
    if not packets:
        return result(stats, TOO_FEW, "no packets to test")
    effective = expected / stats.dispersion
    p_value, test = _p_value(stats, packets, dropped)
    if p_value < alpha:
        why = f"implausible for {stats.description} ({test}, p = {p_value:.2g})"
        return result(stats, IMPLAUSIBLE, why, test, p_value)
    consistent = f"consistent ({test}, p = {p_value:.2g})"
    if expected < MIN_EXPECTED_DROPS:
        why = f"{consistent}, but too few to tell (under {MIN_EXPECTED_DROPS:g} expected)"
        return result(stats, TOO_FEW, why, test, p_value)
    if not stats.independent and effective < MIN_EFFECTIVE_DROPS:
        why = (
            f"{consistent}, but too few to tell: bursts make that about {effective:.1f} "
            f"independent drops (under {MIN_EFFECTIVE_DROPS:g})"
        )
        return result(stats, TOO_FEW, why, test, p_value)
    return result(stats, OK, consistent, test, p_value)


def _p_value(stats: LossStatistics, packets: int, dropped: int) -> tuple[float, str]:
    """The two-sided p-value of `dropped` in `packets` (or a bound on it), and the test."""
    m = stats.rate
    expected = packets * m
    if stats.independent:
        from scipy.stats import binomtest

        return float(binomtest(dropped, packets, m).pvalue), "exact binomial"
    variance = packets * m * (1 - m) * stats.dispersion
    if expected / stats.dispersion < MIN_EFFECTIVE_DROPS:
        # Too few independent drops for the normal law: a bound that holds for any law.
        gap = abs(dropped - expected)
        bound = min(1.0, variance / (gap * gap)) if gap > 0 else 1.0
        return bound, f"Chebyshev bound, variance x{stats.dispersion:.3g} for bursts"
    from scipy.stats import norm

    z = max(abs(dropped - expected) - 0.5, 0.0) / math.sqrt(variance)  # continuity corrected
    return float(2 * norm.sf(z)), f"normal, variance x{stats.dispersion:.3g} for bursts"


def expected_loss_percent(loss: LossSpec) -> float | None:
    """Long-run loss of a model in percent (None for the 4-state model: not computed)."""
    if not loss.active:
        return 0.0
    if loss.model == "random":
        return loss.p
    if loss.model == "gemodel":
        p, r, one_minus_h, one_minus_k = (v / 100 for v in gemodel_params(loss))
        if p + r == 0:
            return one_minus_k * 100
        bad = p / (p + r)
        return 100 * ((1 - bad) * one_minus_k + bad * one_minus_h)
    return None
