"""Reading a copy back: once more, and only once, when the first read met the server between
two versions (NSD's reload handover); a wrong copy is never accepted."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from harness.measure.copies import REREAD_AFTER_S, read_back
from harness.measure.protocol import Verification
from harness.xfr import PullResult
from harness.xfr.rrsum import ZoneSum
from tests.unit.test_flows import FakeBench, _plan, _run

REFERENCE = ZoneSum(123456789, 2001)  # the primary's serial 11
WRONG = ZoneSum(987654321, 2001)


def copy(serial: int, zone_sum: ZoneSum = REFERENCE) -> PullResult:
    return PullResult(True, "axfr", "tld.", serial=serial, records=2001, digest=zone_sum.text)


RESET = PullResult(False, "axfr", "tld.", error="[Errno 104] Connection reset by peer")


def read(*results: PullResult) -> tuple[list[float], Callable[[], PullResult]]:
    """The pauses taken, and a reader returning `results` in turn."""
    queue = list(results)
    return [], lambda: queue.pop(0)


def test_a_good_copy_is_read_once() -> None:
    pauses, reader = read(copy(11))
    check = read_back(reader, REFERENCE, 11, pauses.append)
    assert check.ok and check.reread is None and pauses == []


def test_the_previous_serial_or_a_reset_is_read_again_once() -> None:
    # The research's three cases: "serial differs: expected 11, the copy has 10" (twice)
    # and a reset, each right after NSD reloaded.
    for first in (copy(10), RESET):
        pauses, reader = read(first, copy(11))
        check = read_back(reader, REFERENCE, 11, pauses.append)
        assert check.ok and check.records == 2001 and pauses == [REREAD_AFTER_S]
        assert check.reread in (
            "serial differs: expected 11, the copy has 10",
            "could not read the secondary's copy: [Errno 104] Connection reset by peer",
        )


def test_a_wrong_copy_is_never_read_again_nor_accepted() -> None:
    pauses, reader = read(copy(11, WRONG), copy(11))
    check = read_back(reader, REFERENCE, 11, pauses.append)
    assert not check.ok and check.reread is None and pauses == []
    assert check.problem is not None and check.problem.startswith("RRSUM differs")
    # A newer serial is no handover either: wrong.
    pauses, reader = read(copy(12), copy(11))
    assert not read_back(reader, REFERENCE, 11, pauses.append).ok


def test_a_second_bad_read_fails_with_both_reasons_kept() -> None:
    pauses, reader = read(copy(10), copy(11, WRONG))
    check = read_back(reader, REFERENCE, 11, pauses.append)
    assert not check.ok and check.failure == "verification"
    assert check.problem is not None and check.problem.startswith("RRSUM differs")
    assert check.reread == "serial differs: expected 11, the copy has 10"
    pauses, reader = read(RESET, RESET)
    check = read_back(reader, REFERENCE, 11, pauses.append)
    assert not check.ok and check.failure == "harness" and len(pauses) == 1


def test_the_record_keeps_the_first_reads_problem(tmp_path: Path) -> None:
    bench = FakeBench(_plan(tmp_path, "repeats = 1\n"))
    first = "serial differs: expected 12, the copy has 11"
    bench.verify = lambda host, zone, serial: Verification(True, None, 42, reread=first)  # type: ignore[method-assign]
    (record,) = _run(bench)
    assert record.ok and record.extra["verify_reread"] == first


def test_the_reads_seconds_are_the_secondary_sending_its_copy() -> None:
    timed = copy(11)
    timed.duration_s = 1.5
    pauses, reader = read(timed)
    assert read_back(reader, REFERENCE, 11, pauses.append).read_s == 1.5
    # Read twice: the secondary sent two copies (the pause between them is not a read).
    early, again = copy(10), copy(11)
    early.duration_s, again.duration_s = 0.4, 1.5
    pauses, reader = read(early, again)
    assert read_back(reader, REFERENCE, 11, pauses.append).read_s == 1.9
