"""Schedules (interleaved passes, alternating blocks) and the adaptive-repeats stopping rule."""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np
import pytest

from harness.core.stats import check_auto_repeats, median_interval, min_values_for_interval
from harness.plan.schedule import (
    block_schedule,
    clustered_pass,
    interleaved_schedule,
    needs_more,
    pass_order,
    repeat_states,
)

CASES = ["bind/tcp", "bind/xot", "knot/tcp", "nsd/tcp"]


# --- interleaved --------------------------------------------------------------------------


def test_interleaved_passes_are_permutations() -> None:
    order = interleaved_schedule(CASES, 5, seed=1)
    assert len(order) == 20
    for r in range(5):
        one_pass = order[4 * r : 4 * r + 4]
        assert sorted(case for case, _ in one_pass) == sorted(CASES)
        assert {repeat for _, repeat in one_pass} == {r + 1}  # repeats numbered from 1


def test_interleaved_is_reproducible_and_seeded() -> None:
    assert interleaved_schedule(CASES, 6, seed=1) == interleaved_schedule(CASES, 6, seed=1)
    assert interleaved_schedule(CASES, 6, seed=1) != interleaved_schedule(CASES, 6, seed=2)
    passes = {tuple(pass_order(CASES, k, 1)) for k in range(6)}
    assert len(passes) > 1  # passes are shuffled, not one order repeated


def test_pass_orders_are_uniform() -> None:
    # Every one of the 24 orders of 4 cases comes up about equally often over many passes
    # (chi-square goodness of fit, p > 0.001).
    from scipy.stats import chisquare

    counts = Counter(tuple(pass_order(CASES, k, 7)) for k in range(4800))
    assert set(counts) == set(itertools.permutations(CASES))
    assert chisquare(list(counts.values())).pvalue > 0.001


def test_interleaving_cancels_drift_that_blocks_turn_into_a_difference() -> None:
    # Two identical cases on a host whose transfers slow down 3 % per transfer: run in
    # blocks, the second case looks much slower; interleaved, their medians stay close.
    def medians(order: list[tuple[str, int]]) -> dict[str, float]:
        times: dict[str, list[float]] = {}
        for slot, (case, _) in enumerate(order):
            times.setdefault(case, []).append(1.0 + 0.03 * slot)
        return {case: float(np.median(v)) for case, v in times.items()}

    blocks = [(case, r) for case in ("a", "b") for r in range(1, 11)]
    block = medians(blocks)
    mixed = medians(interleaved_schedule(["a", "b"], 10, seed=3))
    assert abs(block["b"] / block["a"] - 1) > 0.2
    assert abs(mixed["b"] / mixed["a"] - 1) < abs(block["b"] / block["a"] - 1) / 5


def test_duplicate_cases_and_bad_repeats_rejected() -> None:
    with pytest.raises(ValueError):
        interleaved_schedule(["a", "a"], 2, seed=1)
    with pytest.raises(ValueError):
        interleaved_schedule(["a"], 0, seed=1)


# --- blocks -------------------------------------------------------------------------------


def block_sequence(order: list[tuple[str, int]], blocks: list[list[str]]) -> list[int]:
    """The block of each slot, runs of one block collapsed."""
    which = {case: b for b, block in enumerate(blocks) for case in block}
    return [b for b, _ in itertools.groupby(which[case] for case, _ in order)]


def test_blocks_alternate_forward_and_reverse() -> None:
    blocks = [["a1", "a2"], ["b1"], ["c1", "c2", "c3"]]
    order = block_schedule(blocks, 4, seed=1)
    assert Counter(case for case, _ in order) == {c: 4 for block in blocks for c in block}
    # A B C, C B A, A B C, C B A: the turning block runs twice in a row (one testbed).
    assert block_sequence(order, blocks) == [0, 1, 2, 1, 0, 1, 2, 1, 0]
    for case in ("a1", "c3"):
        assert [r for c, r in order if c == case] == [1, 2, 3, 4]


def test_block_visits_share_the_repeats() -> None:
    blocks = [["a1", "a2"], ["b1", "b2"]]
    order = block_schedule(blocks, 5, seed=2, passes=2)
    assert block_sequence(order, blocks) == [0, 1, 0]  # A B | B A: B's two visits merge
    # 5 repeats in 2 passes: 3 in the first visit of each block, 2 in the second.
    first_a = [r for c, r in order[:6] if c.startswith("a")]
    assert sorted(first_a) == [1, 1, 2, 2, 3, 3]
    within = order[:2], order[2:4]
    assert all(sorted(c for c, _ in pair) == ["a1", "a2"] for pair in within)


def test_alternating_blocks_balance_a_linear_drift() -> None:
    # Same linear drift as above, two blocks, an even number of passes: the mean time of
    # each block comes out equal (what block order A B, B A is for).
    blocks = [["a"], ["b"]]
    order = block_schedule(blocks, 4, seed=1)
    means = {
        case: float(np.mean([slot for slot, (c, _) in enumerate(order) if c == case]))
        for case in ("a", "b")
    }
    assert means["a"] == pytest.approx(means["b"])


def test_block_passes_bounds() -> None:
    with pytest.raises(ValueError):
        block_schedule([["a"]], 3, seed=1, passes=4)
    with pytest.raises(ValueError):
        block_schedule([["a"], ["a"]], 3, seed=1)


# --- adaptive repeats ---------------------------------------------------------------------


def test_stops_at_target_or_max() -> None:
    tight = [1.0 + 0.001 * i for i in range(8)]  # 0.7 % wide: reached target
    wide = [1.0, 1.5, 0.8, 1.3, 0.9, 1.6, 1.1, 0.7]  # far wider than 5 %
    states = repeat_states({"tight": tight, "wide": wide}, 0.05, 5, 8, 0.95)
    assert states["tight"].reason == "reached target" and states["tight"].done
    assert states["wide"].reason == "reached max without target"
    assert states["wide"].relative_width == pytest.approx(
        median_interval(wide, 0.95).relative_width  # type: ignore[union-attr]
    )
    assert needs_more({"tight": tight, "wide": wide[:6]}, 0.05, 5, 8, 0.95) == {"wide"}


def test_min_repeats_and_no_interval_yet_keep_running() -> None:
    same = [1.0] * 4  # zero width, but under min_repeats and under the interval's floor
    states = repeat_states({"a": same}, 0.05, 5, 10, 0.95)
    assert states["a"].reason == "running" and states["a"].interval is None
    floor = min_values_for_interval(0.95)
    assert repeat_states({"a": [1.0] * floor}, 0.05, 1, 10, 0.95)["a"].done


def test_failed_attempts_count_toward_max() -> None:
    states = repeat_states({"a": [1.0, 2.0]}, 0.05, 5, 8, 0.95, attempts_by_case={"a": 8})
    assert states["a"].reason == "reached max without target"
    assert "8 attempts (2 verified)" in states["a"].sentence


def test_auto_repeats_settings_checked() -> None:
    with pytest.raises(ValueError, match="too few"):
        check_auto_repeats(3, 5, 0.05, 0.95)  # 5 values never give a 95 % interval
    with pytest.raises(ValueError):
        check_auto_repeats(6, 5, 0.05, 0.95)
    with pytest.raises(ValueError):
        check_auto_repeats(5, 10, 5.0, 0.95)  # percent instead of a fraction


def test_rule_reaches_target_on_realistic_noise() -> None:
    # Transfers with 2 % noise: the rule stops every case well before a generous maximum,
    # and the interval it stops at is within the target.
    rng = np.random.default_rng(9)
    durations: dict[str, list[float]] = {case: [] for case in CASES}
    for k in range(200):
        running = needs_more(durations, 0.05, 5, 200, 0.95)
        if not running:
            break
        for case in pass_order(sorted(running), k, seed=9):
            durations[case].append(float(1.0 + 0.02 * rng.standard_normal()))
    states = repeat_states(durations, 0.05, 5, 200, 0.95)
    assert all(s.reason == "reached target" for s in states.values())
    assert all(s.n < 200 for s in states.values())
    assert all(s.relative_width is not None and s.relative_width <= 0.05 for s in states.values())


# --- passes that keep one server configuration together (clustered_pass) -----------------

TRANSPORT_KINDS = [
    ("v", transport, kind, "")
    for transport in ("tcp", "tcp-tsig", "xot", "xot-tsig")
    for kind in ("axfr", "ixfr")
]


def _runs(keys: list[tuple[str, ...]], passes: int, seed: int = 1) -> list[list[int]]:
    after = None
    out = []
    for index in range(passes):
        ran = clustered_pass(keys, index, seed, after=after)
        after = keys[ran[-1]]
        out.append(ran)
    return out


def test_a_clustered_pass_runs_every_case_once_with_its_kinds_side_by_side() -> None:
    for ran in _runs(TRANSPORT_KINDS, 6):
        assert sorted(ran) == list(range(len(TRANSPORT_KINDS)))
        transports = [TRANSPORT_KINDS[i][1] for i in ran]
        # Each transport's two kinds run back to back: one switch of transport each.
        assert all(transports[k] == transports[k + 1] for k in range(0, 8, 2))


def test_both_orders_of_a_pair_run_equally_often() -> None:
    firsts: dict[str, list[str]] = {}
    for ran in _runs(TRANSPORT_KINDS, 8):
        for k in range(0, 8, 2):
            _, transport, kind, _ = TRANSPORT_KINDS[ran[k]]
            firsts.setdefault(transport, []).append(kind)
    for kinds in firsts.values():
        assert kinds.count("axfr") == kinds.count("ixfr") == 4


def test_a_pass_starts_where_the_last_one_ended() -> None:
    runs = _runs(TRANSPORT_KINDS, 6)
    for before, after in itertools.pairwise(runs):
        assert TRANSPORT_KINDS[before[-1]][:3] == TRANSPORT_KINDS[after[0]][:3]
    orders = {tuple(TRANSPORT_KINDS[i][1] for i in ran[::2]) for ran in runs}
    assert len(orders) > 2  # the transports' order is shuffled, not fixed


def test_two_server_variants_switch_once_a_pass() -> None:
    keys = [(variant, t, "axfr", "") for variant in ("a", "b") for t in ("tcp", "xot")]
    runs = _runs(keys, 4)
    for ran in runs:
        variants = [keys[i][0] for i in ran]
        assert variants in (["a", "a", "b", "b"], ["b", "b", "a", "a"])
    assert [keys[ran[0]][0] for ran in runs] == ["a", "b", "a", "b"] or [
        keys[ran[0]][0] for ran in runs
    ] == ["b", "a", "b", "a"]


def test_clustered_passes_are_seeded_and_keys_must_be_distinct() -> None:
    assert _runs(TRANSPORT_KINDS, 3, seed=4) == _runs(TRANSPORT_KINDS, 3, seed=4)
    assert _runs(TRANSPORT_KINDS, 3, seed=4) != _runs(TRANSPORT_KINDS, 3, seed=5)
    with pytest.raises(ValueError, match="distinct"):
        clustered_pass([("a",), ("a",)], 0, 1)
