"""`xfrbench compare` on change-stream runs: each site's load time and the share of serials
over the SLA, one value per repeat (a repeat's serials share its primary, its links and its
moment: no independent samples), from runs the stream flow wrote on its fake fleet."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from harness.compare.gate import CANNOT_TELL, NO_CHANGE, REGRESSION, load_and_compare
from harness.compare.text import print_comparison
from harness.measure.records import RecordContext
from harness.measure.stream import stream_repeat
from harness.results import RunStore, TransferRecord
from tests.unit.test_report import RUN_META
from tests.unit.test_stream_flow import FakeStreamBench, _plan

JITTER = (1.0, 1.03, 0.98, 1.01, 0.99, 1.02)  # one factor per repeat: repeats differ a little


def stream_run(root: Path, name: str, far_s: float, repeats: int = 6) -> Path:
    plan = _plan(
        root, ["near-1", "near-2", "far-1"], 'interval = "200ms"\nupdates = 20\nsla = "300ms"'
    )
    records: list[TransferRecord] = []
    first = 11
    for repeat in range(1, repeats + 1):
        factor = JITTER[(repeat - 1) % len(JITTER)]
        times = {"near-1": 0.05 * factor, "near-2": 0.08 * factor, "far-1": far_s * factor}
        bench = FakeStreamBench(plan, transfer_s=times)
        first = stream_repeat(bench, RecordContext(name, plan), repeat, first, records.append,
                              {}) + 1  # fmt: skip
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
        f"{case}: stream serials over the SLA",
        "all cases: stream load time",  # the sites' at once
    }
    far = loads[f"{case} @ far: stream load time"]
    assert (far.a.n, far.b.n) == (6, 6)  # one value per repeat, never per serial
    assert far.verdict == REGRESSION and far.change is not None and far.change > 3
    near = loads[f"{case} @ near: stream load time"]
    assert near.verdict == NO_CHANGE
    sla = loads[f"{case}: stream serials over the SLA"]
    assert sla.a.level == 0.0 and sla.b.level == 1.0  # every serial of B over 300 ms
    assert sla.verdict == REGRESSION and sla.required
    fleet = loads[f"{case}: stream load time, fleet"]
    assert fleet.required and fleet.regression
    assert result.exit_status == 1
    out = io.StringIO()
    print_comparison(result, Console(file=out, width=200))
    printed = out.getvalue()
    assert "stream serials over the SLA" in printed and "+100.0 points" in printed
    assert "one value per repeat: the median of its serials' load times" in printed


def test_one_repeat_of_twenty_serials_cannot_tell(tmp_path: Path) -> None:
    """Twenty serials of one repeat, pooled, made p tiny; they are one sample of the
    stream, and one value a run cannot tell anything."""
    a = stream_run(tmp_path, "a", far_s=0.1, repeats=1)
    b = stream_run(tmp_path, "b", far_s=0.5, repeats=1)
    result = load_and_compare(a, b)
    far = next(c for c in result.cases if c.label.endswith("@ far: stream load time"))
    assert (far.a.n, far.b.n) == (1, 1) and far.verdict == CANNOT_TELL
    assert result.exit_status == 4


def test_a_stream_run_against_itself_changes_nothing(tmp_path: Path) -> None:
    a = stream_run(tmp_path, "a", far_s=0.5)
    result = load_and_compare(a, a)
    assert result.identical and result.exit_status == 0
