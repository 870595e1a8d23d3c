"""Output that is not a terminal (a CI log, `| cat`) wraps, and is never cut: rich crops a
table line its columns cannot fold into the console's width, losing the end of every row."""

from __future__ import annotations

import io
import re
import shutil
from pathlib import Path

import pytest
from rich.console import Console

from harness.cli import main
from harness.core import ui

FIXTURE = Path(__file__).parent.parent / "fixtures" / "runs" / "failures"
BORDERS = "│┃┐┓┘┛┤┫┩"
LONG_NOTE = (
    "24 failed: RRSUM differs: expected 2 records (sum 1b9ee79af28d4bd0…), the copy has 3 "
    "(sum 191b8b2cf295039c…); RRSUM differs: expected 2 records (sum 8abb169f8b7bb4c3…)"
)
CASE = "bind-bind/preset=tld,records=10000/xot-tsig/axfr"
COLUMNS = ["case", "method", "n", "ok", "failed", "unsup", "median", "p10", "p90"]
COLUMNS += ["throughput", "bound", "note"]
ROW = [CASE, "server", "3", "3", "0", "0", "77.1 ms", "74.3 ms", "78.6 ms", "25.4 kbit/s"]
ROW += ["26.2 Mbit/s", LONG_NOTE]


def columns_text(out: str) -> list[str]:
    """Each column's text, its cells' folded lines joined, spaces dropped."""
    joined: list[str] = []
    for line in out.splitlines():
        if not line.startswith(("│", "┃")):
            continue
        cells = re.split(r"[│┃]", line)[1:-1]
        joined += [""] * (len(cells) - len(joined))
        for index, cell in enumerate(cells):
            joined[index] += cell.strip()
    return joined


def assert_not_cut(out: str, width: int | None = None) -> None:
    table_lines = [line for line in out.splitlines() if line[:1] in "┏┃┡│└"]
    assert table_lines
    for line in table_lines:
        assert line.rstrip()[-1] in BORDERS, f"cut: {line!r}"
        if width is not None:
            assert len(line) <= width


def test_a_wide_row_folds_into_160_columns() -> None:
    out = io.StringIO()
    console = Console(file=out, width=160, highlight=False)
    table = ui.folding_table("cases", COLUMNS, left=2, names=len(CASE), trailing=1)
    table.add_row(*ROW)
    ui.print_table(console, table)
    text = out.getvalue()
    assert_not_cut(text, 160)
    joined = columns_text(text)
    assert joined[0] == "case" + CASE
    assert joined[-1].replace(" ", "") == "note" + LONG_NOTE.replace(" ", "")


def test_a_table_that_cannot_fold_enough_is_printed_wider_not_cut() -> None:
    out = io.StringIO()
    console = Console(file=out, width=160, highlight=False)
    # 60 columns of at least one character, padding and a border each: 240 > 160
    names = [f"f{i}" for i in range(60)]
    table = ui.folding_table("wide", ["case", *names])
    table.add_row(CASE, *(str(i) for i in range(60)))
    ui.print_table(console, table)
    text = out.getvalue()
    assert_not_cut(text)
    joined = columns_text(text)
    assert joined[1:] == [f"f{i}{i}" for i in range(60)]


def test_the_console_of_a_pipe_is_160_wide(capsys: pytest.CaptureFixture[str]) -> None:
    console = ui.console()
    assert not console.is_terminal and console.width == 160


def test_report_output_in_a_pipe_is_never_cut(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "failures"
    shutil.copytree(FIXTURE, folder)
    transfers = folder / "transfers.jsonl"
    # a reason as long as a verification error's, and a long case label
    text = transfers.read_text().replace("the secondary never served", LONG_NOTE)
    transfers.write_text(text)
    assert main(["report", str(folder)]) == 0
    out = capsys.readouterr().out
    assert_not_cut(out)
    assert LONG_NOTE in out  # the reason's line is printed whole (soft wrap)
