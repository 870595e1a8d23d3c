"""`xfrbench compare RUN --axis KEY`: the two sides of one interleaved A/B run, on a run
folder written here (records, samples, each case's case.json with its axes), as a run with
`[matrix] "servers.primary.options" = [{label = "default"}, {label = "one-answer", ...}]`
writes it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.cli import main
from harness.compare.ab import load_and_compare_axis, shared_name
from harness.compare.gate import NO_CHANGE, REGRESSION
from harness.results import RunStore
from tests.unit.test_compare_gate import BASE, DURATIONS, META, changed, record, samples

AXIS = "servers.primary.options"
VALUES = [{"label": "default"}, {"label": "one-answer", "transfer-format": "one-answer"},
          {"label": "many-answers", "transfer-format": "many-answers"}]  # fmt: skip


def ab_run(root: Path, name: str, sides: dict[str, dict[str, Any]]) -> Path:
    """One run whose cases differ in AXIS: per label, {"durations": [...] by transport,
    "resources": per-role figures}; transports tcp and xot, AXFR."""
    meta = json.loads(json.dumps(META))
    meta["scenario"] = {"name": "ab", "matrix": {AXIS: VALUES}}
    lines = []
    with RunStore.create(root, name, None, meta) as store:
        index = 0
        for label, side in sides.items():
            for transport, durations in side["durations"].items():
                case = f"bind-bind/{label}/{transport}/axfr"
                for repeat, duration in enumerate(durations, 1):
                    store.append(record(name, case, repeat, duration, transport=transport))
                lines += samples(case, side.get("resources", BASE), 100.0 * index)
                case_json = {"format_version": 2, "case": case, "axes": {AXIS: label},
                             "transport": transport, "xfr": "axfr"}  # fmt: skip
                for visit in (index, index + 100):  # each case's testbed is visited twice
                    folder = store.folder / "cases" / f"{visit:03d}-x" / case.replace("/", "_")
                    folder.mkdir(parents=True)
                    (folder / "case.json").write_text(json.dumps(case_json))
                index += 1
        (store.folder / "samples.jsonl").write_text("".join(json.dumps(s) + "\n" for s in lines))
    return store.folder


def same(factor: float = 1.0) -> dict[str, list[float]]:
    return {t: [round(v * factor, 6) for v in DURATIONS] for t in ("tcp", "xot")}


def test_a_slower_costlier_b_side_is_a_regression(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doubled = [2 * v for v in BASE["primary"]["cpu"]]
    run = ab_run(tmp_path, "ab", {
        "default": {"durations": same()},
        "one-answer": {"durations": same(1.3), "resources": changed("primary", cpu=doubled)},
    })  # fmt: skip
    result = load_and_compare_axis(run, AXIS)
    assert result.axis == f"{AXIS}: default -> one-answer"
    labels = {c.label: c for c in result.cases}
    assert labels["bind-bind/tcp/axfr"].verdict == REGRESSION  # the name both sides share
    assert labels["bind-bind/xot/axfr: CPU per transfer, primary"].verdict == REGRESSION
    assert labels["all cases: duration"].regression
    assert labels["all cases: CPU per transfer, secondary"].verdict == NO_CHANGE
    assert not result.notes and not result.only_in_a and result.exit_status == 1
    status = main(["compare", str(run), "--axis", AXIS])
    out = " ".join(capsys.readouterr().out.split())
    assert status == 1
    assert f"one interleaved A/B run, axis {AXIS}: default -> one-answer" in out
    assert "two separate runs" not in out


def test_an_a_a_run_is_no_regression(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    run = ab_run(tmp_path, "aa", {"default": {"durations": same()},
                                  "one-answer": {"durations": same()}})  # fmt: skip
    assert load_and_compare_axis(run, AXIS).exit_status == 0
    assert main(["compare", str(run), "--axis", AXIS, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["axis"] == f"{AXIS}: default -> one-answer" and data["exit_status"] == 0


def test_a_and_b_pick_among_more_values(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    run = ab_run(tmp_path, "abc", {
        "default": {"durations": same()},
        "one-answer": {"durations": same(1.3)},
        "many-answers": {"durations": same()},
    })  # fmt: skip
    assert load_and_compare_axis(run, AXIS).exit_status == 1  # default -> one-answer
    result = load_and_compare_axis(run, AXIS, b="many-answers")
    assert result.axis == f"{AXIS}: default -> many-answers" and result.exit_status == 0
    result = load_and_compare_axis(run, AXIS, a="one-answer", b="default")
    assert result.exit_status == 0  # B faster: an improvement
    status = main(["compare", str(run), "--axis", AXIS, "--b", "nope"])
    err = capsys.readouterr().err
    assert status == 2 and "has no value 'nope'" in err and "default, one-answer" in err


def test_a_case_without_its_b_partner_cannot_tell(tmp_path: Path) -> None:
    run = ab_run(tmp_path, "short", {"default": {"durations": same()},
                                     "one-answer": {"durations": {"tcp": DURATIONS}}})  # fmt: skip
    result = load_and_compare_axis(run, AXIS)
    assert result.only_in_a == ["bind-bind/default/xot/axfr"]
    assert result.exit_status == 4


def test_the_shared_name_leaves_the_axis_out() -> None:
    assert shared_name("bind-bind/default/tcp/axfr", "bind-bind/one-answer/tcp/axfr") == (
        "bind-bind/tcp/axfr"
    )
    assert shared_name("bind-bind/tcp/axfr", "bind-knot/tcp/axfr") == "tcp/axfr"
    assert shared_name("a/b", "a/b/c") == "a/b"
