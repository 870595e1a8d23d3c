"""`report --json` and `run --json`: the first screen's figures as JSON, on stdout alone."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from harness import cli
from harness.run import runner

FIXTURES = Path(__file__).parent.parent / "fixtures" / "runs"
SCENARIO = Path(__file__).parent.parent.parent / "scenarios" / "quick.toml"


def report_json(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str) -> dict:
    folder = tmp_path / name
    shutil.copytree(FIXTURES / name, folder)
    assert cli.main(["report", str(folder), "--json"]) == 0
    assert (folder / "report.html").is_file()  # written all the same
    return json.loads(capsys.readouterr().out)


def test_report_json_holds_the_first_screen(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = report_json(tmp_path, capsys, "failures")
    assert data["headline"].startswith("FAILED: 9 of 18 transfers failed or were not verified")
    failures = data["failures"]
    assert (failures["counted"], failures["failed"], failures["unsupported"]) == (18, 9, 2)
    (reason,) = failures["reasons"]
    assert reason["kind"] == "timeout" and reason["count"] == 9
    assert reason["first_case"] == "bind-bind/loss=100%/xot/axfr"
    assert len(data["phases"]) == 8 and len(data["cases"]) == 8
    missing = {p["case"]: p["missing"] for p in data["phases"] if p["missing"]}
    assert missing["bind-bind/loss=100%/tcp/axfr"] == "no verified transfer: 3 timed out"
    rows = {c["label"]: c for c in data["cases"]}
    assert rows["bind-bind/loss=100%/tcp/axfr"]["failures"] == ["3 timed out [1]"]
    assert rows["bind-bind/loss=0%/tcp/axfr"]["median_s"] == pytest.approx(0.040988584)


def test_a_fleet_run_has_its_section(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    data = report_json(tmp_path, capsys, "fleet-v1")
    assert data["fleet"] and data["fleet"]["cases"]


def test_run_json_prints_only_json_on_stdout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    if os.geteuid() != 0:
        pytest.skip("run refuses to start without root before it runs anything")
    folder = tmp_path / "failures"
    shutil.copytree(FIXTURES / "failures", folder)
    monkeypatch.setattr(runner, "run_scenario", lambda *args, **kwargs: folder)
    monkeypatch.setattr(cli, "_check_scenario_for_backend", lambda loaded, args: [])
    status = cli.main(["run", str(SCENARIO), "--results", str(tmp_path / "r"), "--json"])
    out, err = capsys.readouterr()
    assert status == 1  # the failures still fail the run
    assert json.loads(out)["failures"]["failed"] == 9
    assert "exit 1: 9 of 18 transfers failed" in err
