"""`xfrbench compare` on synthetic runs whose outcome is known: a regression (exit 1), no
regression at the stated power (exit 0), too few or too noisy values to tell (exit 4), an
improvement, drift, missing cases, different scenarios, bad input."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any

import pytest

from harness.cli import main
from harness.compare.gate import (
    CANNOT_TELL,
    FAILED_IN_B,
    IMPROVEMENT,
    NEW_FAILURES,
    NO_CHANGE,
    NOT_CONVERGED_IN_B,
    REGRESSION,
    load_and_compare,
)
from harness.core.errors import UserInputError
from harness.core.power import yuen
from harness.core.stats import bootstrap_intervals, min_two_sided_p, repeats_for_alpha
from harness.results import RunStore, TransferRecord

CASE = "bind-bind/tcp/axfr"
BASE = [1.00, 1.01, 0.99, 1.02, 0.98, 1.03]  # no ties: the exact Mann-Whitney test applies
HASH = "ab" * 32
META = {
    "scenario_name": "synthetic",
    "spec_hash": HASH,
    "servers": {
        "bind@/usr/sbin/named": {"kind": "bind", "path": "/usr/sbin/named", "version": "9.18.49"}
    },
    "link_backend": "linkem",
    "host": {"hostname": "vm", "kernel": "6.1.0", "cpu_model": "AMD EPYC", "git_commit": "abc"},
}


def make_run(
    root: Path,
    name: str,
    cases: dict[str, list[float | None]],
    **meta_changes: Any,
) -> Path:
    """A finished run folder; a duration of None is a failed transfer."""
    meta = json.loads(json.dumps(META))
    for key, value in meta_changes.items():
        if isinstance(value, dict) and isinstance(meta.get(key), dict):
            meta[key].update(value)
        else:
            meta[key] = value
    with RunStore.create(root, name, None, meta) as store:
        for case, durations in cases.items():
            for repeat, duration in enumerate(durations):
                store.append(
                    TransferRecord(
                        run_id=name,
                        case=case,
                        repeat=repeat,
                        primary_kind="bind",
                        secondary_kind="bind",
                        host="secondary",
                        site=None,
                        transport="tcp",
                        xfr="axfr",
                        zone="tld.",
                        serial=2,
                        records=1000,
                        bytes=100_000,
                        messages=10,
                        duration_s=duration,
                        started_at=1000.0 + repeat,
                        ok=duration is not None,
                        error=None if duration is not None else "timed out",
                        verified=duration is not None,
                    )
                )
    return store.folder


def scaled(values: list[float], factor: float) -> list[float | None]:
    return [round(v * factor, 6) for v in values]


def run_cli(capsys: pytest.CaptureFixture[str], *args: Any) -> tuple[int, str, str]:
    status = main(["compare", *map(str, args)])
    out, err = capsys.readouterr()
    return status, out, err


# --- statistics ---------------------------------------------------------------------------


def test_smallest_possible_p_and_repeats_needed() -> None:
    assert min_two_sided_p(3, 3) == pytest.approx(0.1)  # 2 / C(6, 3)
    assert min_two_sided_p(5, 5) == pytest.approx(2 / 252)
    assert min_two_sided_p(0, 5) == 1.0
    assert repeats_for_alpha(0.05) == 4  # 2 / C(8, 4) = 0.029
    assert repeats_for_alpha(0.01) == 5  # 2 / C(10, 5) = 0.0079; 4 gives 0.029


def test_bootstrap_is_deterministic_and_covers_the_medians() -> None:
    a, b = BASE, scaled(BASE, 1.2)
    first = bootstrap_intervals(a, b, 0.95)
    assert first == bootstrap_intervals(a, b, 0.95)
    ci_a, ci_b, ci_change = first
    assert ci_a is not None and ci_b is not None and ci_change is not None
    assert ci_a[0] <= 1.005 <= ci_a[1] and min(a) <= ci_a[0] and ci_a[1] <= max(a)
    assert ci_change[0] == pytest.approx(0.2, abs=0.05) and ci_change[1] >= 0.19
    assert bootstrap_intervals([1.0], b, 0.95)[0] is None  # one value: no interval


# --- outcomes -----------------------------------------------------------------------------


def test_significant_regression_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    a = make_run(tmp_path, "a", {CASE: BASE})
    b = make_run(tmp_path, "b", {CASE: scaled(BASE, 1.2)})
    result = load_and_compare(a, b)
    (item,) = result.cases
    assert item.change == pytest.approx(0.2)  # the ratio of trimmed geometric means
    assert item.p_value is not None and item.p_value < 1e-4
    assert item.required and item.in_family  # the figure's only case is the figure
    assert item.verdict == REGRESSION and result.exit_status == 1
    status, out, _ = run_cli(capsys, a, b)
    assert status == 1
    assert "+20.0% [+" in out and "n=6+6) regression" in out and "1 regression(s)" in out
    assert "1.00 s ± 3%" in out and "1.21 s ± 3%" in out  # benchstat's "74.1ms ± 3%"


def test_a_change_under_half_the_threshold_is_no_regression(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """+2 % on every transfer: the test is sure, but 2 % is under half the 5 % threshold;
    and the spread is small enough to have seen 5 %: no regression at the stated power."""
    tight = [1.000, 1.001, 1.002, 1.003, 1.004, 1.005]
    a = make_run(tmp_path, "a", {CASE: tight})
    b = make_run(tmp_path, "b", {CASE: scaled(tight, 1.02)})
    result = load_and_compare(a, b)
    (item,) = result.cases
    assert item.change == pytest.approx(0.02, abs=1e-4)
    assert item.p_value is not None and item.p_value < 1e-5
    assert item.verdict == NO_CHANGE and item.decidable and item.mde is not None
    assert 0.025 < item.mde < 0.05 and result.exit_status == 0
    status, out, _ = run_cli(capsys, a, b)
    assert status == 0 and "~ +2.0% (MDE 2." in out and "(exit 0)" in out
    # a stricter threshold makes the same runs a regression
    assert run_cli(capsys, a, b, "--threshold", "0.01")[0] == 1


def test_a_large_but_noisy_change_cannot_tell(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """+7 % on transfers spread over 30 %: neither a regression nor shown to be none; it
    says how many transfers it would need."""
    a = make_run(tmp_path, "a", {CASE: [1.0, 1.2, 1.1, 1.3, 1.05, 1.25, 1.15, 1.12]})
    b = make_run(tmp_path, "b", {CASE: [1.1, 1.3, 1.16, 1.4, 1.12, 1.36, 1.22, 1.2]})
    result = load_and_compare(a, b)
    (item,) = result.cases
    assert item.change is not None and 0.05 < item.change < 0.1
    assert item.verdict == CANNOT_TELL and not item.regression
    assert item.mde is not None and item.mde > 0.05
    assert item.needs_n is not None and item.needs_n > 8
    assert result.exit_status == 4
    status, out, _ = run_cli(capsys, a, b)
    assert status == 4
    assert f"needs n >= {item.needs_n} a run" in out and "cannot tell" in out and "(exit 4)" in out


def test_three_repeats_can_tell_a_large_change_and_say_when_they_cannot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """3 against 3: a rank test's smallest p is 0.1, so it could call nothing, and exited 0.
    The trimmed t-test calls a clean +50 % a regression; a +1 % among 5 % noise cannot
    tell, and that is exit 4, not a pass."""
    a = make_run(tmp_path, "a", {CASE: [1.0, 1.01, 1.02]})
    b = make_run(tmp_path, "b", {CASE: [1.5, 1.51, 1.52]})  # +50 %, fully separated
    (item,) = load_and_compare(a, b).cases
    assert item.verdict == REGRESSION and item.p_value is not None and item.p_value < 0.001
    assert run_cli(capsys, a, b)[0] == 1
    c = make_run(tmp_path, "c", {CASE: [1.0, 1.05, 0.97]})
    d = make_run(tmp_path, "d", {CASE: [1.02, 0.99, 1.04]})
    (item,) = load_and_compare(c, d).cases
    assert item.verdict == CANNOT_TELL and item.needs_n is not None and item.needs_n > 3
    status, out, _ = run_cli(capsys, c, d)
    assert status == 4 and "n=3+3" in out and f"needs n >= {item.needs_n}" in out


def test_improvement_is_marked_better(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    a = make_run(tmp_path, "a", {CASE: BASE})
    b = make_run(tmp_path, "b", {CASE: scaled(BASE, 0.8)})
    (item,) = load_and_compare(a, b).cases
    assert item.verdict == IMPROVEMENT and item.change == pytest.approx(-0.2)
    status, out, _ = run_cli(capsys, a, b)
    assert status == 0 and "-20.0% (n=6+6) better" in out


def test_a_run_against_itself_is_no_change(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    a = make_run(tmp_path, "a", {CASE: BASE})
    (item,) = load_and_compare(a, a).cases
    assert item.change == 0 and item.p_value == pytest.approx(0.5)
    assert item.verdict == NO_CHANGE and item.identical and not item.warnings
    assert run_cli(capsys, a, a)[0] == 0


def test_all_transfers_failing_in_b_is_a_regression(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = make_run(tmp_path, "a", {CASE: BASE})
    b = make_run(tmp_path, "b", {CASE: [None] * 6})
    result = load_and_compare(a, b)
    item, failures = result.cases
    assert item.verdict == FAILED_IN_B and item.regression
    assert failures.figure == "failures" and failures.verdict == NEW_FAILURES
    assert (failures.a.failed, failures.b.failed) == (0, 6) and failures.regression
    status, out, _ = run_cli(capsys, a, b)
    assert status == 1 and "no verified transfer in B: regression" in out
    assert "new failures: 6 timed out (p=2.4e-04) regression" in out


def test_a_case_missing_in_b_cannot_tell(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """A case of A with no result in B (an interrupted B, a case dropped) hides whatever it
    would have shown: named, and exit 4; a case only in B is named."""
    a = make_run(tmp_path, "a", {CASE: BASE, "knot-bind/tcp/axfr": BASE})
    b = make_run(tmp_path, "b", {CASE: BASE, "nsd-bind/tcp/axfr": BASE})
    result = load_and_compare(a, b)
    assert [c.case for c in result.cases] == [CASE]
    assert result.only_in_a == ["knot-bind/tcp/axfr"]
    assert result.only_in_b == ["nsd-bind/tcp/axfr"]
    assert result.exit_status == 4 and result.issues
    status, out, _ = run_cli(capsys, a, b)
    assert status == 4
    assert "only in A (cannot tell): knot-bind/tcp/axfr" in out
    assert "only in B: nsd-bind/tcp/axfr" in out
    assert "1 case(s) of A have no result in B (exit 4)" in out


def test_an_interrupted_run_cannot_tell(tmp_path: Path) -> None:
    a = make_run(tmp_path, "a", {CASE: BASE})
    b = make_run(tmp_path, "b", {CASE: BASE})
    meta = json.loads((b / "run.json").read_text())
    (b / "run.json").write_text(json.dumps(meta | {"interrupted": True}))
    result = load_and_compare(a, b)
    assert result.exit_status == 4
    assert any("run B" in issue and "interrupted" in issue for issue in result.issues)


# --- metadata -----------------------------------------------------------------------------


def test_different_scenarios_are_refused_unless_allowed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = make_run(tmp_path, "a", {CASE: BASE})
    b = make_run(tmp_path, "b", {CASE: scaled(BASE, 1.2)}, spec_hash="cd" * 32)
    with pytest.raises(UserInputError) as caught:
        load_and_compare(a, b)
    assert caught.value.key == "spec_hash" and caught.value.file == str(b / "run.json")
    status, out, err = run_cli(capsys, a, b)
    assert status == 2 and out == ""
    assert "spec_hash" in err and "--allow-different-scenario" in err
    status, out, _ = run_cli(capsys, a, b, "--allow-different-scenario")
    assert status == 1  # allowed, and the regression still counts
    assert "different scenarios" in out


def test_environment_differences_are_listed(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    a = make_run(tmp_path, "a", {CASE: BASE})
    servers = {"bind@/usr/sbin/named": {"kind": "bind", "version": "9.20.1"}}
    b = make_run(tmp_path, "b", {CASE: BASE}, servers=servers, host={"kernel": "6.12.0"})
    differences = {d.what: (d.a, d.b) for d in load_and_compare(a, b).differences}
    assert differences == {"bind version": ("9.18.49", "9.20.1"), "kernel": ("6.1.0", "6.12.0")}
    status, out, _ = run_cli(capsys, a, b)
    assert status == 0
    assert "bind version: 9.18.49 -> 9.20.1" in out and "kernel: 6.1.0 -> 6.12.0" in out
    assert "two separate runs: each carries a run-to-run component" in " ".join(out.split())


def test_json_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = make_run(tmp_path, "a", {CASE: BASE, "knot-bind/tcp/axfr": [1.0, 1.01, 1.02]})
    b = make_run(tmp_path, "b", {CASE: scaled(BASE, 1.2), "knot-bind/tcp/axfr": [1.0, 1.1, 1.2]})
    status, out, _ = run_cli(capsys, a, b, "--json")
    assert status == 1
    data = json.loads(out)
    assert data["exit_status"] == 1 and CASE in data["regressions"]
    assert data["same_scenario"] is True and data["threshold"] == 0.05
    assert data["procedure"] == "holm" and data["power"] == 0.8
    assert [f["name"] for f in data["families"]] == ["overall", "per case"]
    assert sum(f["alpha"] for f in data["families"]) == pytest.approx(0.05)
    by_label = {c["label"]: c for c in data["cases"]}
    first, second = by_label[CASE], by_label["knot-bind/tcp/axfr"]
    assert first["verdict"] == "regression" and first["significant"] is True
    assert first["a"]["n"] == 6 and math.isclose(first["change"], 0.2)
    assert len(first["change_ci"]) == 2 and first["change_ci"][0] <= first["change_ci"][1]
    assert second["verdict"] == "cannot-tell" and second["needs_n"] > 3 and second["mde"] > 0.05
    overall = by_label["all cases: duration"]
    assert overall["overall"] and overall["required"] and overall["cases"] == 2
    assert run_cli(capsys, a, b, "--json")[1] == out  # deterministic


# --- bad input ----------------------------------------------------------------------------


def test_bad_input_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = make_run(tmp_path, "a", {CASE: BASE})
    status, _, err = run_cli(capsys, a, tmp_path / "nope")
    assert status == 2 and "does not exist" in err
    (tmp_path / "empty").mkdir()
    status, _, err = run_cli(capsys, tmp_path / "empty", a)
    assert status == 2 and "not a run folder" in err
    other = make_run(tmp_path, "other", {"nsd-nsd/tcp/axfr": BASE})
    status, _, err = run_cli(capsys, a, other)
    assert status == 2 and "nothing to compare" in err
    status, _, err = run_cli(capsys, a, a, "--threshold", "5")
    assert status == 2 and "--threshold" in err and "0.05 means a 5 % change" in err
    status, _, err = run_cli(capsys, a, a, "--resource-threshold", "0")
    assert status == 2 and "--resource-threshold" in err
    status, _, err = run_cli(capsys, a, a, "--alpha", "0")
    assert status == 2 and "--alpha" in err
    status, _, err = run_cli(capsys, a)
    assert status == 2 and "two run folders, or one with --axis" in err
    status, _, err = run_cli(capsys, a, a, "--axis", "servers.primary.options")
    assert status == 2 and "give one run folder" in err
    status, _, err = run_cli(capsys, a, "--axis", "servers.primary.options")
    assert status == 2 and "has no matrix axis 'servers.primary.options'" in err


def test_broken_transfers_file_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    a = make_run(tmp_path, "a", {CASE: BASE})
    b = make_run(tmp_path, "b", {CASE: BASE})
    lines = (b / "transfers.jsonl").read_text().splitlines()
    lines[0] = "{not json"
    (b / "transfers.jsonl").write_text("\n".join(lines) + "\n")
    status, _, err = run_cli(capsys, a, b)
    assert status == 2 and "transfers.jsonl:1" in err


def test_help_documents_the_exit_statuses(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["compare", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for words in ("0 no regression at the stated power", "1 a regression", "4 cannot tell",
                  "treats 4 as a failure", "Holm"):  # fmt: skip
        assert words in text, words


# --- quiet output, spread, drift ----------------------------------------------------------


def test_a_run_against_itself_prints_a_short_no_change(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Sixteen noisy cases of three transfers compared with itself: a few lines that say
    no change, not a warning per case."""
    cases = {f"bind-bind/preset=tiny/c{i}/axfr": [0.08, 0.3 + i / 100, 0.09] for i in range(16)}
    a = make_run(tmp_path, "a", cases)
    result = load_and_compare(a, a)
    assert result.identical and all(c.identical and not c.warnings for c in result.cases)
    status, out, _ = run_cli(capsys, a, a)
    assert status == 0
    assert "no change: A and B hold the same values in all 17 compared figures" in out
    assert "warning" not in out and len(out.splitlines()) <= 8


def test_three_noisy_repeats_cannot_tell_and_say_how_many_they_need(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """quick.toml at 3 repeats, with a wide spread: every case and the figure over all of
    them cannot tell; exit 4 with the repeats it would need, one line for the per-case
    ones."""
    cases = {f"bind-bind/c{i}/tcp/axfr": [0.08, 0.3, 0.09] for i in range(16)}
    other = {name: [0.081, 0.29, 0.091] for name in cases}
    a, b = make_run(tmp_path, "a", cases), make_run(tmp_path, "b", other)
    result = load_and_compare(a, b)
    overall = [c for c in result.cases if c.overall]
    assert len(overall) == 1 and overall[0].verdict == CANNOT_TELL
    assert all(c.verdict == CANNOT_TELL for c in result.cases)
    status, out, _ = run_cli(capsys, a, b)
    assert status == 4
    text = " ".join(out.split())
    assert f"needs n >= {overall[0].needs_n} a run" in text
    assert "16 per-case comparison(s) cannot tell (judged for regressions, not required" in text
    assert run_cli(capsys, a, b, "--strict")[0] == 4


def test_a_slower_drifting_case_is_a_regression(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """B slower on every transfer, and climbing: drift is no excuse (it was "drifting",
    exit 0)."""
    steady = [1.00, 1.01, 0.99, 1.02, 0.98, 1.005, 0.995, 1.015]
    climbing = [1.10, 1.14, 1.18, 1.22, 1.26, 1.30, 1.34, 1.38]  # +3 %/repeat, all slower
    a = make_run(tmp_path, "a", {CASE: steady})
    b = make_run(tmp_path, "b", {CASE: climbing})
    (item,) = load_and_compare(a, b).cases
    assert item.b.drifting and not item.a.drifting
    assert item.verdict == REGRESSION and item.regression
    status, out, _ = run_cli(capsys, a, b)
    words = " ".join(out.replace("│", " ").split())
    assert status == 1
    assert f"{CASE} drifts: run B: drift: +" in words


def test_a_worse_drifting_case_that_is_not_significant_cannot_tell(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """B a little worse and climbing 2 % a repeat: its spread is no measure of the next
    run's, so it cannot pass; a better B that drifts can."""
    steady = [1.00, 1.01, 0.99, 1.02, 0.98, 1.005, 0.995, 1.015]
    climbing = [0.94, 0.96, 0.98, 1.00, 1.02, 1.04, 1.06, 1.08]
    a = make_run(tmp_path, "a", {CASE: steady})
    b = make_run(tmp_path, "b", {CASE: climbing})
    (item,) = load_and_compare(a, b).cases
    assert item.b.drifting and item.change is not None and 0 < item.change < 0.025
    assert item.verdict == CANNOT_TELL and any("drifts" in r for r in item.reasons)
    status, out, _ = run_cli(capsys, a, b)
    assert status == 4 and "worse while a side drifts" in " ".join(out.split())
    falling = make_run(tmp_path, "c", {CASE: [1.28, 1.26, 1.24, 1.22, 1.20, 1.18, 1.16, 1.14]})
    (item,) = load_and_compare(falling, a).cases
    assert item.a.drifting and item.change is not None and item.change < -0.1
    assert item.verdict == IMPROVEMENT


def test_a_drift_cannot_hide_what_the_interval_rules_out(tmp_path: Path) -> None:
    """B climbs 8 % over its 20 repeats (a drift) but sits 0.4 % above A with an interval
    under half the 5 % threshold: no regression could hide there, so no change (an A/A
    system run was "cannot tell" 2 times in 5 on such a B)."""
    steady = [1.0 + (0.005 if i % 2 else -0.005) for i in range(20)]
    climbing = [0.964 + 0.08 * i / 19 for i in range(20)]
    a = make_run(tmp_path, "a", {CASE: steady})
    b = make_run(tmp_path, "b", {CASE: climbing})
    (item,) = load_and_compare(a, b).cases
    assert item.b.drifting and item.change is not None and 0 < item.change < 0.01
    assert item.change_ci is not None and item.change_ci[1] < 0.025
    assert item.verdict == NO_CHANGE, item.reasons


def test_a_small_trend_does_not_hide_a_regression(tmp_path: Path) -> None:
    """Values that rise by 0.1 % a repeat drift, significantly, but by less than the
    threshold over the run: a 20 % slow-down is still a regression."""
    rising = [1.000, 1.001, 1.002, 1.003, 1.004, 1.005]
    a = make_run(tmp_path, "a", {CASE: rising})
    b = make_run(tmp_path, "b", {CASE: scaled(rising, 1.2)})
    (item,) = load_and_compare(a, b).cases
    assert item.a.drift and not item.a.drifting
    assert item.verdict == REGRESSION


# --- fleets -------------------------------------------------------------------------------

FLEET_CASE = "bind-bind/tcp/axfr"


def make_fleet_run(
    root: Path, name: str, far_factor: float, repeats: int = 6, lost: tuple[int, str] | None = None
) -> Path:
    """Two sites of two secondaries; the far site's durations scaled by `far_factor`.
    `lost`: (repeat, host) of a secondary that never served."""
    with RunStore.create(root, name, None, META) as store:
        for repeat in range(1, repeats + 1):
            for site, base in (("near", 0.05), ("far", 0.5)):
                for index in (1, 2):
                    jitter = [0.0, 0.004, -0.003, 0.002, -0.001, 0.003][repeat - 1]
                    duration = (base + 0.01 * index + jitter) * (
                        far_factor if site == "far" else 1.0
                    )
                    ok = lost != (repeat, f"{site}-{index}")
                    store.append(
                        TransferRecord(
                            run_id=name, case=FLEET_CASE, repeat=repeat, primary_kind="bind",
                            secondary_kind="bind", transport="tcp", xfr="axfr", zone="tld.",
                            serial=2 + repeat, records=1000, bytes=100_000, messages=10,
                            duration_s=round(duration, 6) if ok else None,
                            started_at=1000.0 + repeat, ok=ok, verified=ok, trigger="notify",
                            error=None if ok else "timeout after 20 s: never served",
                            phases={"notify_sent": 0.01 * index}
                            | ({"served": duration} if ok else {}),
                            host=f"{site}-{index}", site=site,
                        )
                    )  # fmt: skip
    return store.folder


def test_fleets_are_compared_per_site_and_on_their_propagation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = make_fleet_run(tmp_path, "a", 1.0)
    b = make_fleet_run(tmp_path, "b", 1.3)  # the far site 30 % slower
    result = load_and_compare(a, b)
    items = {c.label: c for c in result.cases}
    assert list(items) == [
        f"{FLEET_CASE} @ near",
        f"{FLEET_CASE} @ far",
        "all cases: duration",  # the two sites' durations at once
        f"{FLEET_CASE}: fleet last",
        f"{FLEET_CASE}: fleet p95",
    ]
    near, far = items[f"{FLEET_CASE} @ near"], items[f"{FLEET_CASE} @ far"]
    # A site: one value per repeat (its last secondary, from its first NOTIFY), not its two
    # secondaries' durations pooled as if they were independent samples.
    assert near.verdict == NO_CHANGE and near.identical and (near.a.n, near.a.attempts) == (6, 6)
    assert near.per.startswith("repeat") and far.per == near.per
    far_a = statistics.median(0.52 + j + 0.01 for j in (0.0, 0.004, -0.003, 0.002, -0.001, 0.003))
    assert far.a.median_s == pytest.approx(far_a)
    assert far.verdict == REGRESSION and far.change == pytest.approx(0.294, abs=0.002)
    last = items[f"{FLEET_CASE}: fleet last"]
    # one value per repeat: the last secondary's time from the repeat's first NOTIFY
    assert last.a.n == 6 and last.a.median_s == pytest.approx(
        statistics.median(0.5 + 0.02 + j + 0.01 for j in (0.0, 0.004, -0.003, 0.002, -0.001, 0.003))
    )
    assert last.verdict == REGRESSION and last.figure == "fleet last"
    assert last.required and items[f"{FLEET_CASE} @ far"].in_family
    status, out, _ = run_cli(capsys, a, b)
    assert status == 1 and f"{FLEET_CASE} @ far" in out and "fleet last" in out
    assert "fleet and stream rows: one value per repeat" in " ".join(out.split())
    assert run_cli(capsys, a, a)[0] == 0


def test_a_fleet_that_did_not_converge_in_b_is_a_regression_not_a_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """B's far-2 never served in repeat 4: its other repeats are as fast as A's, and the
    fleet's last and p95 of the remaining five would say "no change"."""
    a = make_fleet_run(tmp_path, "a", 1.0)
    b = make_fleet_run(tmp_path, "b", 1.0, lost=(4, "far-2"))
    items = {c.label: c for c in load_and_compare(a, b).cases}
    for figure in ("fleet last", "fleet p95"):
        item = items[f"{FLEET_CASE}: {figure}"]
        assert item.verdict == NOT_CONVERGED_IN_B and item.regression
        assert (item.a.n, item.b.n, item.b.attempts) == (6, 5, 6)
        assert any("run B repeat 4: 3 of 4 served, not converged" in w for w in item.warnings)
    status, out, _ = run_cli(capsys, a, b)
    text = " ".join(out.split())
    assert status == 1 and "the fleet did not converge in B: regression" in text
    assert "far-2 (far): timed out: timeout after 20 s: never served" in text
    # The other way round, a fleet that converged in B where A's did not is no regression.
    assert all(not c.regression for c in load_and_compare(b, a).cases if "fleet" in c.label)


def test_a_fleet_sites_p_value_comes_from_its_repeats_not_its_secondaries(
    tmp_path: Path,
) -> None:
    """Two repeats of a site of 8 secondaries, 30 % slower in B: pooled, 16 against 16
    durations give p far below 0.05; one value per repeat (2 against 2) cannot reach it."""

    def run(name: str, factor: float) -> Path:
        with RunStore.create(tmp_path, name, None, META) as store:
            for repeat in (1, 2):
                for index in range(1, 9):
                    duration = (0.5 + 0.001 * index + 0.0001 * repeat) * factor
                    store.append(
                        TransferRecord(
                            run_id=name, case=FLEET_CASE, repeat=repeat, primary_kind="bind",
                            secondary_kind="bind", transport="tcp", xfr="axfr", zone="tld.",
                            serial=2 + repeat, records=1000, bytes=100_000, messages=10,
                            duration_s=duration, started_at=1000.0 + repeat, ok=True,
                            verified=True, trigger="notify",
                            phases={"notify_sent": 0.0, "served": duration},
                            host=f"far-{index}", site="far",
                        )
                    )  # fmt: skip
        return store.folder

    items = {c.label: c for c in load_and_compare(run("a", 1.0), run("b", 1.3)).cases}
    far = items[f"{FLEET_CASE} @ far"]
    assert (far.a.n, far.b.n) == (2, 2) and far.per.startswith("repeat")
    values_a = [0.508 + 0.0001 * repeat for repeat in (1, 2)]  # the site's last secondary
    expected = yuen(values_a, [1.3 * v for v in values_a])
    assert expected is not None and far.p_value == pytest.approx(expected.p_worse())
