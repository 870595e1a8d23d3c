"""`xfrbench run --dry-run`: the cases with their transfers, an estimate of the wall time
(harness/plan/estimate.py, a model of figures measured in bench/) and a warning when the
repeats can never show a difference at the chosen alpha."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from harness import cli, spec
from harness.plan.case import CasePlan, group_cases, plan_case
from harness.plan.estimate import estimate, repeat_seconds
from harness.servers.bind import Bind

SCENARIOS = Path(__file__).parent.parent.parent / "scenarios"


@pytest.fixture(autouse=True)
def no_binaries(monkeypatch: pytest.MonkeyPatch) -> None:
    """The server binaries are run for their versions on a real host; not here."""
    monkeypatch.setattr(cli, "_check_scenario_for_backend", lambda loaded, args: [])


def dry_run(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert cli.main(["run", "--dry-run", *args]) == 0
    return capsys.readouterr().out


def quick_with(tmp_path: Path, repeats: int) -> str:
    """quick.toml with another number of repeats (its own has enough for p < 0.05)."""
    text = (SCENARIOS / "quick.toml").read_text().replace("repeats = 5", f"repeats = {repeats}")
    path = tmp_path / "quick.toml"
    path.write_text(text)
    return str(path)


def test_the_demo_has_repeats_enough_for_its_transport_table(
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = dry_run(capsys, str(SCENARIOS / "quick.toml"))
    assert out.splitlines()[0].endswith("16 cases x 5 repeats: 80 transfers")
    assert "warning:" not in out


def test_quick_lists_transfers_an_estimate_and_the_alpha_warning(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out = dry_run(capsys, quick_with(tmp_path, 3))
    lines = out.splitlines()
    assert lines[0].endswith("16 cases x 3 repeats: 48 transfers")
    assert "│ transfers ┃" in out.replace("┃ transfers ┃", "│ transfers ┃")
    assert sum(line.rstrip().endswith("│         3 │") for line in lines) == 16
    (guess,) = [line for line in lines if line.startswith("estimated wall time about")]
    assert "(4 testbed visits, 48 transfers): a model of figures measured" in guess
    assert "the run will differ" in guess
    assert (
        "warning: 3 repeats per case can never give p < 0.05: the smallest two-sided "
        "Mann-Whitney p for 3 against 3 transfers is 0.1" in out
    )
    assert "set repeats = 5 (at least 4)" in out


def test_the_warning_follows_the_chosen_alpha(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    quick = quick_with(tmp_path, 3)
    assert "warning:" not in dry_run(capsys, quick, "--alpha", "0.2")
    out = dry_run(capsys, quick, "--alpha", "0.01")
    assert "can never give p < 0.01" in out and "set repeats = 5 (at least 5)" in out


def plans(name: str) -> tuple[list[CasePlan], int, str]:
    loaded = spec.load(SCENARIOS / name)
    cases = [plan_case(case) for case in loaded.cases]
    return cases, loaded.scenario.passes, loaded.scenario.order


def test_the_estimate_grows_with_what_a_run_does() -> None:
    quick, passes, order = plans("quick.toml")
    small = estimate(group_cases(quick), passes, order)
    tld, tld_passes, tld_order = plans("tld.toml")
    big = estimate(group_cases(tld), tld_passes, tld_order)
    assert small.transfers == 80 and small.visits == 4
    assert big.seconds > 5 * small.seconds  # 3 transfers of 14 M records against 48 small
    # every repeat adds its own time: settle, round trips, bytes, verification
    assert all(repeat_seconds(case) > case.settle for case in quick)


def test_a_bind_cold_start_is_paced_by_serial_query_rate() -> None:
    cold, _, _ = plans("many-zones.toml")
    for case in cold:
        zones = case.zone_spec.zones
        if case.secondaries[0].server.kind == "bind" and "serial-query-rate" not in (
            case.secondaries[0].server.options
        ):
            assert repeat_seconds(case) >= zones / 20  # BIND's default serial-query-rate


def test_the_cold_start_pace_is_the_dialects() -> None:
    assert Bind.cold_zones_per_s({}) == 20.0
    assert Bind.cold_zones_per_s({"serial-query-rate": 200}) == 200.0
    cold, _, _ = plans("many-zones.toml")
    bind = next(case for case in cold if case.secondaries[0].server.kind == "bind")
    faster = dataclasses.replace(
        bind.secondaries[0],
        server=bind.secondaries[0].server.model_copy(
            update={"options": {"serial-query-rate": 2000}}
        ),
    )
    assert repeat_seconds(dataclasses.replace(bind, hosts=(bind.primary, faster))) < repeat_seconds(
        bind
    )


def test_the_dry_run_says_what_compare_can_detect_and_the_repeats_it_needs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """From the spread of a reference run: at quick.toml's 5 repeats the CPU over all 16
    cases is out of reach of a 10 % threshold; at 10, what the README recommends, it is
    not."""
    out = " ".join(dry_run(capsys, str(SCENARIOS / "quick.toml")).split())
    assert "compare's power at 5 repeats (spreads of a reference run, quick20-a" in out
    assert "CPU per transfer 10% over all cases needs repeats >= 6" in out
    assert 'at these repeats compare would likely say "cannot tell" (exit 4)' in out
    out = " ".join(dry_run(capsys, quick_with(tmp_path, 10)).split())
    assert "compare's power at 10 repeats" in out and "cannot tell" not in out
