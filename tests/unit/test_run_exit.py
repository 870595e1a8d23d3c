"""`xfrbench run` exits 1 when a transfer that counts failed or was not verified, from the
records of a real run with failures (tests/fixtures/runs/failures): the runner is replaced
by one that hands back a copy of that run folder."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from harness import cli
from harness.run import runner

FIXTURES = Path(__file__).parent.parent / "fixtures" / "runs"
SCENARIO = Path(__file__).parent.parent.parent / "scenarios" / "quick.toml"


@pytest.fixture
def finished_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Make `run` hand back a copy of a fixture run instead of running servers."""
    if os.geteuid() != 0:
        pytest.skip("run refuses to start without root before it runs anything")

    def use(name: str) -> Path:
        folder = tmp_path / name
        shutil.copytree(FIXTURES / name, folder)
        monkeypatch.setattr(runner, "run_scenario", lambda *args, **kwargs: folder)
        monkeypatch.setattr(cli, "_check_scenario_for_backend", lambda loaded, args: [])
        return folder

    return use


def test_a_run_with_failures_exits_1(
    finished_run: Any, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    finished_run("failures")
    assert cli.main(["run", str(SCENARIO), "--results", str(tmp_path / "r")]) == 1
    out = capsys.readouterr().out
    assert out.splitlines()[-1] == (
        "exit 1: 9 of 18 transfers failed or were not verified (--allow-failures exits 0 "
        "for exploration)"
    )


def test_allow_failures_exits_0(
    finished_run: Any, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    finished_run("failures")
    args = ["run", str(SCENARIO), "--results", str(tmp_path / "r"), "--allow-failures"]
    assert cli.main(args) == 0
    assert "9 of 18 transfers failed or were not verified; exit 0" in capsys.readouterr().out


def test_unsupported_cells_alone_are_no_failure(finished_run: Any, tmp_path: Path) -> None:
    folder = finished_run("failures")
    transfers = folder / "transfers.jsonl"
    lines = transfers.read_text().splitlines()
    kept = [line for line in lines if '"failure":"timeout"' not in line]
    assert any('"unsupported":true' in line for line in kept)
    transfers.write_text("\n".join(kept) + "\n")
    assert cli.main(["run", str(SCENARIO), "--results", str(tmp_path / "r")]) == 0


def _keep(folder: Path, wanted: str) -> None:
    transfers = folder / "transfers.jsonl"
    lines = [line for line in transfers.read_text().splitlines() if wanted in line]
    assert lines
    transfers.write_text("\n".join(lines) + "\n")


def test_a_run_of_unsupported_cells_only_measured_nothing_and_exits_1(
    finished_run: Any, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    _keep(finished_run("failures"), '"unsupported":true')
    assert cli.main(["run", str(SCENARIO), "--results", str(tmp_path / "r")]) == 1
    out = capsys.readouterr().out
    assert "all 0 transfers verified" not in out
    last = out.splitlines()[-1]
    assert last.startswith(
        "exit 1: nothing was measured (of 2 attempts, 2 unsupported by the servers' versions; "
        "the first: "
    )
    assert "Knot 3.2.6 has no XoT" in last  # the reason itself


def test_allow_failures_does_not_pass_a_run_that_measured_nothing(
    finished_run: Any, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    _keep(finished_run("failures"), '"ok":false')
    args = ["run", str(SCENARIO), "--results", str(tmp_path / "r"), "--allow-failures"]
    assert cli.main(args) == 1
    assert "nothing was measured" in capsys.readouterr().out.splitlines()[-1]


def test_the_help_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["run", "--help"])
    words = " ".join(capsys.readouterr().out.split())
    assert "1 when any failed or was not verified (--allow-failures: 0)" in words
    assert "declared, not failures" in words
    assert "when nothing was measured" in words
