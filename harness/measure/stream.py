"""A change stream: new serials put on the primary on schedule, whether or not the fleet
keeps up, while every server's serial is followed; what each secondary served and when.

What a stream measures (docs/architecture.md, "Measuring a transfer"):

- publication latency of serial s at a secondary: from the moment the primary first served
  s to the secondary's first answer with s or a later serial (a secondary that condenses
  several serials into one transfer still serves s when it serves a later one). The
  primary is followed like the secondaries: its first answer with s is the origin. When a
  secondary is seen serving s before the primary was (both are polled in one loop, so this
  is the order of one poll round, never more), the primary served s by then: the origin is
  that earlier instant, and no latency is negative.
- its error (`duration_error_s`): the secondary started serving s after its previous
  answer (with an older serial) and after s was put on the primary; the latency's end may
  lie that far before its first answer with s. The primary's own poll gap is beside it in
  `extra.stream.primary_error_s`.
- a publish is due at its slot of the schedule (harness/plan/stream.py); a publish that
  starts after its slot (the previous one took longer than the gap: NSD reloads whole
  files) is recorded as late by how much (`phases.publish_late`).
- the invariant: no secondary serves a serial the primary was never given (NLnetLabs nsd
  #411: a secondary ahead of its primary after a broken transfer), nor goes back to an older
  serial after it served a newer one. Every answer that changes a secondary's serial is
  checked against the serials published by then and the newest it served (RFC 1982); the
  follower keeps asking the secondaries that caught up (less often), so a jump after that
  is seen too.
- at the end every secondary is verified at the final serial (RRSUM against what the
  primary serves) and the primary is held to what was published (check_primary); each
  secondary's transfers during the stream come from the servers' logs (their kind, the
  serials they carried, and for an AXFR that replaced an IXFR the reason in the server's
  own words).

The flow is pure against `StreamBench`; harness/measure/stream_records.py turns what it
saw into one record per secondary and serial.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any, Protocol

from harness.measure.bench import Bench, PublishFailed
from harness.measure.records import RecordContext
from harness.measure.steps import Seconds, settle
from harness.measure.stream_records import (
    PRIMARY,
    Published,
    Put,
    StreamLogs,
    StreamSeen,
    StreamTransfer,
    stream_records,
)
from harness.plan.case import CasePlan
from harness.results.model import TransferRecord
from harness.xfr import XfrTimeout
from harness.xfr.follow import SerialChange
from harness.xfr.serial import serial_ge

Emit = Callable[[TransferRecord], None]
__all__ = ["PRIMARY", "Follow", "Put", "StreamBench", "StreamTransfer", "stream_repeat"]


class Follow(Protocol):
    def expect(self, serial: int) -> None:
        """`serial` is the newest published: follow every server not serving it."""

    def take(self, timeout: float) -> list[SerialChange]:
        """The serial changes seen since the last call, waiting up to `timeout` seconds."""

    def queries(self) -> dict[str, int]:
        """SOA queries sent to each server so far (what following it cost)."""


class StreamBench(Bench, Protocol):
    """What a stream needs beyond the other flows."""

    def prepare_stream(self, serials: list[int]) -> None:
        """Have every change set of the stream ready before its first slot (the harness's
        work, not the primary's: a publish must not wait for a generator)."""

    def put_serial(self, serial: int) -> Put:
        """Put `serial` of the first zone on the primary and return once it took it, not
        once it serves it (raises PublishFailed or XfrTimeout)."""

    def follow(self, hosts: list[str]) -> contextlib.AbstractContextManager[Follow]:
        """Follow the serial of the primary (as PRIMARY) and of `hosts`. Its take() raises
        CaseFailed when a server exits."""

    def stream_transfers(self, host: str, since: float) -> list[StreamTransfer]:
        """The incoming transfers of `host` logged since `since` (unix time), in order."""

    def stream_lag(self, case: str, lag: dict[str, tuple[int, float]]) -> None:
        """Each secondary's lag now, in serials and seconds (the live view)."""


def _absorb_until(
    bench: StreamBench, follow: Follow, seen: StreamSeen, case: str, hosts: list[str], end: float
) -> None:
    """Take what the follower sees until `end` (bench clock); the live lag follows it."""
    while True:
        remaining = end - bench.clock()
        changes = follow.take(max(0.0, remaining))
        seen.absorb(changes)
        if changes:
            bench.stream_lag(case, seen.lag(hosts, bench.clock()))
        if remaining <= 0 or bench.clock() >= end:
            return


def _caught_up(seen: StreamSeen, hosts: list[str]) -> bool:
    if not seen.published:
        return True
    final = seen.published[-1].serial
    return all(serial_ge(seen.serving(h), final) for h in [PRIMARY, *hosts])


def run_stream(bench: StreamBench, plan: CasePlan, first: int, offsets: list[float]) -> StreamSeen:
    """Publish serials first, first + 1, ... at `offsets` from now and follow every server
    until each serves the last one published, or `plan.timeout` after that publish."""
    hosts = [h.name for h in plan.secondaries]
    start = bench.clock()
    seen = StreamSeen(
        start=start,
        start_wall=bench.wall(),
        base=first - 1,
        scheduled=[(first + k, start + offset) for k, offset in enumerate(offsets)],
    )
    with bench.follow(hosts) as follow:
        for serial, due in seen.scheduled:
            _absorb_until(bench, follow, seen, plan.name, hosts, due)
            try:
                put = bench.put_serial(serial)
            except (PublishFailed, XfrTimeout) as exc:
                seen.publish_error = f"publish error at serial {serial}: {exc}"
                break
            seen.published.append(Published(serial, due, put.issued, put.returned, put.method))
            follow.expect(serial)
            bench.stream_lag(plan.name, seen.lag(hosts, bench.clock()))
        deadline = bench.clock() + plan.timeout
        while not _caught_up(seen, hosts) and bench.clock() < deadline:
            _absorb_until(bench, follow, seen, plan.name, hosts, min(deadline, bench.clock() + 1))
        seen.waited_until = bench.clock()
        seen.queries = follow.queries()
    bench.stream_lag(plan.name, seen.lag(hosts, bench.clock()))
    return seen


def _over_the_stream(facts: dict[str, Any]) -> dict[str, Any]:
    """What the link check reads of a stream's observation: the link's counters and the
    watched connection's TCP; the per-transfer facts (the SOA query and connect after a
    NOTIFY, the sockets one transfer left) mean nothing over many transfers."""
    return {k: v for k, v in facts.items() if k in ("link", "tcp")}


def stream_repeat(
    bench: StreamBench,
    ctx: RecordContext,
    repeat: int,
    first: int,
    emit: Emit,
    extra: dict[str, Any],
) -> int:
    """One repeat of a stream case: its schedule's serials from `first` on, every
    secondary followed, verified at the final serial, one record per secondary and serial.
    Returns the last serial published (the next repeat starts after it). Raises
    PublishFailed (its records written) when the primary could not take a serial or
    serves something other than what was published."""
    plan = ctx.plan
    assert plan.stream is not None, "a stream case has a stream plan"
    offsets = plan.stream.offsets(plan.name, repeat)
    spent = bench.spent
    seconds = Seconds()
    settle(bench, seconds)
    with spent.phase("generate") as generate:
        bench.prepare_stream([first + k for k in range(len(offsets))])
    bench.mark("transfer-start", repeat)
    # The wire over the whole stream: each link's counters per direction and the TCP of
    # each site's watched secondary, so that the link check sets the loss and the RTT the
    # stream met against what was set (in each secondary's final record).
    bench.begin_observation()
    try:
        with spent.phase("transfer") as transfer:
            seen = run_stream(bench, plan, first, offsets)
    finally:
        bench.finish_observation()
    bench.mark("transfer-end", repeat)
    last = seen.published[-1].serial if seen.published else first - 1
    wrong = None
    with spent.phase("verify") as checked:
        if seen.published:
            wrong = bench.check_primary(last)
    if wrong is not None:
        seen.publish_error = f"publish error at serial {last}: {wrong}"
        seen.primary_wrong = True
    checks = {}
    with spent.phase("verify") as verify:
        for host in plan.secondaries:
            if seen.published and serial_ge(seen.serving(host.name), last):
                checks[host.name] = bench.verify(host.name, bench.first_zone, last)
    with spent.phase("observe") as observe:
        since = seen.start_wall - 1.0
        transfers = {h.name: bench.stream_transfers(h.name, since) for h in plan.secondaries}
        # Failed attempts during the stream, in each secondary's own words (none is a
        # figure: a transfer that failed is retried or the secondary falls behind).
        failures = {
            h.name: bench.logged(h.name, bench.first_zone, last, since).failures
            for h in plan.secondaries
        }
        wire = {
            h.name: _over_the_stream(bench.observation(h.name, seen.start, seen.waited_until))
            for h in plan.secondaries
        }
        span = round(seen.waited_until - seen.start, 6)
    wall = {
        "settle_s": seconds.settle,
        "generate_s": generate.seconds,
        "transfer_s": transfer.seconds,
        "verify_s": checked.seconds + verify.seconds,
        "observe_s": observe.seconds,
    }
    extra = extra | {"wall": {k: round(v, 4) for k, v in wall.items()}}
    logs = StreamLogs(transfers, failures, {h: w | {"link_span_s": span} for h, w in wire.items()})
    for record in stream_records(ctx, repeat, bench.first_zone, seen, checks, logs, extra):
        emit(record)
    if seen.publish_error is not None:
        raise PublishFailed(seen.publish_error, recorded=True)
    return last
