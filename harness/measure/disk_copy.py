"""Verifying a secondary's copy from the file it keeps, instead of reading it back.

Reading a 14 M-record copy back is a second full transfer out of the secondary. Every
dialect keeps its copy where the harness can read it (Server.disk_copy: BIND's and Knot's
zone files, NSD's, PowerDNS's database through pdnsutil); checking it takes three steps:

1. ``make_current``: the server's own command writes the copy it serves now (rndc sync,
   knotc zone-flush, nsd-control write, pdnsutil list-zone), and where it writes after
   answering, the harness waits until the file holds the serial. The server's work after
   the transfer: wall phase "flush".
2. ``check_on_disk``: the file summed with the compiled zone-file sum (a master file is
   rewritten one record per line first) equals the primary's sum at the serial: the copy
   holds exactly the primary's records.
3. ...and the server serves that copy: its SOA serial and a sample of names
   (harness.xfr.name_sample), each answered exactly as the file holds it. A server between
   two versions (NSD hands a reload over between processes) is asked once more after a
   pause, as a read-back is (measure/copies.py).

A copy whose sum or served sample differs fails verification with what differs; one the
harness cannot read or ask is its own failure (Verification.records None).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import subprocess
import time
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dns.rdatatype

from harness.core.errors import ToolFailed, UserInputError
from harness.core.seeds import derive_seed
from harness.measure.copies import REREAD_AFTER_S
from harness.measure.processes import RunningServer
from harness.measure.protocol import Verification
from harness.measure.wall import WallClock
from harness.plan.case import CasePlan
from harness.xfr.name_sample import Key, Sample, SampleError, differences, draw
from harness.xfr.rrsum import ZoneSum
from harness.xfr.serial import serial_lt
from harness.xfr.zone_copy import CopyError, DiskCopy, head_serial, write_lines
from harness.xfr.zonefile_sum import zone_file_sum
from harness.zonegen import read_diff
from harness.zonegen.model import ChangeSet

FLUSH_AGAIN_S = 2.0  # a server whose file lacks the serial by then is asked again
POLL_S = 0.05  # between looks at the file's head
DISK = "disk+sample"

Run = Callable[..., Any]  # the secondary's Place.run(argv, output=...)


@dataclass(frozen=True)
class Flushed:
    """The copy as a file after the server wrote it: the serial its head holds (None: not
    found there) and whether it is the serial asked for."""

    serial: int | None
    current: bool


def make_current(
    copy: DiskCopy,
    zone: str,
    serial: int,
    run: Run,
    timeout: float,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Flushed:
    """Have the server write its copy of `zone` (its flush command), then, for a server
    that writes after answering, wait up to `timeout` until the file holds `serial`,
    asking again every FLUSH_AGAIN_S (BIND ignores a sync while it is still writing an
    older version). Raises ToolFailed when the command fails."""
    deadline = clock() + timeout
    while True:
        asked = clock()
        _flush(copy, run)
        if copy.waits:
            held = head_serial(copy.path, copy.format, zone)
            return Flushed(held, held is None or held == serial)
        while True:
            held = head_serial(copy.path, copy.format, zone)
            if held == serial:
                return Flushed(held, True)
            if clock() >= deadline:
                return Flushed(held, False)
            if clock() - asked >= FLUSH_AGAIN_S:
                break
            sleep(POLL_S)


def _flush(copy: DiskCopy, run: Run) -> None:
    if not copy.prints:
        run(list(copy.flush))
        return
    copy.path.parent.mkdir(parents=True, exist_ok=True)
    partial = copy.path.with_name(copy.path.name + ".partial")
    run(list(copy.flush), output=partial)
    os.replace(partial, copy.path)


def check_on_disk(
    copy: DiskCopy,
    zone: str,
    reference: ZoneSum,
    serial: int,
    changed: Iterable[Key],
    *,
    seed: int,
    ask: Callable[[list[Key]], dict[Key, Any]],
    scratch: Path,
    pause: Callable[[float], None] = time.sleep,
) -> Verification:
    """The copy in `copy.path` against the primary's sum `reference` at `serial`, then
    what the server serves at a sample of names against the file (`ask`: the server's
    answer for each (name, type), as name_sample.served gives it). `changed`: the (name,
    type) the last change touched. A master file is rewritten into `scratch` (removed)."""
    lines = copy.path
    try:
        if copy.format == "master":
            scratch.mkdir(parents=True, exist_ok=True)
            lines = scratch / f"{zone}lines"
            write_lines(copy.path, lines, zone)
        return _check(lines, zone, reference, serial, list(changed), seed, ask, pause)
    except (OSError, CopyError, UserInputError, SampleError) as exc:
        text = f"could not read the copy on disk {copy.path}: {exc}"
        return Verification(False, text, None, by=DISK)
    finally:
        if lines != copy.path:
            lines.unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                scratch.rmdir()


def _check(
    lines: Path,
    zone: str,
    reference: ZoneSum,
    serial: int,
    changed: list[Key],
    seed: int,
    ask: Callable[[list[Key]], dict[Key, Any]],
    pause: Callable[[float], None],
) -> Verification:
    got = zone_file_sum(lines, zone, cache=False)
    records = got.records + 1  # as an AXFR carries them (the SOA twice), as a read-back says
    if got != reference:
        held = head_serial(lines, "lines", zone)
        at = f" (its SOA serial {held})" if held is not None and held != serial else ""
        return Verification(
            False,
            f"the copy on disk differs{at}: RRSUM expected {reference.records} records "
            f"(sum {reference.hex[:16]}…), the file has {got.records} (sum {got.hex[:16]}…)",
            records,
            by=DISK,
        )
    sample = draw(lines, zone, changed, seed)
    problem, why = _look(sample, ask, serial)
    reread = None
    if why is not None:  # an older serial, or no answer: the server was between versions
        pause(REREAD_AFTER_S)
        reread = problem
        problem, why = _look(sample, ask, serial)
    found = None if why == "unasked" else records  # None: the harness could not ask
    return Verification(problem is None, problem, found, reread, by=DISK, sample=len(sample.names))


def _look(
    sample: Sample, ask: Callable[[list[Key]], dict[Key, Any]], serial: int
) -> tuple[str | None, str | None]:
    """(what the server serves otherwise than the file holds, or None; why to look again:
    "older", it served an older serial, "unasked", it could not be asked; else None)."""
    try:
        answers = ask(sample.keys)
    except SampleError as exc:
        return f"could not check what the secondary serves: {exc}", "unasked"
    soa = answers.get((sample.names[0], dns.rdatatype.SOA))
    served_serial = next(iter(soa[1])).serial if soa else None
    if served_serial != serial:
        older = served_serial is not None and serial_lt(served_serial, serial)
        text = f"the secondary serves serial {served_serial}, its copy on disk {serial}"
        return text, "older" if older else None
    wrong = differences(sample, answers)
    if not wrong:
        return None, None
    more = f" (and {len(wrong) - 3} more)" if len(wrong) > 3 else ""
    text = (
        f"served otherwise than its copy on disk at {len(wrong)} of {len(sample.keys)} "
        "sampled names and types: " + "; ".join(wrong[:3]) + more
    )
    return text, None


def disk_verification(
    copy: DiskCopy,
    zone: str,
    reference: ZoneSum,
    serial: int,
    changed: Iterable[Key],
    *,
    run: Run,
    served: Callable[[list[Key]], dict[Key, Any]],
    timeout: float,
    seed: int,
    scratch: Path,
    flushing: Callable[[], AbstractContextManager[Any]],
) -> Verification:
    """make_current then check_on_disk, the server asked through `served`.
    `flushing()`: the context that times the server's part (the wall's "flush")."""
    started = time.monotonic()
    try:
        with flushing():
            flushed = make_current(copy, zone, serial, run, timeout)
    except (ToolFailed, subprocess.TimeoutExpired) as exc:
        return Verification(False, f"the secondary did not write its copy: {exc}", None, by=DISK)
    flush_s = time.monotonic() - started
    if not flushed.current:
        waited = "" if copy.waits else f" and {timeout:g} s"
        text = (
            f"the copy on disk {copy.path} holds serial {flushed.serial}, not {serial}, "
            f"after `{' '.join(copy.flush)}`{waited}"
        )
        return Verification(False, text, None, by=DISK, flush_s=flush_s)

    try:
        check = check_on_disk(
            copy, zone, reference, serial, changed, seed=seed, ask=served, scratch=scratch
        )
    finally:
        if copy.prints:
            copy.path.unlink(missing_ok=True)  # the harness's own file, as large as the zone
    return dataclasses.replace(check, flush_s=flush_s)


def from_disk(
    running: RunningServer,
    copy: DiskCopy,
    zone: str,
    serial: int,
    reference: ZoneSum,
    change: ChangeSet | None,
    plan: CasePlan,
    spent: WallClock,
) -> Verification:
    """`disk_verification` of the secondary `running`, asked on 127.0.0.1 in its own
    namespace as a read-back is; `change`: the zone's last change set (None: only its SOA
    changed). The sample's seed is derived from the zone's, the host and the serial."""
    changed: set[Key] = set()
    if change is not None:
        deleted, added = read_diff(change.diff_path, zone)
        changed = {(name, int(rdata.rdtype)) for name, _, rdata in (*deleted, *added)}
    place, timeout = running.place, plan.timeout
    return disk_verification(
        copy,
        zone,
        reference,
        serial,
        changed,
        run=lambda argv, **kw: place.run(argv, timeout=timeout, **kw),
        served=lambda keys: place.served_names(keys, timeout),
        timeout=timeout,
        seed=derive_seed(plan.zone_spec.seed, "verify-sample", running.name, str(serial)),
        scratch=running.server.setup.workdir / "verify",
        flushing=lambda: spent.phase("flush"),
    )
