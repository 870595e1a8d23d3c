"""A fault's account of a secondary on a host whose clock runs ahead of the engine's: its
log stamps that clock, so the failures are read from the engine's start put on it, and
their marks come back on the engine's clock, where the fault's window is."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.measure.live_faults import read_failures
from harness.servers import classify
from harness.servers.bind import Bind

LOG = (Path(__file__).parents[1] / "fixtures" / "failures" / "bind-reset.log").read_text()
AHEAD = 30.0  # the host's clock, seconds ahead of the engine's


def _first_failure() -> float:
    """The host-clock stamp of the log's first failure line."""
    for line in LOG.splitlines():
        if classify("bind", line) not in (None, "follow-up"):
            stamp = Bind.failures.timestamp(line, None)
            assert stamp is not None
            return stamp
    raise AssertionError("the fixture has no failure line")


def test_failures_are_read_on_the_hosts_clock_and_marked_on_the_engines() -> None:
    failed_at = _first_failure()  # host clock
    since = failed_at - AHEAD - 1.0  # the engine began its fault 1 s before, by its clock
    _, counts, failing, marks = read_failures(Bind, LOG, since, AHEAD)
    assert counts.failing_lines >= 1 and failing
    assert marks[0][0] == pytest.approx(failed_at - AHEAD)  # 1 s after `since`
    assert marks[0][0] - since == pytest.approx(1.0)


def test_a_host_behind_the_engine_read_without_its_lag_misses_the_failure() -> None:
    """A host 30 s behind: the engine began 1 s before the failure by its own clock, which
    is 29 s after the failure's stamp. Read with the host's lag the failure is the fault's;
    read on the engine's clock it is missed, as before the log was put on its host's clock."""
    failed_at = _first_failure()
    since = failed_at + AHEAD - 1.0
    _, counts, _, marks = read_failures(Bind, LOG, since, -AHEAD)
    assert counts.failing_lines >= 1 and marks[0][0] - since == pytest.approx(1.0)
    _, unshifted, _, _ = read_failures(Bind, LOG, since)
    assert unshifted.failing_lines == 0
