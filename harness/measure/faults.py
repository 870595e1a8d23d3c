"""Faults beside a new serial: break something while it travels, and measure how each
secondary heals (pure, against a `Bench` and a `FaultBench`; live_faults.py carries it out).

A faulted repeat publishes one new serial and triggers it as the case says (NOTIFY or the
control command), like `protocol.update_repeat`. Its fault (plan.fault, spec/faults.py)
begins `at` seconds after the trigger (the moment the primary serves the new serial, or the
control command), or once `after_bytes` bytes crossed a targeted secondary's link: linkem
fires an armed link fault on the packet itself, the harness fires a server fault when
linkem's byte counter says so. A lasting fault ends `duration` later; a reset or a primary
restart is one event. The fault is applied even if every secondary already served: a
secondary killed after the transfer must still come back with the serial.

Per secondary, measured:
- healing: the time from the fault's end until it serves the new serial (`heal_s`, 0 when it
  served during the fault, None when before it began: unaffected), verified like any copy;
  a killed secondary starts over, so only what it serves after its restart counts;
- stuck: not serving it `plan.timeout` after the fault's end. A stuck secondary is a
  `timeout` failure whose extra["fault"]["stuck"] is true (not a failure kind of its own:
  every reader of records already counts it as not converged, and what makes it "stuck"
  is the fault's context, which the record carries). Its server's own account is kept
  (the zone's status from its control tool, its log lines since the fault); then the
  primary sends NOTIFY once more (its own notify command) and whether that frees the
  secondary within `plan.timeout` is recorded (nsd #262's question);
- in the servers' own words since the fault began: failures by category, the failure lines
  and their times (the report's retry and reset marks), the transfers each side logged and
  whether the transfer that brought the serial was a full one (AXFR: started over) or an
  incremental one (IXFR), from the secondary's log, the primary's, or failing both the bytes;
- bytes: what its link carried forward (linkem's passed_bytes: IP bytes, all connections)
  before the fault, during it and after it, and the curve of bytes over time;
- evidence that the fault happened: linkem's answers and events (when a command took effect,
  the connection it cut and the resets it sent), the processes stopped and started (pids,
  times, exit statuses).

A fault that did not happen as asked answers nothing about healing: linkem refused a
command (arming it, taking it, restoring the link), an armed fault never fired (on any
link, or on a targeted secondary's own), or a reset's resets were not all sent. Every
record it concerns fails as a `harness` failure whose error begins with the fault's own
(`extra.fault.not_as_asked`): the whole repeat's when the fault as a whole went wrong, a
targeted secondary's when only its link did. The transfers are still observed and
verified, so the record keeps what they were, but none of them counts as "no fault".
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from harness.measure.bench import Bench, Emit, secondary_names
from harness.measure.records import RecordContext
from harness.measure.steps import (
    Repeat,
    Triggered,
    begin,
    check_published,
    end_observation,
    publish,
    read_copy,
    served_copy,
    settle,
)
from harness.results.model import Failure
from harness.spec import FaultSpec, fault_targets

BYTES_POLL_S = 0.05  # how often an after_bytes fault checks the link's counters


@dataclass(frozen=True)
class FaultAct:
    """One step of a fault: when it took effect (bench clock; None: it did not) and the
    evidence (linkem's answers, pids), or why it failed."""

    at: float | None
    evidence: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    # An armed link fault fires on each targeted link when that link carried its bytes:
    # host -> when it fired there (bench clock).
    hosts: dict[str, float] = field(default_factory=dict)
    # host -> why the fault did not happen as asked on its link (a reset not sent).
    failed: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Account:
    """A secondary's own account since a moment, in its words and its primary's."""

    failures: dict[str, Any]  # FailureCounts.to_json(): by category
    failure_lines: list[str]
    marks: list[tuple[float, str]]  # (unix time, category) of each failure line
    transfers: list[dict[str, Any]]  # what each side logged (LoggedTransfer.to_json + side)
    retry_xfr: str | None  # axfr | ixfr: the transfer that brought the serial, when known
    retry_xfr_from: str | None  # secondary log | primary log
    status: str | None = None  # the zone's status from its control tool (stuck only)
    log: list[str] = field(default_factory=list)  # its log since the moment (stuck only)


class FaultBench(Protocol):
    """What a faulted repeat needs beyond `Bench`. Times are the bench's clock."""

    def fault_arm(self, fault: FaultSpec, hosts: list[str]) -> FaultAct:
        """A link fault with after_bytes: arm linkem, which fires it on the packet."""

    def fault_fired(self, fault: FaultSpec, hosts: list[str]) -> FaultAct | None:
        """An armed fault that fired on some targeted link (None: on none yet); its
        `hosts` says where it fired so far and when."""

    def fault_begin(self, fault: FaultSpec, hosts: list[str]) -> FaultAct: ...

    def fault_end(self, fault: FaultSpec, hosts: list[str]) -> FaultAct: ...

    def fault_cleanup(self, fault: FaultSpec, hosts: list[str]) -> dict[str, Any]:
        """Whatever the fault left: links as configured, every server running again."""

    def sleep_until(self, at: float) -> None: ...

    def link_bytes(self, hosts: list[str]) -> dict[str, int]:
        """Bytes each host's link carried towards it so far (linkem's passed_bytes)."""

    def timeline_start(self, hosts: list[str]) -> None: ...

    def timeline_stop(self) -> dict[str, list[list[float]]]:
        """Per host, [bench time, bytes carried towards it] while the repeat went on."""

    def account(self, host: str, zone: str, since: float, *, stuck: bool) -> Account:
        """`host`'s account since `since` (unix time); with `stuck`, its zone status and
        log lines too."""

    def renotify(self, zone: str) -> FaultAct:
        """The primary's own notify command, once."""


@dataclass
class _Window:
    begin: FaultAct
    end: FaultAct
    trigger_at: float

    @property
    def happened(self) -> bool:
        return self.begin.at is not None

    @property
    def end_at(self) -> float:
        return self.end.at if self.end.at is not None else self.begin.at or self.trigger_at


def _pending(hosts: list[str], served: dict[str, float]) -> list[str]:
    return [host for host in hosts if host not in served]


def _wait(
    bench: Bench, hosts: list[str], zone: str, serial: int, until: float, served: dict[str, float]
) -> None:
    pending = _pending(hosts, served)
    if pending and until > bench.clock():
        served.update(bench.wait_served(pending, zone, serial, until))


def _joined(*errors: str | None) -> str | None:
    return "; ".join(e for e in errors if e) or None


def _until_fault(
    bench: Bench,
    faults: FaultBench,
    fault: FaultSpec,
    serial: int,
    targets: list[str],
    trigger_at: float,
    before: dict[str, int],
    armed: FaultAct | None,
    served: dict[str, float],
) -> FaultAct:
    """Wait (watching the secondaries) for the fault's moment and begin it."""
    plan, zone, hosts = bench.plan, bench.first_zone, secondary_names(bench.plan)
    deadline = trigger_at + plan.timeout
    if fault.after_bytes is None:
        moment = trigger_at + fault.start_at
        _wait(bench, hosts, zone, serial, moment, served)
        faults.sleep_until(moment)
        return faults.fault_begin(fault, targets)
    while True:
        if armed is not None:
            fired = faults.fault_fired(fault, targets)
            if fired is not None:
                return fired
        else:
            carried = faults.link_bytes(targets)
            if any(carried.get(h, 0) - before.get(h, 0) >= fault.after_bytes for h in targets):
                return faults.fault_begin(fault, targets)
        if not _pending(hosts, served) or bench.clock() >= deadline:
            why = (
                "every secondary served the serial"
                if not _pending(hosts, served)
                else f"{plan.timeout:g} s passed"
            )
            return FaultAct(
                None,
                armed.evidence if armed else {},
                f"never began: {why} before the link carried {fault.after_bytes:,} bytes",
            )
        _wait(bench, hosts, zone, serial, min(bench.clock() + BYTES_POLL_S, deadline), served)


def fault_repeat(
    bench: Bench,
    faults: FaultBench,
    ctx: RecordContext,
    repeat: int,
    serial: int,
    emit: Emit,
    extra: dict[str, Any],
) -> None:
    """One repeat of a faulted case: an update's steps (measure/steps.py) with the fault's
    between the trigger and the end of the observation: publish `serial`, trigger, break,
    heal, record."""
    plan = ctx.plan
    fault = plan.fault
    assert fault is not None, "a faulted repeat needs a case with a fault"
    hosts = secondary_names(plan)
    targets = [h for h in fault_targets(fault, plan.sites) if h in hosts]
    spent = bench.spent
    settle(bench)
    at = begin(bench, ctx, repeat, serial, emit, extra)
    offset = bench.wall() - bench.clock()  # bench time -> unix time
    with spent.phase("observe"):
        faults.timeline_start(hosts)
        before = faults.link_bytes(hosts)
    armed = None
    try:
        if fault.after_bytes is not None and fault.on_link:
            with spent.phase("publish"):  # linkem armed just before the new serial
                armed = faults.fault_arm(fault, targets)
        triggered = publish(at)
        trigger_at = _trigger_moment(triggered, plan.trigger)
        with spent.phase("transfer"):
            broken = _broken(at, faults, targets, trigger_at, before, armed)
        healed = _healed(at, faults, broken, offset, targets, armed)
    finally:
        with spent.phase("observe"):
            cleanup = faults.fault_cleanup(fault, targets)
            curves = faults.timeline_stop()
            after = faults.link_bytes(hosts)
    triggered = end_observation(at, triggered)
    assert triggered is not None
    check_published(at)
    begun, end, window = broken.window.begin, broken.window.end, broken.window
    renotify, freed, served = healed.renotify, healed.freed, broken.served
    common = {
        "kind": fault.kind,
        "name": fault.label,
        "target": fault.target,
        "trigger": plan.trigger,
        "began_s": _since(begun.at, trigger_at),
        "ended_s": _since(end.at, trigger_at) if window.happened else None,
        "error": _joined(begun.error, end.error if end is not begun else None),
        "evidence": {"begin": begun.evidence, "end": end.evidence, "cleanup": cleanup},
        "renotify": None
        if renotify is None
        else {
            "sent_s": _since(renotify.at, trigger_at),
            "evidence": renotify.evidence,
            "error": renotify.error,
        },
    }
    fired = healed.fired
    for host in hosts:
        t0 = triggered.t0.get(host, trigger_at)
        done = served.get(host, freed.get(host))
        account = healed.accounts[host]
        mine = dict(common) | {
            "not_as_asked": _not_as_asked(
                fault,
                common["error"],
                host in targets,
                armed is not None,
                fired,
                healed.unsent,
                host,
            ),
            "targeted": host in targets,
            "fired_s": _since(fired.get(host), trigger_at),  # an armed link fault, here
            "served_s": _since(done, trigger_at),
            "heal_s": _heal(done, window, fired.get(host) if fault.kind == "reset" else None)
            if host in served
            else None,
            "unaffected": host in served and window.happened and served[host] < begun.at,
            "stuck": host in healed.stuck,
            "freed_by_notify": host in freed,
            "bytes": _bytes(host, before, broken.at_begin, broken.at_end, after),
            "timeline": [
                [round(t - trigger_at, 3), b - before.get(host, 0)] for t, b in curves.get(host, [])
            ],
            "marks": [[round(t - offset - trigger_at, 3), c] for t, c in account.marks],
            "server": {
                "failures": account.failures,
                "failure_lines": account.failure_lines,
                "transfers": account.transfers,
                "retry_xfr": account.retry_xfr,
                "retry_xfr_from": account.retry_xfr_from,
            },
        }
        if host in healed.stuck:
            mine["account"] = {"status": account.status, "log": account.log}
        if renotify is not None and host in healed.stuck:
            mine["renotify"] = dict(common["renotify"]) | {
                "freed": host in freed,
                "served_after_s": _since(freed.get(host), renotify.at),
            }
        _record(at, host, t0, done, mine)


@dataclass(frozen=True)
class _Broken:
    """The fault's window and what each link carried towards its secondary when it began
    and ended; `served`: when each secondary served the serial by the window's end plus
    `plan.timeout` (a killed one: since its restart)."""

    window: _Window
    at_begin: dict[str, int]
    at_end: dict[str, int]
    served: dict[str, float]


def _broken(
    at: Repeat,
    faults: FaultBench,
    targets: list[str],
    trigger_at: float,
    before: dict[str, int],
    armed: FaultAct | None,
) -> _Broken:
    """The fault's steps: wait for its moment and begin it, hold it for its duration, end
    it, and wait for every secondary to serve the serial (`plan.timeout` after its end)."""
    bench, plan, serial, zone = at.bench, at.ctx.plan, at.serial, at.zone
    fault, hosts = plan.fault, at.hosts
    assert fault is not None
    served: dict[str, float] = {}
    begun = _until_fault(bench, faults, fault, serial, targets, trigger_at, before, armed, served)
    if armed is not None and armed.error:  # kept whatever happened next
        begun = replace(begun, error=_joined(f"arming it: {armed.error}", begun.error))
    at_begin = faults.link_bytes(hosts)
    if fault.duration and begun.at is not None:
        _wait(bench, hosts, zone, serial, begun.at + fault.duration, served)
        faults.sleep_until(begun.at + fault.duration)
    at_end = faults.link_bytes(hosts)
    # A lasting fault ends; a restart is started again at once; a reset is one event.
    end = begun if begun.at is None or fault.kind == "reset" else faults.fault_end(fault, targets)
    window = _Window(begun, end, trigger_at)
    if fault.kind == "secondary-kill" and window.happened:
        for host in targets:  # started over: only what it serves now counts
            served.pop(host, None)
    _wait(bench, hosts, zone, serial, window.end_at + plan.timeout, served)
    return _Broken(window, at_begin, at_end, served)


@dataclass(frozen=True)
class _Healed:
    """After the fault: the stuck secondaries, each one's account, the new NOTIFY sent to
    the stuck and those it freed (when each served), and where an armed fault fired."""

    stuck: list[str]
    accounts: dict[str, Account]
    renotify: FaultAct | None
    freed: dict[str, float]
    fired: dict[str, float]
    unsent: dict[str, str]


def _healed(
    at: Repeat,
    faults: FaultBench,
    broken: _Broken,
    offset: float,
    targets: list[str],
    armed: FaultAct | None,
) -> _Healed:
    """Each secondary's account since the fault began (`offset`: bench time to unix time);
    a new NOTIFY for the stuck, and whether it freed them."""
    bench, plan, zone, spent = at.bench, at.ctx.plan, at.zone, at.bench.spent
    fault, begun, hosts = plan.fault, broken.window.begin, at.hosts
    assert fault is not None
    stuck = _pending(hosts, broken.served)
    since = offset + (begun.at if begun.at is not None else broken.window.trigger_at)
    with spent.phase("observe"):
        accounts = {h: faults.account(h, zone, since, stuck=h in stuck) for h in hosts}
    renotify, freed = None, {}
    if stuck:
        with spent.phase("transfer"):
            renotify = faults.renotify(zone)
            if renotify.at is not None:
                _wait(bench, stuck, zone, at.serial, renotify.at + plan.timeout, freed)
        with spent.phase("observe"):
            for host in freed:  # the transfer that freed it, as the servers logged it
                later = faults.account(host, zone, since, stuck=False)
                accounts[host] = replace(
                    accounts[host],
                    transfers=later.transfers,
                    retry_xfr=later.retry_xfr,
                    retry_xfr_from=later.retry_xfr_from,
                )
    fired, unsent = begun.hosts, begun.failed
    if armed is not None and begun.at is not None:  # where else it fired since
        last = faults.fault_fired(fault, targets)
        if last is not None:
            fired, unsent = last.hosts, begun.failed | last.failed
    return _Healed(stuck, accounts, renotify, freed, fired, unsent)


def _not_as_asked(
    fault: FaultSpec,
    error: str | None,
    targeted: bool,
    armed: bool,
    fired: dict[str, float],
    unsent: dict[str, str],
    host: str,
) -> str | None:
    """Why the fault did not happen as asked, for `host`'s record (None: it did): the
    fault's own error (every record of the repeat), or for a targeted secondary, an armed
    fault that never fired on its link or a reset not sent there."""
    what = f"the {fault.label} fault did not happen as asked"
    if error:
        return f"{what}: {error}"
    if not targeted:
        return None
    if host in unsent:
        return f"{what} on {host}'s link: {unsent[host]}"
    if armed and host not in fired:
        return (
            f"{what}: it never fired on {host}'s link (armed for after {fault.after_bytes:,} bytes)"
        )
    return None


def _trigger_moment(triggered: Triggered, trigger: str) -> float:
    """The fault clock's zero: the primary serving the new serial (NOTIFYs go out then),
    or the control command."""
    if trigger == "notify":
        reload = next(iter(triggered.phases.values()), {}).get("primary_reload", 0.0)
        return triggered.issued + reload
    return min(triggered.t0.values(), default=triggered.issued)


def _since(at: float | None, origin: float | None) -> float | None:
    return None if at is None or origin is None else round(at - origin, 6)


def _heal(served: float | None, window: _Window, own_end: float | None = None) -> float | None:
    """Seconds from the fault's end (`own_end`: where a reset fired on this host's link)
    to serving: 0 when served during the fault."""
    if served is None or not window.happened:
        return None
    end = own_end if own_end is not None else window.end_at
    return round(max(0.0, served - end), 6)


def _bytes(
    host: str,
    before: dict[str, int],
    begin: dict[str, int],
    end: dict[str, int],
    after: dict[str, int],
) -> dict[str, int | None]:
    if host not in before:
        return {"before": None, "during": None, "after": None}
    return {
        "before": begin.get(host, 0) - before[host],
        "during": end.get(host, 0) - begin.get(host, 0),
        "after": after.get(host, 0) - end.get(host, 0),
    }


def _record(at: Repeat, host: str, t0: float, done: float | None, fault: dict[str, Any]) -> None:
    plan, zone, serial = at.ctx.plan, at.zone, at.serial
    not_as_asked = fault.get("not_as_asked")
    if done is None:
        text = (
            f"stuck: {host} never served {zone} serial {serial}, not {plan.timeout:g} s after "
            f"the {fault['kind']} fault ended nor {plan.timeout:g} s after a new NOTIFY"
        )
        kind: Failure = "harness" if not_as_asked else "timeout"
        record = at.failed(host, _joined(not_as_asked, text) or text, kind)
        record.extra["fault"] = fault
        at.emit(record)
        return
    copy = read_copy(at, host, t0, done)
    with at.bench.spent.phase("observe"):
        counters = at.bench.link_counters()
    check, stuck = copy.check, fault["stuck"]
    ok = check.ok and not stuck and not not_as_asked
    if stuck:
        error = (
            f"stuck: {host} did not serve serial {serial} within {plan.timeout:g} s of the "
            f"{fault['kind']} fault's end; a new NOTIFY freed it"
        )
    else:
        error = check.problem
    error = _joined(not_as_asked, error)  # the fault's own error first
    failed: Failure | None = None
    if not ok:
        failed = "harness" if not_as_asked else ("timeout" if stuck else check.failure)
    duration = max(0.0, done - t0)
    observed = served_copy(
        at,
        host,
        copy,
        t0,
        done,
        duration_s=duration,
        ok=ok,
        error=error,
        failure=failed,
        phases={"served": duration},
        server_logged=copy.logged.server_logged(refusals=False),
        extra={"link_counters": counters, "fault": fault},
    )
    at.record(host, observed)
