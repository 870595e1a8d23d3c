"""Loss plausibility: model rates and dispersions, verdicts on synthetic and linkem counts."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy.stats import binomtest

from harness.link.losscheck import (
    IMPLAUSIBLE,
    MIN_EXPECTED_DROPS,
    OK,
    TOO_FEW,
    check_loss,
    correlated_random_statistics,
    expected_loss_rate,
    loss_statistics,
)
from harness.spec import LossSpec

FIXTURE = Path(__file__).parents[1] / "fixtures" / "linkem_loss_counts.json"


def spec(**raw: Any) -> LossSpec:
    return LossSpec.model_validate(raw)


# --- simulations of the models as linkem implements them (numpy, many runs at once) ------


def simulate_gemodel(p: float, r: float, h1: float, k1: float, n: int, runs: int) -> Any:
    rng = np.random.default_rng(11)
    bad = rng.random(runs) < p / (p + r)  # start in the stationary law
    drops = np.zeros(runs)
    for _ in range(n):
        move = rng.random(runs)
        lost = rng.random(runs) < np.where(bad, h1, k1)  # judged in the state it arrived in
        bad = np.where(bad, move >= r, move < p)
        drops += lost
    return drops


def simulate_state(
    p13: float, p31: float, p32: float, p23: float, p14: float, n: int, runs: int
) -> Any:
    rng = np.random.default_rng(12)
    state = np.ones(runs, dtype=int)
    drops = np.zeros(runs)
    for i in range(n + 500):  # 500 packets of burn-in from state 1
        u = rng.random(runs)
        new = state.copy()
        new[(state == 1) & (u < p14)] = 4
        new[(state == 1) & (u >= p14) & (u < p14 + p13)] = 3
        new[(state == 2) & (u < p23)] = 3
        new[(state == 3) & (u < p32)] = 2
        new[(state == 3) & (u >= p32) & (u < p32 + p31)] = 1
        new[state == 4] = 1
        state = new
        if i >= 500:
            drops += (state == 3) | (state == 4)
    return drops


def simulate_correlated(p: float, rho: float, n: int, runs: int) -> Any:
    rng = np.random.default_rng(13)
    x = rng.random(runs)
    drops = np.zeros(runs)
    for i in range(n + 200):
        x = (1 - rho) * rng.random(runs) + rho * x
        if i >= 200:
            drops += x <= p
    return drops


def assert_matches(drops: Any, n: int, loss: LossSpec) -> None:
    stats = loss_statistics(loss)
    runs = len(drops)
    mean, var = float(drops.mean()), float(drops.var(ddof=1))
    binomial_var = n * stats.rate * (1 - stats.rate)
    # The mean within 4 standard errors; the variance ratio within 15 % (its relative
    # standard error is about sqrt(2 / runs) = 3.5 %, plus the dispersion's finite-n bias).
    assert abs(mean - n * stats.rate) < 4 * math.sqrt(var / runs), (mean, n * stats.rate)
    assert var / binomial_var == pytest.approx(stats.dispersion, rel=0.15)


# --- rates and dispersions ----------------------------------------------------------------


def test_random_rate_is_p_and_drops_independent() -> None:
    stats = loss_statistics(spec(p="0.1%"))
    assert stats.rate == pytest.approx(0.001) and stats.dispersion == 1 and stats.independent


def test_simple_gilbert_closed_form() -> None:
    # Loss in Bad only: rate p / (p + r), dispersion (1 + lambda) / (1 - lambda) with
    # lambda = 1 - p - r, i.e. about 2 * mean burst - 1.
    for p, r in ((0.01, 0.1), (0.005, 0.5), (0.2, 0.3)):
        stats = loss_statistics(spec(model="gemodel", p=p * 100, r=r * 100))
        lam = 1 - p - r
        assert stats.rate == pytest.approx(p / (p + r))
        assert stats.dispersion == pytest.approx((1 + lam) / (1 - lam))
        assert not stats.independent


def test_models_that_are_bernoulli_in_disguise() -> None:
    # gemodel with the same loss in both states, and 4-state with tc's defaults (p31 = 1-p13):
    # independent drops at the per-packet rate.
    ge = loss_statistics(spec(model="gemodel", p=3, r=20, h=5, k=5))
    assert ge.rate == pytest.approx(0.05) and ge.dispersion == pytest.approx(1) and ge.independent
    four = loss_statistics(spec(model="state", p13=3))
    assert four.rate == pytest.approx(0.03) and four.dispersion == pytest.approx(1)


@pytest.mark.parametrize(
    ("raw", "args"),
    [
        ({"model": "gemodel", "p": 1, "r": 30, "h": 80, "k": 0.2}, (0.01, 0.3, 0.8, 0.002)),
        ({"model": "gemodel", "p": 2, "r": 10}, (0.02, 0.1, 1.0, 0.0)),
    ],
)
def test_gemodel_matches_simulation(raw: dict[str, Any], args: tuple[float, ...]) -> None:
    n = 3000
    assert_matches(simulate_gemodel(*args, n=n, runs=2000), n, spec(**raw))


def test_state_matches_simulation() -> None:
    raw = {"model": "state", "p13": 2, "p31": 30, "p32": 20, "p23": 10, "p14": 1}
    n = 3000
    drops = simulate_state(0.02, 0.3, 0.2, 0.1, 0.01, n=n, runs=2000)
    assert_matches(drops, n, spec(**raw))
    assert loss_statistics(spec(**raw)).dispersion > 2  # bursty: a binomial test would fail


def test_correlated_random_matches_simulation() -> None:
    n = 3000
    for p, rho in ((0.1, 0.3), (0.2, 0.6)):
        loss = spec(model="random", p=p * 100, correlation=rho * 100)
        assert_matches(simulate_correlated(p, rho, n=n, runs=2000), n, loss)
        # netem's correlated loss loses less than p in the long run
        assert expected_loss_rate(loss) < p


def test_correlated_random_without_correlation_is_p() -> None:
    assert correlated_random_statistics(0.05, 0.0) == (0.05, 1.0)


# --- verdicts on synthetic counts ---------------------------------------------------------


def test_demo_case_too_few_packets() -> None:
    check = check_loss(spec(p="0.1%"), 1251, 0)
    assert check.verdict == TOO_FEW
    # Tested first: consistent (p = 1 here), and too few expected to tell anything.
    assert check.p_value is not None and check.p_value >= 0.01
    assert check.expected_drops == pytest.approx(1.251)
    assert "0 of 1,251 dropped" in check.sentence and "1.25 expected" in check.sentence
    assert "consistent" in check.sentence and "too few" in check.sentence


def test_too_few_expected_drops_can_still_be_implausible() -> None:
    # 100 of 1,251 at 0.1 %: 1.25 expected, yet no model of 0.1 % loss makes 100.
    check = check_loss(spec(p="0.1%"), 1151, 100)
    assert check.verdict == IMPLAUSIBLE, check.sentence
    assert check.p_value == pytest.approx(binomtest(100, 1251, 0.001).pvalue)
    assert "implausible for random 0.1 % loss" in check.sentence
    # A count the model makes now and then stays "too few": the test cannot reject it.
    assert check_loss(spec(p="0.1%"), 1248, 3).verdict == TOO_FEW


def test_bursty_with_few_independent_drops_can_still_be_implausible() -> None:
    loss = spec(model="gemodel", p=0.1, r=5)  # mean burst 20: dispersion about 39
    stats = loss_statistics(loss)
    packets = round(60 / stats.rate)  # 60 drops expected, about 1.5 independent ones
    check = check_loss(loss, packets - 1000, 1000)
    assert check.verdict == IMPLAUSIBLE, check.sentence
    assert check.p_value is not None and check.p_value < 0.01
    assert "Chebyshev" in check.sentence
    assert check_loss(loss, packets - 90, 90).verdict == TOO_FEW


def test_random_loss_ok_and_implausible() -> None:
    loss = spec(p="1%")
    ok = check_loss(loss, 99_000, 1000)
    assert ok.verdict == OK and ok.p_value is not None and ok.p_value > 0.5
    assert ok.test == "exact binomial" and "consistent" in ok.sentence
    for dropped in (0, 850, 1150):
        bad = check_loss(loss, 100_000 - dropped, dropped)
        assert bad.verdict == IMPLAUSIBLE, bad.sentence
        assert bad.p_value == pytest.approx(binomtest(dropped, 100_000, 0.01).pvalue)
        assert "implausible for random 1 % loss" in bad.sentence


def test_threshold_of_too_few_follows_expected_drops() -> None:
    loss = spec(p="1%")
    just_below = math.floor(MIN_EXPECTED_DROPS / 0.01) - 1
    assert check_loss(loss, just_below, 0).verdict == TOO_FEW
    assert check_loss(loss, 10 * just_below, 0).verdict == IMPLAUSIBLE


def test_bursts_widen_the_test() -> None:
    # Simple Gilbert, mean burst 10: 1,150 drops where 1,000 are expected would fail a
    # binomial test, but bursts make such counts ordinary; 1,800 is still implausible.
    loss = spec(model="gemodel", p=0.1, r=10)
    stats = loss_statistics(loss)
    packets = round(1000 / stats.rate)
    assert binomtest(1150, packets, stats.rate).pvalue < 0.01
    widened = check_loss(loss, packets - 1150, 1150)
    assert widened.verdict == OK, widened.sentence
    assert "variance x" in widened.sentence
    assert check_loss(loss, packets - 1800, 1800).verdict == IMPLAUSIBLE


def test_bursty_with_few_independent_drops_is_too_few() -> None:
    loss = spec(model="gemodel", p=0.1, r=5)  # mean burst 20: dispersion about 39
    stats = loss_statistics(loss)
    packets = round(60 / stats.rate)  # 60 drops expected, about 1.5 independent ones
    check = check_loss(loss, packets, 0)
    assert check.verdict == TOO_FEW and "independent" in check.sentence


def test_no_loss_configured() -> None:
    assert check_loss(spec(), 5000, 0).verdict == OK
    check = check_loss(spec(), 5000, 3)
    assert check.verdict == IMPLAUSIBLE and "impossible" in check.sentence


def test_no_packets() -> None:
    check = check_loss(spec(p="1%"), 0, 0)
    assert check.verdict == TOO_FEW and check.measured_rate is None


def test_bad_input() -> None:
    with pytest.raises(ValueError):
        check_loss(spec(p="1%"), -1, 0)
    with pytest.raises(ValueError):
        check_loss(spec(p="1%"), 10, 0, alpha=0)


# --- linkem's own counts ------------------------------------------------------------------


def _spec_of(config: dict[str, Any]) -> LossSpec:
    """The scenario LossSpec (percent) of linkem's loss config (fractions)."""
    names = {"one_minus_h": "h", "one_minus_k": "k"}  # the spec's h and k hold 1-h and 1-k
    raw = {names.get(k, k): v * 100 for k, v in config.items() if k != "model"}
    return spec(model=config["model"], **raw)


def _fixture_groups() -> dict[str, list[dict[str, Any]]]:
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in json.loads(FIXTURE.read_text())["rows"]:
        groups.setdefault(json.dumps(row["loss"], sort_keys=True), []).append(row)
    return groups


def test_linkem_counts_are_plausible() -> None:
    groups = _fixture_groups()
    assert {json.loads(k)["model"] for k in groups} == {"random", "gemodel", "state"}
    flagged = 0
    for rows in groups.values():
        loss = _spec_of(rows[0]["loss"])
        checks = [check_loss(loss, r["passed"], r["dropped"]) for r in rows]
        assert all(c.verdict in (OK, IMPLAUSIBLE) for c in checks)
        flagged += sum(c.verdict == IMPLAUSIBLE for c in checks)
        # The seeds' runs are independent: pooled, they are one long sample of the model.
        pooled = check_loss(
            loss, sum(r["passed"] for r in rows), sum(r["dropped"] for r in rows), alpha=0.001
        )
        assert pooled.verdict == OK, pooled.sentence
    # At alpha 1 %, a few false alarms among the rows are expected; many would mean the
    # expected rates or dispersions do not describe linkem.
    rows_total = sum(len(rows) for rows in groups.values())
    assert flagged <= max(3, rows_total // 10)


def test_linkem_counts_against_a_wrong_model_are_implausible() -> None:
    # Power: the same counts read against twice the configured loss are rejected.
    for rows in _fixture_groups().values():
        config = dict(rows[0]["loss"])
        key = "p13" if config["model"] == "state" else "p"
        config[key] *= 2
        loss = _spec_of(config)
        pooled = check_loss(loss, sum(r["passed"] for r in rows), sum(r["dropped"] for r in rows))
        assert pooled.verdict == IMPLAUSIBLE, pooled.sentence
