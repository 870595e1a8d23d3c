"""The report of a real run with failures (tests/fixtures/runs/failures: a secondary behind
a dead link times out, Knot 3.2 over XoT is unsupported): failed of counted comes first, in
the terminal and on the page, and a case with no verified transfer keeps its row in every
table, saying why."""

from __future__ import annotations

import html
import io
import re
import shutil
from pathlib import Path

import pytest
from rich.console import Console

from harness.cli import main
from harness.report.data import load_report_data
from harness.report.html import render_html
from harness.report.labels import readable
from harness.report.text import print_summary

FIXTURE = Path(__file__).parent.parent / "fixtures" / "runs" / "failures"
TIMED_OUT = [
    "bind-bind/loss=100%/xot/axfr",
    "bind-bind/loss=100%/tcp/axfr",
    "bind-knot/loss=100%/tcp/axfr",
]
UNSUPPORTED = ["bind-knot/loss=0%/xot/axfr", "bind-knot/loss=100%/xot/axfr"]
HEADLINE = "FAILED: 9 of 18 transfers failed or were not verified (they count in no figure)"


def words(text: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", text)).split())


def section(page: str, start: str, end: str) -> str:
    return page[page.index(f'id="{start}"') : page.index(f'id="{end}"')]


def test_the_terminal_puts_failed_of_counted_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "failures"
    shutil.copytree(FIXTURE, folder)
    assert main(["report", str(folder)]) == 0  # report reports; only run gates
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(HEADLINE)
    assert lines[1].startswith("  [1] 9 x timed out: timeout after 124 s: the secondary never")
    assert lines[1].endswith("(first bind-bind/loss=100%/xot/axfr repeat 1; 2 more cases)")
    assert lines[2].startswith("  unsupported: secondary knot 3.2.6: Knot 3.2.6 has no XoT")


def test_the_page_puts_failed_of_counted_first() -> None:
    page = render_html(load_report_data(FIXTURE))
    banner = words(section(page, "failures-banner", "q-transports"))
    assert HEADLINE in banner
    assert "9 × timed out : timeout after 124 s" in banner
    assert page.index('id="stats"') < page.index('id="failures-banner"') < page.index("<nav>")
    stats = words(section(page, "stats", "failures-banner"))
    assert "9 verified 9 failed or not verified 2 unsupported (declared, not failures)" in stats
    listed = section(page, "failed-attempts", "cases-section")
    assert listed.count("<tr data-case=") == 9


def test_every_table_keeps_a_case_without_result() -> None:
    page = render_html(load_report_data(FIXTURE))
    phases = words(section(page, "phases", "q-link"))
    links = words(section(page, "q-link", "q-bound"))
    bound = words(section(page, "q-bound", "failures"))
    cases = section(page, "cases", "figures")
    for case in TIMED_OUT:
        short = readable(case.removesuffix("/axfr"))  # every case is */axfr, in words
        assert f"{short} - - - - no verified transfer: 3 timed out" in phases, case
        assert f"{short} no verified transfer: 3 timed out" in links, case
        assert f"{short} ( no verified transfer: 3 timed out )" in bound, case
        assert f'data-case="{case}"' in cases, case
    for case in UNSUPPORTED:
        assert f"{readable(case.removesuffix('/axfr'))} - - - - unsupported: secondary" in phases
    transports = words(section(page, "transport-costs", "transport-notes"))
    assert "BIND → BIND · loss 100% - no verified transfer: 3 timed out" in transports
    assert "BIND → Knot · loss 100% - no verified transfer: 3 timed out - unsupported" in transports


def test_the_terminal_tables_keep_them_too() -> None:
    out = io.StringIO()
    print_summary(load_report_data(FIXTURE), Console(file=out, width=240))
    text = out.getvalue()
    tables = {title: "" for title in ("What each", "Where the time", "Did the link", "cases")}
    current = None
    for line in text.splitlines():
        current = next((t for t in tables if line.startswith(t)), current)
        if current:
            tables[current] += line + "\n"
    for case in TIMED_OUT:
        short = readable(case.removesuffix("/axfr"))
        for title in ("Where the time", "Did the link", "cases"):
            assert short in tables[title], (title, case)
    assert tables["Where the time"].count("no verified transfer: 3 timed out") == 3
    assert tables["What each"].count("no verified transfer: 3 timed out") == 3
    assert "How close to the bound: no throughput without a verified transfer" in text
