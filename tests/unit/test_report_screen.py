"""The first screen follows the run's question (report/screen.py): after the banner a stream
leads with its latency and SLA, a fault run with its faults table, a fleet with its
convergence, a cold start with its time and failures, an update run with the transports;
sections with nothing to say are named in one line at the end, in the page and the
terminal alike."""

from __future__ import annotations

import html
import io
import re
from pathlib import Path
from typing import Any

from rich.console import Console

from harness.report.data import load_report_data
from harness.report.html import render_html
from harness.report.screen import FirstScreen, first_screen
from harness.report.text import print_summary
from harness.results.store import RunStore
from tests.unit.test_report import RUN_META, record
from tests.unit.test_report_answers import make_run
from tests.unit.test_report_faults import run_folder as fault_run
from tests.unit.test_report_fleet_answers import make_fleet_run
from tests.unit.test_report_stream import stream_run


def first_heading(page: str) -> str:
    """The first section heading after the banner (and the navigation)."""
    answers = page[page.index('<div class="answers">') :]
    found = re.search(r'<h2 id="([^"]+)"', answers)
    assert found is not None
    return found.group(1)


def terminal(folder: Path) -> list[str]:
    out = io.StringIO()
    print_summary(load_report_data(folder), Console(file=out, width=250))
    return out.getvalue().splitlines()


def first_table(lines: list[str]) -> str:
    """The title of the first table or answer after the run's facts (the lines before it
    are the headline, run, host, servers, interrupted, CPU and warnings)."""
    facts = ("run ", "host ", "servers ", "interrupted", "zone ", "CPU", "every case", "warning")
    start = next(i for i, line in enumerate(lines) if line.startswith("interrupted"))
    return next(line for line in lines[start + 1 :] if line and not line.startswith(facts))


def cold_run(tmp_path: Path) -> Path:
    case = "bind-bind/tcp/axfr"
    cold = {"trigger": "cold-start", "extra": {"zones": 100}}
    with RunStore.create(tmp_path / "results", "c1", None, dict(RUN_META)) as store:
        store.append(record("c1", case, 0, duration_s=2.5, host="s1", **cold))
        store.append(record("c1", case, 0, duration_s=3.5, host="s2", **cold))
        store.append(
            record(
                "c1",
                case,
                0,
                duration_s=None,
                host="s3",
                ok=False,
                failure="timeout",
                error="timeout after 60 s: s3 served 88 of 100 zones",
                **cold,
            )
        )
    return store.folder


def test_an_update_run_leads_with_the_transports(tmp_path: Path) -> None:
    folder = make_run(tmp_path)
    data = load_report_data(folder)
    assert data.screen.question == "transports"
    assert data.screen.shown[:4] == ["transports", "phases", "link", "bound"]
    assert first_heading(render_html(data)) == "q-transports"
    assert first_table(terminal(folder)).startswith("What each transport costs")


def test_a_stream_leads_with_its_load_time_and_names_what_does_not_apply(
    tmp_path: Path,
) -> None:
    folder = stream_run(tmp_path)
    data = load_report_data(folder)
    screen = data.screen
    assert screen.question == "stream" and screen.shown[0] == "stream"
    page = render_html(data)
    assert first_heading(page) == "stream"
    assert 'id="q-transports"' not in page and 'id="q-phases"' not in page
    assert 'id="failures"' not in page  # its earlier serials are unchecked, not failed
    found = re.search(r'id="not-applicable">([^<]*)<', page)
    assert found is not None
    line = html.unescape(found.group(1))
    assert "What each transport costs (a stream compares no transports)" in line
    assert "Where the time went (a stream's serials are not timed in phases" in line
    lines = terminal(folder)
    assert "SLA" in first_table(lines) or "stream" in first_table(lines).lower()
    text = "\n".join(lines)
    assert "What each transport costs:" not in text.split("Not shown")[0]
    assert any(x.startswith("Not shown, as nothing in it applies") for x in lines)


def test_a_fault_run_leads_with_the_faults_table(tmp_path: Path) -> None:
    folder = fault_run(tmp_path)
    data = load_report_data(folder)
    assert data.screen.question == "faults"
    assert first_heading(render_html(data)) == "faults"
    assert first_table(terminal(folder)).startswith("Faults: how each server healed")


def test_a_fleet_leads_with_its_convergence(tmp_path: Path) -> None:
    folder = make_fleet_run(tmp_path)
    data = load_report_data(folder)
    assert data.screen.question == "fleet"
    assert first_heading(render_html(data)) == "fleet"
    assert first_table(terminal(folder)).startswith("Fleet: time from each repeat's first")


def test_a_cold_start_leads_with_its_time_and_failures(tmp_path: Path) -> None:
    folder = cold_run(tmp_path)
    data = load_report_data(folder)
    (cold,) = data.cold_starts
    assert (cold.zones, cold.served, cold.attempts) == (100, 2, 3)
    assert cold.median_s == 3.0 and cold.slowest_host == "s2"
    assert cold.failures == [("timed out", 1, "s3: timeout after 60 s: s3 served 88 of 100 zones")]
    page = render_html(data)
    assert first_heading(page) == "cold-start"
    lines = terminal(folder)
    assert first_table(lines).startswith("Cold start: from each secondary's start")
    text = "\n".join(lines)
    assert "2 of 3" in text and "s3 served 88 of 100 zones" in text
    assert "What each transport costs (a cold start compares no transports)" in text


def test_a_new_question_plugs_in_ahead_of_the_transports(tmp_path: Path) -> None:
    """The hook a new kind of run uses (the catalog's did): a question and a section."""
    from harness.report import screen

    data = load_report_data(make_run(tmp_path))
    questions, sections, order = list(screen.QUESTIONS), dict(screen.SECTIONS), screen.ORDER
    try:
        screen.add_section(screen.Section("newkind", "New kind", lambda d: True, "none"), "bound")
        screen.register(screen.Question("newkind", lambda d: True, ("newkind", "link")))
        got: FirstScreen = first_screen(data)
        assert got.question == "newkind"
        assert got.shown[:3] == ["newkind", "link", "transports"]
        assert got.templates[0] == "section_newkind.html.j2"
    finally:
        screen.QUESTIONS[:] = questions
        screen.SECTIONS.clear()
        screen.SECTIONS.update(sections)
        screen.ORDER = order


def test_a_stream_records_its_links_over_the_stream_and_the_check_reads_them(
    tmp_path: Path,
) -> None:
    """Each secondary's final record holds the link's counters over the stream (what the
    bench's observation gave), and the link check sums them per site."""
    from harness.measure.records import RecordContext
    from harness.measure.stream import stream_repeat
    from harness.results import TransferRecord
    from tests.unit.test_stream_flow import FakeStreamBench, _plan

    class Counted(FakeStreamBench):
        def observation(self, host: str, t0: float, served: float) -> dict[str, Any]:
            lost = 10 if host.startswith("far") else 0
            entry = {"passed": 990, "dropped": lost, "dropped_loss": lost, "emulated": 1000}
            facts = super().observation(host, t0, served)
            return facts | {"link": {f"{host} forward": entry}}

    plan = _plan(tmp_path, ["near-1", "far-1"], 'interval = "200ms"\nupdates = 5')
    bench = Counted(plan, transfer_s={"near-1": 0.05, "far-1": 0.5})
    records: list[TransferRecord] = []
    stream_repeat(bench, RecordContext("s1", plan), 1, 11, records.append, {})
    finals = [r for r in records if r.counts]
    assert {r.host for r in finals} == {"near-1", "far-1"}
    for item in records:
        assert ("link" in item.extra) == (item in finals)
        assert "wire" not in item.extra  # one transfer's facts mean nothing over a stream
    assert all(r.extra["link_span_s"] > 0 for r in finals)
    with RunStore.create(tmp_path / "results", "s1", None, dict(RUN_META)) as store:
        for item in records:
            store.append(item)
    checks = {c.path: c for c in load_report_data(store.folder).links}
    (far,) = checks["far"].directions
    assert (far.dropped, far.packets, far.measured_pct) == (10, 1000, 1.0)
    assert checks["near"].directions[0].dropped == 0


def test_a_gilbert_elliott_link_is_read_back_from_case_json() -> None:
    """stream.toml's Beijing: case.json dumps the model with its unused correlation (0.0),
    which the schema refuses for gemodel; the link check read it as no link ("none")."""
    from harness.report.link_checks import _link_spec

    way = {"delay": 0.12, "jitter": 0.0, "mtu": 1500, "rate": None}
    loss = {"model": "gemodel", "p": 1.0, "correlation": 0.0, "r": 30.0, "h": None}
    spec = _link_spec({"forward": way | {"loss": loss}, "reverse": way | {"loss": loss}})
    assert spec is not None and spec.forward.loss.model == "gemodel"
    assert spec.forward.loss.r == 30.0


def test_the_link_check_keeps_each_path_no_sum_covers() -> None:
    """A fault run's sites heal in different cases: the sum over two cases on one path must
    not hide the rows of the others (as the terminal did)."""
    from harness.report.link_checks import PathCheck, first_rows

    def check(case: str, path: str, cases: int = 1, missing: str | None = None) -> PathCheck:
        return PathCheck(case, path, 1, 0.02, 0.02, 1, [], cases=cases, missing=missing)

    rows = [
        check("all 2 cases", "nsd", 2),
        check("reset", "nsd"),
        check("restart", "nsd"),
        check("restart", "knot"),
        check("link-down", "bind"),
        check("reset", "link", missing="no verified transfer: 3 timed out"),
    ]
    got = [(c.case, c.path) for c in first_rows(rows)]
    assert got == [
        ("all 2 cases", "nsd"),
        ("restart", "knot"),
        ("link-down", "bind"),
        ("reset", "link"),
    ]
