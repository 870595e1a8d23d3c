"""The secondaries' logged failures in the report's case table and the terminal summary:
counted from captured logs of real servers (tests/fixtures/failures), summed per case."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console

from harness import servers
from harness.core.terms import ServerKind
from harness.report.data import load_report_data
from harness.report.html import render_html
from harness.report.text import LOGGED_COLUMN, print_summary
from harness.results import RunStore
from tests.unit.test_report import RUN_META, Page, record

CAPTURES = Path(__file__).resolve().parents[1] / "fixtures" / "failures"
S2S = "server-to-server"
BIND_CASE = "knot-bind/tcp/axfr"
NSD_CASE = "knot-nsd/tcp/axfr"
SILENT_CASE = "bind-nsd/tcp/axfr"
OLD_CASE = "bind-bind/tcp/axfr"
NONE_CASE = "knot-knot/tcp/axfr"


def logged(kind: ServerKind, capture: str) -> dict[str, Any]:
    """What a record of that secondary holds: its counts in the captured log."""
    text = (CAPTURES / capture).read_text()
    return {"secondary_failures": servers.count_failures(kind, text, None).to_json()}


# A record of a harness before null counts and the "unreachable" category: 0 everywhere.
OLD = {
    "secondary_failures": {
        "server": "bind",
        "address_not_available": 0,
        "refused": 0,
        "timed_out": 2,
        "retry": 0,
        "other_failure": 0,
        "failing_lines": 2,
        "first_failure_s": 31.2,
        "first_failure_line": "...",
        "resolution_s": 0.001,
    }
}


def make_run(root: Path) -> Path:
    rows = [
        (BIND_CASE, "bind", logged("bind", "bind-unreachable-cached.log")),
        (BIND_CASE, "bind", logged("bind", "bind-refused-rcode.log")),
        (NSD_CASE, "nsd", logged("nsd", "nsd-timed-out.log")),
        (NSD_CASE, "nsd", logged("nsd", "nsd-connect-timed-out.log")),
        (SILENT_CASE, "nsd", logged("nsd", "nsd-timed-out.log")),
        (OLD_CASE, "bind", OLD),
        (NONE_CASE, "knot", {"secondary_failures": {}}),
    ]
    with RunStore.create(root, "failures", None, dict(RUN_META)) as store:
        for repeat, (case, kind, server_logged) in enumerate(rows):
            store.append(
                record("failures", case, repeat, secondary_kind=kind, server_logged=server_logged)
            )
    return store.folder


EXPECTED = {
    # 2 + 0 refused connects, 0 + 8 REFUSED SOA queries and 8 NOTAUTH transfers; 28 skips.
    BIND_CASE: "refused 18, unreachable 28 (BIND)",
    # 22 kernel connect timeouts in one repeat, none logged in the other: a floor.
    NSD_CASE: "timed out ≥22 (NSD)",
    SILENT_CASE: "none",
    OLD_CASE: "timed out 2 (BIND)",
    NONE_CASE: "-",
}


def test_each_case_sums_its_secondarys_counts_in_its_words(tmp_path: Path) -> None:
    data = load_report_data(make_run(tmp_path))
    assert {row.case: row.logged_failures_text for row in data.cases} == EXPECTED
    bind = next(row for row in data.cases if row.case == BIND_CASE).logged_failures
    assert [(item.server, item.records, item.counts["retry"]) for item in bind] == [
        ("bind", 2, None)
    ]


def test_the_html_case_table_shows_them(tmp_path: Path) -> None:
    html = render_html(load_report_data(make_run(tmp_path)))
    page = Page(html)
    for case, text in EXPECTED.items():
        assert page.cells[(case, S2S, "logged-failures")]["text"] == text
    assert "never counted: retries (BIND); timed out, retries (NSD)" in html


def test_the_terminal_summary_shows_them(tmp_path: Path) -> None:
    console = Console(record=True, width=400)
    print_summary(load_report_data(make_run(tmp_path)), console)
    out = console.export_text()
    assert LOGGED_COLUMN in out
    for text in EXPECTED.values():
        assert text in out
    # Never 0 where a server has no line for a category: named once, under the table.
    assert "retries 0" not in out and "timed out 0" not in out
    assert "not logged, so never counted: retries (BIND); timed out, retries (NSD)" in out
