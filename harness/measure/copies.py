"""Reading a secondary's copy back to verify it, once more when the first read met the
server between two versions; a wrong copy is never accepted.

NSD swaps its serving processes when it loads a new version: for a moment one process
answers the harness's SOA poll with the new serial while another serves a TCP read of the
old version, or resets it (research-switch/REPORT.md: 3 of 106 NSD transfers, each right
after a reload). Such a read says nothing about the copy, so it is read again once, after
a pause; the second read is judged in full and the first one's problem is kept.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from harness.measure.protocol import Verification
from harness.xfr import PullResult
from harness.xfr.rrsum import ZoneSum
from harness.xfr.serial import serial_lt
from harness.xfr.verify import check_copy

REREAD_AFTER_S = 1.0  # NSD's handover took milliseconds in every case seen; ample


def judged(reference: ZoneSum, copy: PullResult, serial: int) -> Verification:
    if not copy.ok:
        return Verification(False, f"could not read the secondary's copy: {copy.error}", None)
    problem = check_copy(reference, copy, serial)
    return Verification(problem is None, problem, copy.records, read_s=copy.duration_s)


def between_versions(copy: PullResult, serial: int) -> bool:
    """A read that met a server between versions: it failed, or found an older serial
    (the server serves `serial` already: the poll saw it)."""
    return not copy.ok or (copy.serial is not None and serial_lt(copy.serial, serial))


def read_back(
    read: Callable[[], PullResult],
    reference: ZoneSum,
    serial: int,
    pause: Callable[[float], None],
) -> Verification:
    """The copy `read()` returns, judged against `reference` at `serial`; read a second
    time (after `pause(REREAD_AFTER_S)`) only when the first read was between versions."""
    first = read()
    if not between_versions(first, serial):
        return judged(reference, first, serial)
    pause(REREAD_AFTER_S)
    second = judged(reference, read(), serial)
    # Both copies were a transfer out of the secondary that the harness waited for.
    read_s = None if second.read_s is None else second.read_s + (first.duration_s or 0.0)
    return dataclasses.replace(
        second, reread=judged(reference, first, serial).problem, read_s=read_s
    )
