"""The steps every measured repeat is made of (pure, against `Bench`): settle, open the
observation, publish and trigger, close the observation, check the primary, read each copy
back, record. An update (protocol.update_repeat) is these steps in a row; a faulted repeat
(faults.fault_repeat) is the same steps with its fault's between the trigger and the end
of the observation; a stream, a cold start and a client pull use the ones they share.

A step that finds the repeat cannot go on (the primary refused the serial, or serves
something else) writes every secondary's record before it raises `PublishFailed(recorded=
True)`: the caller records nothing more.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.measure.bench import Bench, Control, Emit, PublishFailed, Verification
from harness.measure.logged import Logged
from harness.measure.records import Observed, RecordContext, failure, transfer_record
from harness.results.model import Failure, TransferRecord
from harness.xfr import XfrTimeout
from harness.xfr.served_times import served_error

# The sniffer may see a NOTIFY a moment after the secondary it went to is served; a host
# that was never served is given this long for its NOTIFY to show.
NOTIFY_GRACE_S = 1.0


@dataclass(frozen=True)
class Repeat:
    """What every record of one measured repeat shares: where it goes and what it says
    besides its own figures (`extra`: the repeat's place in the schedule)."""

    bench: Bench
    ctx: RecordContext
    repeat: int
    serial: int
    started_at: float  # unix time the repeat began (its failed records' started_at)
    extra: dict[str, Any]
    emit: Emit

    @property
    def zone(self) -> str:
        return self.bench.first_zone

    @property
    def hosts(self) -> list[str]:
        return [host.name for host in self.ctx.plan.secondaries]

    def record(self, host: str, observed: Observed) -> None:
        self.emit(
            transfer_record(
                self.ctx, host=host, repeat=self.repeat, zone=self.zone, observed=observed
            )
        )

    def failed(
        self,
        host: str,
        error: str,
        kind: Failure = "timeout",
        *,
        extra: dict[str, Any] | None = None,
        phases: dict[str, float] | None = None,
        server_logged: dict[str, Any] | None = None,
    ) -> TransferRecord:
        """The record of `host`'s attempt that produced no figure (`extra` in place of
        the repeat's)."""
        observed = failure(self.serial, error, self.started_at, kind=kind)
        observed.extra = dict(self.extra if extra is None else extra)
        observed.phases = dict(phases or {})
        observed.server_logged = dict(server_logged or {})
        return transfer_record(
            self.ctx, host=host, repeat=self.repeat, zone=self.zone, observed=observed
        )

    def all_failed(self, error: str, kind: Failure) -> None:
        for host in self.hosts:
            self.emit(self.failed(host, error, kind))


@dataclass(frozen=True)
class Triggered:
    t0: dict[str, float]  # per host: what its duration is counted from
    phases: dict[str, dict[str, float]]  # per host
    method: str  # how the serial was published
    issued: float = 0.0  # when the new serial was asked for
    change: dict[str, Any] | None = None  # Publication.change


@dataclass
class Seconds:
    """The wall seconds of one repeat's steps (its records' extra["wall"])."""

    settle: float = 0.0
    publish: float = 0.0
    observe: float = 0.0  # opening and closing the observation
    verify: float = 0.0  # the primary check


def settle(bench: Bench, seconds: Seconds | None = None) -> dict[str, Any] | None:
    """Wait until the last transfer left nothing that could bias the next; the wait is
    split by cause (measure/wall.py): the servers' own pacing is theirs, a limiter the
    harness's reconfiguration set going is the switch's. Returns what was waited for."""
    spent = bench.spent
    with spent.phase("settle") as span:
        settled = bench.between_repeats()
    held = (settled or {}).get("held_by", {})
    spent.shift("settle", "pacing", held.get("pacing", 0.0))
    spent.shift("settle", "switch", held.get("reconfig", 0.0))
    if seconds is not None:
        seconds.settle = span.seconds
    return settled


def begin(
    bench: Bench,
    ctx: RecordContext,
    repeat: int,
    serial: int,
    emit: Emit,
    extra: dict[str, Any],
    seconds: Seconds | None = None,
) -> Repeat:
    """The repeat begins: every server sampled at its start mark, the wire watched."""
    started_at = bench.wall()
    with bench.spent.phase("observe") as span:
        bench.mark("transfer-start", repeat)
        bench.begin_observation()
    if seconds is not None:
        seconds.observe += span.seconds
    return Repeat(bench, ctx, repeat, serial, started_at, extra, emit)


def end_observation(
    at: Repeat, triggered: Triggered | None = None, seconds: Seconds | None = None
) -> Triggered | None:
    """Every transfer of the repeat ended (or failed): the NOTIFYs read from the wire (a
    notify case's t0), the watch stopped, every server sampled at its end mark (before
    verification, which costs CPU of its own)."""
    bench = at.bench
    with bench.spent.phase("observe") as span:
        if triggered is not None and bench.plan.trigger == "notify":
            triggered = notified(bench, triggered, at.serial)
        bench.finish_observation()
        bench.mark("transfer-end", at.repeat)
    if seconds is not None:
        seconds.observe += span.seconds
    return triggered


def publish(
    at: Repeat, hosts: list[str] | None = None, seconds: Seconds | None = None
) -> Triggered:
    """Publish the repeat's serial and trigger it (`trigger`); when the primary refuses it,
    every secondary's record says so and the repeat ends (PublishFailed, recorded)."""
    try:
        with at.bench.spent.phase("publish") as span:
            triggered = trigger(at.bench, at.serial, at.zone, hosts)
    except PublishFailed as exc:
        end_observation(at)
        at.all_failed(str(exc), "publish")
        raise PublishFailed(str(exc), recorded=True) from None
    if seconds is not None:
        seconds.publish = span.seconds
    return triggered


def check_published(at: Repeat, seconds: Seconds | None = None) -> None:
    """The primary serves what the harness published (asked after the transfers, so that
    it delays no secondary's polling); else every record says so and the repeat ends."""
    with at.bench.spent.phase("verify") as span:
        wrong = at.bench.check_primary(at.serial)
    if seconds is not None:
        seconds.verify = span.seconds
    if wrong is not None:
        text = f"publish error at serial {at.serial}: {wrong}"
        at.all_failed(text, "publish")
        raise PublishFailed(text, recorded=True)


@dataclass(frozen=True)
class Copy:
    """One secondary's copy read back and what its transfer left: the verification, the
    wire and TCP facts (Bench.observation), the servers' logs, and their seconds."""

    check: Verification
    facts: dict[str, Any]
    logged: Logged
    verify_s: float
    observe_s: float


def read_copy(at: Repeat, host: str, t0: float, served: float) -> Copy:
    """Verify `host`'s copy, then what its transfer did on the wire (after the read-back,
    so that its connection is seen and counted as the harness's, apart from the servers':
    extra["sockets"]), then what the servers logged of it since the repeat began."""
    bench = at.bench
    with bench.spent.phase("verify") as verify:
        check = bench.verify(host, at.zone, at.serial)
    with bench.spent.phase("observe") as observe:
        facts = bench.observation(host, t0, served)
    with bench.spent.phase("observe") as observe_logs:
        logged = bench.logged(host, at.zone, at.serial, at.started_at)
    return Copy(check, facts, logged, verify.seconds, observe.seconds + observe_logs.seconds)


def served_copy(
    at: Repeat,
    host: str,
    copy: Copy,
    t0: float,
    served: float,
    **figures: Any,
) -> Observed:
    """What a served, read-back copy measured from `t0` to `served`: its sizes from the
    servers' logs (the copy's record count for an AXFR no log counted), its error bar, its
    verification; `figures` (ok, error, failure, duration_s, phases, server_logged, extra,
    bound) say the rest, `extra` after the copy's own facts (verification, wire)."""
    plan = at.ctx.plan
    size, messages, records = copy.logged.sizes(copy.check.records, plan.xfr == "axfr")
    late = served_error(served, at.bench.last_unserved(host), t0)
    extra = figures.pop("extra", {})
    return Observed(
        serial=at.serial,
        started_at=at.started_at,
        verified=copy.check.ok,
        records=records,
        bytes=size,
        messages=messages,
        duration_error_s=round(late, 6),
        extra=extra | copy.check.facts() | copy.facts | at.extra,
        **figures,
    )


def trigger(bench: Bench, serial: int, zone: str, hosts: list[str] | None = None) -> Triggered:
    """Publish `serial` and trigger the transfers to `hosts` (the measured ones; default
    every secondary). The primary notifies every secondary: each NOTIFY is kept, the first
    is the fleet's origin (results/fleet.py), a missing secondary's too."""
    plan = bench.plan
    everyone = [host.name for host in plan.secondaries]
    hosts = everyone if hosts is None else hosts
    try:
        published = bench.publish(serial)
    except XfrTimeout as exc:
        raise PublishFailed(str(exc)) from None
    reload = {"primary_reload": published.served - published.issued}
    if plan.trigger == "notify":  # t0 comes from the wire once the secondaries are served
        return Triggered(
            {},
            dict.fromkeys(everyone, reload),
            published.method,
            published.issued,
            published.change,
        )
    action: Control = "retransfer" if plan.xfr == "axfr" else "refresh"
    start = bench.clock()
    phases = {}
    for host in hosts:
        bench.control(host, action, zone)
        phases[host] = reload | {"control_returned": bench.clock() - start}
    return Triggered(
        dict.fromkeys(hosts, start), phases, published.method, published.issued, published.change
    )


def notified(bench: Bench, triggered: Triggered, serial: int) -> Triggered:
    """Trigger notify: each secondary's t0 is the NOTIFY the primary sent it (hosts whose
    NOTIFY never showed are left out of t0)."""
    sent = bench.notifications(serial, triggered.issued, NOTIFY_GRACE_S)
    t0 = {host: at for host, at in sent.items() if host in triggered.phases}
    phases = {
        host: phase | ({"notify_sent": t0[host] - triggered.issued} if host in t0 else {})
        for host, phase in triggered.phases.items()
    }
    return Triggered(t0, phases, triggered.method, triggered.issued, triggered.change)
