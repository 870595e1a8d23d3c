"""Terminal output shared by the commands."""

from __future__ import annotations

import sys

from rich.console import Console


def console(*, stderr: bool = False) -> Console:
    """A console that keeps tables readable when piped (CI logs, `make demo | tee`), where
    rich would otherwise wrap at 80 columns."""
    stream = sys.stderr if stderr else sys.stdout
    return Console(stderr=stderr, width=None if stream.isatty() else 160, highlight=False)
