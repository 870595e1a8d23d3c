"""The run's progress as a log that is not a terminal keeps it (`make demo | tee`): its
last frame shows the finished bars, not a phase line saying a repeat still runs."""

from __future__ import annotations

import io

from rich.console import Console

from harness.core.ui import case_progress


def _log(finished: bool) -> str:
    out = io.StringIO()
    console = Console(file=out, width=160, force_terminal=False)
    with case_progress(console, {"bind-bind/tcp/axfr": 2}) as progress:
        progress.status("bind-bind/tcp/axfr: repeat 2: transfer and verification")
        progress.advance("bind-bind/tcp/axfr")
        if finished:
            progress.advance("bind-bind/tcp/axfr")
    return out.getvalue()


def test_the_last_frame_has_the_bars_and_no_phase_line() -> None:
    log = _log(finished=True)
    assert "all cases" in log and "2/2" in log
    assert "repeat 2: transfer and verification" not in log


def test_a_run_that_stops_early_still_shows_its_bars() -> None:
    log = _log(finished=False)
    assert "1/2" in log
    assert "transfer and verification" not in log
