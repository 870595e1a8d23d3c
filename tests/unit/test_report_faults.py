"""The report's faults section: the table of fault x server, each faulted repeat's timeline,
and the terminal table, from records the fault flow wrote (on the fake bench)."""

from __future__ import annotations

import io
from dataclasses import replace
from pathlib import Path

from rich.console import Console

from harness.measure.faults import Account, fault_repeat
from harness.measure.records import RecordContext
from harness.report.data import load_report_data
from harness.report.faultview import cell_text, status_words
from harness.report.figures import build_figures, render_svg
from harness.report.html import render_html
from harness.report.text_faults import print_faults
from harness.results.model import TransferRecord
from harness.results.store import RunStore
from tests.unit.test_fault_flow import FaultFake, faulted
from tests.unit.test_report import RUN_META, Page, drawn

KNOT_STATUS = "[x.] role: slave | serial: 4 | refresh: +4m40s | expiration: +6D23h59m38s"
NSD_STATUS = (
    'zone:\tx.\n\tstate: refreshing\n\tserved-serial: "4"\n\twait: "286 sec between attempts"'
)


class Faulty(FaultFake):
    """The fake, with a server's own zone status for the stuck."""

    def account(self, host: str, zone: str, since: float, *, stuck: bool) -> Account:
        got = super().account(host, zone, since, stuck=stuck)
        return replace(got, status=NSD_STATUS if stuck else None)


def faulted_records(tmp_path: Path) -> list[TransferRecord]:
    out: list[TransferRecord] = []
    down = faulted(tmp_path, 'kind = "link-down"\nat = "1s"\nduration = "4s"')
    bench = Faulty(down, serve_after={"near": 0.5, "far": 3.0}, heal_after={"far": 1.5})
    fault_repeat(bench, bench, RecordContext("faults", down), 1, 12, out.append, {})
    reset = faulted(tmp_path, 'kind = "reset"\nat = "0.5s"')
    bench = Faulty(
        reset,
        serve_after={"near": 2.0, "far": 2.0},
        heal_after={"near": 0.7, "far": None},
        freed_after={"far": 0.3},
    )
    fault_repeat(bench, bench, RecordContext("faults", reset), 1, 13, out.append, {})
    one = faulted(
        tmp_path, 'kind = "link-degrade"\nat = "0s"\nduration = "2s"\nloss = "10%"\ntarget = "far"'
    )
    bench = Faulty(one, serve_after={"near": 0.5, "far": 1.0}, heal_after={"far": 0.5})
    fault_repeat(bench, bench, RecordContext("faults", one), 1, 14, out.append, {})
    return out


def run_folder(tmp_path: Path) -> Path:
    with RunStore.create(tmp_path / "results", "faults", None, dict(RUN_META)) as store:
        for record in faulted_records(tmp_path):
            store.append(record)
    return store.folder


def test_status_words_keep_what_the_server_waits_for() -> None:
    assert status_words(KNOT_STATUS) == "refresh: +4m40s"
    assert status_words(NSD_STATUS) == 'state: refreshing; wait: "286 sec between attempts"'
    bind = "name: x.\ntype: secondary\nserial: 4\nnext refresh: Wed, 25 Nov 2026 17:38:01 GMT"
    assert status_words(bind) == "next refresh: Wed, 25 Nov 2026 17:38:01 GMT"
    assert status_words(None) == ""


def test_the_table_says_what_each_server_did(tmp_path: Path) -> None:
    data = load_report_data(run_folder(tmp_path))
    assert data.faults is not None
    assert data.faults.kinds == ["bind", "nsd"]
    rows = {row.fault: row for row in data.faults.rows}
    down, reset = rows["link-down"], rows["reset"]
    assert cell_text(down.cells["bind"]) == "unaffected"  # near served at 0.5 s
    assert cell_text(down.cells["nsd"]) == "healed in 1.50 s"
    assert cell_text(reset.cells["bind"]) == "healed in 0.70 s"
    assert cell_text(reset.cells["nsd"]) == "stuck; a new NOTIFY freed it"
    assert reset.cells["nsd"].words == 'state: refreshing; wait: "286 sec between attempts"'
    # A fault on one site: the others are not targeted.
    one = rows["link-degrade"]
    assert cell_text(one.cells["bind"]) == "not targeted"
    assert cell_text(one.cells["nsd"]) == "healed in 0.50 s"
    # One timeline per faulted repeat, each secondary in it.
    assert [(c.name, len(c.hosts)) for c in data.faults.cases] == [
        ("link-down", 2),
        ("reset", 2),
        ("link-degrade", 2),
    ]


def test_html_and_figure(tmp_path: Path) -> None:
    data = load_report_data(run_folder(tmp_path))
    figures = build_figures(data)
    (figure,) = [f for f in figures if f.id == "fig-faults"]
    assert figure.section == "faults" and figure.drawable
    down = figure.series["cases"][0]
    assert down["window"] == [1.0, 5.0]
    far = next(h for h in down["hosts"] if h["host"] == "far")
    assert far["served_s"] == 6.5 and far["marks"] == [[1.5, "timed_out"]]
    svg = render_svg(figure)
    ids = drawn(svg, "fig-faults")
    assert "fig-faults-window-0" in ids and "fig-faults-served-0-1" in ids
    assert "fig-faults-marks-0-1" in ids
    page = render_html(data, figures)
    assert 'href="#faults"' in page and 'id="faults-table"' in page
    assert 'data-fault="reset"' in page and "a new NOTIFY freed it" in page
    assert "fig-faults" in Page(page).figures


def test_terminal_table(tmp_path: Path) -> None:
    data = load_report_data(run_folder(tmp_path))
    out = io.StringIO()
    print_faults(data, Console(file=out, width=160))
    text = out.getvalue()
    assert "Faults: how each server healed" in text
    assert "healed in 1.50 s" in text and "stuck; a new NOTIFY freed it" in text
    assert "286 sec between attempts" in text


def test_a_run_without_faults_has_no_section(tmp_path: Path) -> None:
    with RunStore.create(tmp_path / "results", "plain", None, dict(RUN_META)) as store:
        pass
    data = load_report_data(store.folder)
    assert data.faults is None
    assert 'id="faults-table"' not in render_html(data)
