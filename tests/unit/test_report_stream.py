"""The report's change-stream section: its numbers (report/streamview.py, the same as
summary.json's stream section), its tables and figures in report.html, its terminal lines;
from records the stream flow wrote on its fake fleet."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

from rich.console import Console

from harness.measure.records import RecordContext
from harness.measure.stream import stream_repeat
from harness.report.data import load_report_data
from harness.report.figures import build_figures, render
from harness.report.html import render_html
from harness.report.text import print_summary
from harness.results import RunStore, TransferRecord
from tests.unit.test_report import RUN_META, Page, drawn
from tests.unit.test_stream_flow import FakeStreamBench, _plan

REASON = "incomplete history, serial 14, fallback to AXFR"


def stream_run(tmp_path: Path, *, summary: bool = True) -> Path:
    plan = _plan(
        tmp_path, ["near-1", "near-2", "far-1"], 'interval = "200ms"\nupdates = 20\nsla = "1s"'
    )
    bench = FakeStreamBench(
        plan,
        transfer_s={"near-1": 0.05, "near-2": 0.08, "far-1": 0.5},
        axfr={"near-1": {16: REASON}},
    )
    records: list[TransferRecord] = []
    stream_repeat(bench, RecordContext("s1", plan), 1, 11, records.append, {})
    with RunStore.create(tmp_path / "results", "s1", None, dict(RUN_META)) as store:
        for record in records:
            store.append(record)
    if not summary:  # as an interrupted run: no stream section to read
        (store.folder / "summary.json").unlink()
    return store.folder


def test_the_model_reads_the_summary_and_recomputes_the_same(tmp_path: Path) -> None:
    folder = stream_run(tmp_path)
    stored = load_report_data(folder).stream
    assert stored is not None and stored.source == "summary.json"
    summary = json.loads((folder / "summary.json").read_text())["stream"]
    (item,) = stored.cases
    assert [row.site for row in item.latency] == ["", "far", "near"]  # the fleet first
    (case,) = summary
    assert item.sla == summary[case]["sla"] and item.serials == 20
    (tmp_path / "again").mkdir()
    again = load_report_data(stream_run(tmp_path / "again", summary=False)).stream
    assert again is not None and again.source == "transfers.jsonl"
    assert [r.p95_s for r in again.cases[0].latency] == [r.p95_s for r in item.latency]
    # The lag comes from the records either way: one series per secondary.
    assert set(item.lag) == {(1, "near-1"), (1, "near-2"), (1, "far-1")}


def test_report_html_has_the_stream_tables_and_figures(tmp_path: Path) -> None:
    data = load_report_data(stream_run(tmp_path))
    figures = build_figures(data)
    text = render_html(data, figures)
    assert '<h2 id="stream">Change stream</h2>' in text and 'href="#stream"' in text
    assert "95 % of the fleet served" in text and "RSSAC002" in text
    assert REASON in text and "journal trimmed" not in text  # the fake gave no kind
    # Durations carry their unit once ("1.00 s", never "1.00 s s"); one serial is singular.
    assert not re.search(r"\d (?:µs|ms|s) s\b", text)
    assert not re.search(r"\b1 serials\b", text)
    page = Page(text)
    load = page.figures["fig-stream-load"]
    panels = load["series"]["panels"]
    assert [p["site"] for p in panels] == ["fleet", "far", "near"]
    assert all(len(p["points"]) == 20 for p in panels)
    assert all(p["sla_s"] == 1.0 for p in panels)
    # One load line per panel, drawn with a marker per serial that reached 95 %.
    marks = drawn(load["svg"], "fig-stream-load-load-")
    assert len(marks) == 3 and all(count >= 20 for count in marks.values())
    lag = page.figures["fig-stream-lag"]
    (case,) = lag["series"]["cases"]
    assert sorted(line["host"] for line in case["lines"]) == ["far-1", "near-1", "near-2"]
    assert drawn(lag["svg"], "fig-stream-lag-serials-0-")
    assert render(next(f for f in figures if f.id == "fig-stream-lag"), "png")[:4] == b"\x89PNG"


def test_terminal_summary_says_the_sla_and_each_fallback(tmp_path: Path) -> None:
    data = load_report_data(stream_run(tmp_path))
    out = io.StringIO()
    print_summary(data, Console(file=out, width=200))
    printed = out.getvalue()
    assert "Change stream: publication latency" in printed
    assert "95 % of the fleet served" in printed
    assert not re.search(r"\b1 serials\b", printed)
    assert re.search(r"\b1 serial, ", printed)  # the near secondaries were one behind
    assert f'near-1 took serial 16 by AXFR: - (?: "{REASON}")' in printed
