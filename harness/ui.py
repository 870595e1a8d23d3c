"""Terminal output shared by the commands."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)


def console(*, stderr: bool = False) -> Console:
    """A console that keeps tables readable when piped (CI logs, `make demo | tee`), where
    rich would otherwise wrap at 80 columns."""
    stream = sys.stderr if stderr else sys.stdout
    return Console(stderr=stderr, width=None if stream.isatty() else 160, highlight=False)


class CaseProgress:
    """A progress bar per case: transfers done out of those the case will write."""

    def __init__(self, bar: Progress) -> None:
        self._bar = bar
        self._task: TaskID | None = None

    def case(self, name: str, total: int) -> Callable[[], None]:
        """Start a case's bar; returns the function that counts one transfer."""
        task = self._bar.add_task(name, total=total)
        self._task = task
        return lambda: self._bar.advance(task)

    def done(self, total: int) -> None:
        """The case ended: its bar is full even where a failure cut it short."""
        if self._task is not None:
            self._bar.update(self._task, completed=total)


@contextlib.contextmanager
def case_progress(out: Console) -> Iterator[CaseProgress]:
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=out, transient=False) as bar:
        yield CaseProgress(bar)
