"""Terminal output shared by the commands: the console, tables that fold, progress."""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Iterator

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

NAME_WIDTH = 60  # a case label longer than this folds rather than squeezing every column


def console(*, stderr: bool = False) -> Console:
    """A console that keeps tables readable when piped (CI logs, `make demo | tee`), where
    rich would otherwise wrap at 80 columns."""
    stream = sys.stderr if stderr else sys.stdout
    return Console(stderr=stderr, width=None if stream.isatty() else 160, highlight=False)


class CaseProgress:
    """A bar per case (transfers recorded out of those planned), a bar for the whole run
    with its ETA (from the pace measured so far), and a line saying what runs now (the
    phase: generating zones, the primary loading, the warm-up, repeat k: transfer and
    verification) with how long it has taken."""

    def __init__(self, bar: Progress, totals: dict[str, int]) -> None:
        self._bar = bar
        self._now = bar.add_task("starting", total=None, start=True, kind="status")
        self._run = bar.add_task("all cases", total=sum(totals.values()), kind="total")
        self._cases = {name: bar.add_task(name, total=total) for name, total in totals.items()}
        self._since = time.monotonic()
        self._text = "starting"

    def advance(self, case: str) -> None:
        """One transfer of `case` recorded (its bar and the run's move on)."""
        if case in self._cases:
            self._bar.advance(self._cases[case])
        self._bar.advance(self._run)

    def status(self, text: str) -> None:
        self._text, self._since = text, time.monotonic()
        self._bar.update(self._now, description=text)

    def tick(self) -> None:
        """Refresh the phase line's elapsed time (the bar redraws on its own)."""
        if self._now in self._bar.task_ids:
            elapsed = time.monotonic() - self._since
            self._bar.update(self._now, description=f"{self._text} ({elapsed:.0f} s)")

    def finish(self) -> None:
        """The phase line removed: once the run has ended it would say, in the last frame
        (all a log that is not a terminal keeps), that a repeat is still running."""
        if self._now in self._bar.task_ids:
            self._bar.remove_task(self._now)


@contextlib.contextmanager
def case_progress(out: Console, totals: dict[str, int]) -> Iterator[CaseProgress]:
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=out, transient=False, refresh_per_second=2) as bar:
        progress = CaseProgress(bar, totals)
        stop = threading.Event()

        def ticking() -> None:
            while not stop.wait(1.0):
                progress.tick()

        ticker = threading.Thread(target=ticking, name="xfrbench-progress", daemon=True)
        ticker.start()
        try:
            yield progress
        finally:
            stop.set()
            ticker.join()
            progress.finish()


def folding_table(
    title: str, columns: list[str], *, left: int = 1, names: int = 0, trailing: int = 0
) -> Table:
    """A table whose text columns fold instead of cutting ("bind-bind/preset=tld,re…"
    and "bind-bind/preset=tld,re…" would look alike): the first `left` columns and the last
    `trailing` are text, and the first is kept `names` wide (the longest case label) while
    others wrap."""
    # The title goes above as its own line (print_table): a table's title wraps to the
    # table's width, which for a narrow table is a column of words.
    table = Table()
    table.caption = title
    for index, column in enumerate(columns):
        text = index < left or index >= len(columns) - trailing
        justify = "left" if text else "right"
        width = min(names, NAME_WIDTH) if index == 0 and names else None
        table.add_column(column, justify=justify, overflow="fold", min_width=width)
    return table


def _widest_line(console: Console, table: Table) -> int:
    """The longest line of the table as rich lays it out, before the console crops it."""
    lines = Segment.split_lines(console.render(table, console.options))
    return max((Segment.get_line_length(line) for line in lines), default=0)


SHORT_WORD = 8  # a number with its unit ("77.1 ms"): folded, it reads as two numbers


def _least_width(table: Table) -> int:
    """The narrowest a table can be with every column as wide as its longest word (up to
    SHORT_WORD), its padding and its borders: narrower, rich empties columns."""
    total = len(table.columns) + 1
    for column in table.columns:
        texts = [column.header, *column.cells]
        words = [
            len(w) for t in texts if isinstance(t, str) for w in Text.from_markup(t).plain.split()
        ]
        total += min(max(words, default=1), SHORT_WORD) + 2
    return total


def print_table(console: Console, table: Table) -> None:
    """The title on its own line, then the table, never cut: rich crops a line its columns
    cannot fold narrow enough (a wide case label kept whole), and empties columns when
    there are too many, which in a CI log or `| cat` loses the end of every row. Such a
    table first lets its case column fold; if it still does not fit, it is printed as wide
    as it needs to be."""
    title, table.caption = table.caption, None
    console.print(f"[bold]{escape(str(title))}[/]", soft_wrap=True)
    width = console.width
    least = _least_width(table)
    if least <= width and _widest_line(console, table) > width and table.columns:
        table.columns[0].min_width = None
        least = max(least, _widest_line(console, table))
    if least <= width:
        console.print(table)
        return
    console.width = least  # print(width=) cannot widen beyond the console's own
    try:
        console.print(table, crop=False)
    finally:
        console.width = width
