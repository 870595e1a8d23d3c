"""`xfrbench compare` on change-stream runs: each site's per-serial load time and the
share of serials within the SLA, from runs the stream flow wrote on its fake fleet."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from harness.compare.gate import load_and_compare
from harness.compare.text import print_comparison
from harness.measure.records import RecordContext
from harness.measure.stream import stream_repeat
from harness.results import RunStore, TransferRecord
from tests.unit.test_report import RUN_META
from tests.unit.test_stream_flow import FakeStreamBench, _plan


def stream_run(root: Path, name: str, far_s: float) -> Path:
    plan = _plan(
        root, ["near-1", "near-2", "far-1"], 'interval = "200ms"\nupdates = 20\nsla = "300ms"'
    )
    bench = FakeStreamBench(plan, transfer_s={"near-1": 0.05, "near-2": 0.08, "far-1": far_s})
    records: list[TransferRecord] = []
    stream_repeat(bench, RecordContext(name, plan), 1, 11, records.append, {})
    with RunStore.create(root / "results", name, None, dict(RUN_META)) as store:
        for record in records:
            store.append(record)
    return store.folder


def test_a_slower_far_site_is_a_regression_of_its_load_time_and_the_sla(tmp_path: Path) -> None:
    a = stream_run(tmp_path, "a", far_s=0.1)
    b = stream_run(tmp_path, "b", far_s=0.5)
    result = load_and_compare(a, b)
    loads = {item.label: item for item in result.cases if item.figure.startswith("stream")}
    case = next(iter(loads.values())).case
    assert set(loads) == {
        f"{case}: stream load time, fleet",
        f"{case} @ far: stream load time",
        f"{case} @ near: stream load time",
    }
    far = loads[f"{case} @ far: stream load time"]
    assert far.a.n == far.b.n == 20 and far.verdict == "regression" and far.change > 3
    near = loads[f"{case} @ near: stream load time"]
    assert near.verdict != "regression"
    (sla,) = result.stream_sla
    assert (sla.met_a, sla.serials_a, sla.met_b, sla.serials_b) == (20, 20, 0, 20)
    assert sla.regression and sla.p_value is not None and sla.p_value < 0.001
    assert result.exit_status == 1
    assert sla.label in result.to_json()["regressions"]
    out = io.StringIO()
    print_comparison(result, Console(file=out, width=200))
    printed = out.getvalue()
    assert "serials within the SLA (0.3 s): 20 of 20 (100.0%) in A, 0 of 20 (0.0%) in B" in printed
    assert "-100.0 points" in printed and "regression" in printed


def test_a_stream_run_against_itself_changes_nothing(tmp_path: Path) -> None:
    a = stream_run(tmp_path, "a", far_s=0.5)
    result = load_and_compare(a, a)
    assert result.identical and result.exit_status == 0
    (sla,) = result.stream_sla
    assert sla.change == 0 and sla.verdict == "no change"
