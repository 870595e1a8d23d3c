"""Faults on real servers: `faults.FaultBench` carried out on a `LiveCase`.

Link faults go to linkem through its control socket (the testbed of a faulted group runs it
on every direction, reading headers: testbed/core.py `faults`; on inventory hosts each
secondary host's linkem, through its agent: remote/linkctl.py), one command per direction
of each targeted secondary's link, and linkem's answers and events are the evidence. Server
faults use the process handling of measure/processes.py: the primary stopped (SIGTERM, its
own shutdown) and started again, a secondary killed (SIGKILL to each of its processes) and
started again, with pids, exit statuses and times. Whatever a fault leaves is undone by
`fault_cleanup` (links restored, every server running, the primary serving), so the next
case finds the testbed as it was.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from harness.core.errors import ToolFailed
from harness.link import linkem
from harness.link.linkem import LinkControl, LinkemControlError
from harness.measure import processes as srv
from harness.measure.faults import Account, FaultAct
from harness.measure.live import LiveCase
from harness.measure.processes import CaseFailed, RunningServer
from harness.servers import FailureCounts, Server, classify, count_failures
from harness.servers.log_reading import lines_since
from harness.spec import FaultSpec

TIMELINE_INTERVAL = 0.2  # seconds between two readings of the bytes each link carried
MAX_FAILURE_LINES = 40
MAX_LOG_LINES = 120
PRIMARY_BACK = 600.0  # seconds a restarted primary may take to serve its zone again


def resets_unsent(event: dict[str, Any]) -> str | None:
    """Why a reset event of linkem's cut a connection without telling both ends (None: it
    told them): linkem drops the connection's packets from then on either way, so a reset
    that was not sent leaves an end waiting on its own timers, not the fault asked for."""
    detail = event.get("detail") or {}
    sent = detail.get("resets") or []
    wanted = detail.get("wanted", 2)  # one to each end
    failed = detail.get("failed") or []
    if len(sent) >= wanted and not failed:
        return None
    why = "; ".join(str(f) for f in failed) or "linkem gave no reason"
    return (
        f"linkem cut {detail.get('connection', 'a connection')} on {event.get('direction')} "
        f"but sent {len(sent)} of its {wanted} resets ({why})"
    )


def _ahead(running: RunningServer) -> float:
    """How far the server's host clock is ahead of the engine's (0 on this machine)."""
    now = time.time()
    return running.place.host_time(now) - now


def read_failures(
    dialect: type[Server], text: str, since: float, ahead: float = 0.0
) -> tuple[list[str], FailureCounts, list[str], list[tuple[float, str]]]:
    """A server's log since the engine's unix time `since`, read on its host's clock
    (`ahead`: that clock's lead on the engine's, which its stamps carry): the lines, the
    failures counted, the failing lines, and each failure's mark (unix time, category)
    back on the engine's clock, where the fault's window is."""
    host_since = since + ahead
    lines = lines_since(dialect, text, host_since)
    counts = count_failures(dialect.kind, text, host_since)
    failing, marks = [], []
    for line in lines:
        category = classify(dialect.kind, line)
        if category is None:
            continue
        failing.append(line)
        stamp = dialect.failures.timestamp(line, None)
        if category != "follow-up" and stamp is not None:
            marks.append((stamp - ahead, category))
    return lines, counts, failing, marks


class LiveFaults:
    """The fault operations of one live case."""

    def __init__(self, live: LiveCase) -> None:
        self.live = live
        # unix time - bench time, once: linkem's event times convert alike every time.
        self._offset = time.time() - live.clock()
        self._armed_at = 0.0  # unix time linkem was armed (its later events are this fault's)
        self._fired_noted = False  # whether the armed fault's window was noted as begun
        self._timeline: dict[str, list[list[float]]] = {}
        self._timeline_hosts: list[str] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # --- the link ---------------------------------------------------------------------------

    def _control(self) -> LinkControl:
        control = self.live.places.link_control()
        if control is None:
            raise CaseFailed("this testbed has no linkem control: it was not built for faults")
        return control

    def _directions(self, host: str, ways: tuple[str, ...]) -> list[str]:
        """linkem's names for these ways of `host`'s link ("forward", "far-1 reverse")."""
        return [
            d.name
            for d in self.live.places.link_directions()
            if d.endpoint == host and d.name.rsplit(" ", 1)[-1] in ways
        ]

    def _commands(self, fault: FaultSpec, hosts: list[str], after: int = 0) -> list[dict[str, Any]]:
        out = []
        for host in hosts:
            for name in self._directions(host, fault.directions):
                if fault.kind == "reset":
                    out.append(linkem.reset_command(name, after_bytes=after))
                elif fault.kind == "link-down":
                    out.append(linkem.set_command(name, down=True, after_bytes=after))
                elif fault.kind == "slow-primary":
                    out.append(linkem.set_command(name, rate_bps=fault.rate, after_bytes=after))
                else:  # link-degrade
                    patch = linkem.impair_patch(fault.delay, fault.loss)
                    out.append(linkem.set_command(name, impair=patch, after_bytes=after))
        return out

    def _send_all(self, commands: list[dict[str, Any]]) -> tuple[list[Any], str | None]:
        control, answers, errors = self._control(), [], []
        for command in commands:
            try:
                answers.append({"command": command, "answer": control.send(command)})
            except LinkemControlError as exc:
                answers.append({"command": command, "error": str(exc)})
                errors.append(str(exc))
        return answers, "; ".join(errors) or None

    def _restore(self, fault: FaultSpec, hosts: list[str]) -> tuple[list[Any], str | None]:
        ways = ("forward", "reverse")
        names = [name for host in hosts for name in self._directions(host, ways)]
        return self._send_all([linkem.restore_command(name) for name in names])

    def _to_clock(self, unix: float) -> float:
        return unix - self._offset

    def fault_arm(self, fault: FaultSpec, hosts: list[str]) -> FaultAct:
        assert fault.after_bytes is not None
        self._armed_at = time.time()
        self._fired_noted = False
        answers, error = self._send_all(self._commands(fault, hosts, fault.after_bytes))
        return FaultAct(None, {"armed": answers}, error)

    def fault_fired(self, fault: FaultSpec, hosts: list[str]) -> FaultAct | None:
        names = {name: host for host in hosts for name in self._directions(host, fault.directions)}
        wanted = "reset" if fault.kind == "reset" else "fired"
        found = [
            event
            for event in self._control().stats().get("events", [])
            if event.get("event") == wanted
            and event.get("direction") in names
            and float(event.get("at_unix", 0)) >= self._armed_at
        ]
        if not found:
            return None
        # An armed fault began inside linkem: its window opens here, as the flow first sees
        # it fired (within a bytes poll; asked again later, it is no new window), and a
        # reset's closes at once.
        if not self._fired_noted:
            self._fired_noted = True
            self._note(fault, True)
            if fault.kind == "reset":
                self._note(fault, False)
        where: dict[str, float] = {}
        unsent: dict[str, str] = {}
        for event in found:
            host = names[event["direction"]]
            where.setdefault(host, self._to_clock(float(event["at_unix"])))
            if wanted == "reset" and (why := resets_unsent(event)):
                unsent.setdefault(host, why)
        return FaultAct(min(where.values()), {"linkem": found}, hosts=where, failed=unsent)

    # --- begin and end ------------------------------------------------------------------------

    def _note(self, fault: FaultSpec, active: bool) -> None:
        """The fault's window in samples.jsonl (role "fault"), and so live in Prometheus:
        the dashboard's Faults row draws it as an annotation."""
        sampler = self.live.sampler
        if sampler is not None:
            line = {
                "role": "fault",
                "fault": fault.label,
                "kind": fault.kind,
                "active": int(active),
            }
            sampler.note(self.live.plan.name, [line])

    def fault_begin(self, fault: FaultSpec, hosts: list[str]) -> FaultAct:
        self._note(fault, True)
        try:
            return self._begin(fault, hosts)
        finally:
            if fault.kind == "reset":  # one event: its window closes as it happens
                self._note(fault, False)

    def _begin(self, fault: FaultSpec, hosts: list[str]) -> FaultAct:
        if fault.on_link:
            self._armed_at = time.time()
            answers, error = self._send_all(self._commands(fault, hosts))
            taken = [a["answer"]["at_unix"] for a in answers if "answer" in a]
            at = self._to_clock(min(taken)) if taken else None
            return FaultAct(at, {"linkem": answers}, error)
        if fault.on_primary:
            return self._stop_primary()
        return self._kill_secondaries(hosts)

    def fault_end(self, fault: FaultSpec, hosts: list[str]) -> FaultAct:
        try:
            if fault.on_link:
                answers, error = self._restore(fault, hosts)
                taken = [a["answer"]["at_unix"] for a in answers if "answer" in a]
                at = self._to_clock(max(taken)) if taken else self.live.clock()
                return FaultAct(at, {"linkem": answers}, error)
            if fault.on_primary:
                return self._start_primary()
            return self._start_secondaries(hosts)
        finally:
            self._note(fault, False)

    def fault_cleanup(self, fault: FaultSpec, hosts: list[str]) -> dict[str, Any]:
        """Links as configured, every server running, the primary serving its zone."""
        done: dict[str, Any] = {}
        if fault.on_link:
            answers, error = self._restore(fault, hosts)
            done["linkem"] = answers
            if error:
                done["error"] = error
        started = self._start_secondaries([h for h, r in self._secondaries() if r.proc is None])
        if started.evidence.get("started"):
            done["secondaries"] = started.evidence
        live = self.live
        if live.primary is not None and live.primary.proc is None:
            done["primary"] = self._start_primary().evidence
        if live.primary is not None and "primary" in done:
            deadline = live.clock() + PRIMARY_BACK
            back = live._poll(live.primary, live.first_zone, live.base_serial, deadline)
            done["primary_serving_s"] = None if back is None else round(back - live.clock(), 3)
        self._note(fault, False)  # whatever happened, no fault lasts past its repeat
        return done

    def _secondaries(self) -> list[tuple[str, RunningServer]]:
        return list(self.live.secondaries.items())

    def _stop_primary(self) -> FaultAct:
        primary = self.live.primary
        assert primary is not None and primary.proc is not None
        pid = primary.proc.pid
        at = self.live.clock()
        status = primary.proc.poll()
        srv.stop(primary)  # SIGTERM: its own shutdown, SIGKILL after 10 s
        self.live._watch()  # the sampler follows the servers that run
        evidence = {"stopped_pid": pid, "exit_status": status, "stop_s": self.live.clock() - at}
        return FaultAct(at, {"primary": evidence})

    def _start_primary(self) -> FaultAct:
        primary = self.live.primary
        assert primary is not None
        srv.spawn(primary, render=False)
        at = self.live.clock()
        self.live._watch()
        assert primary.proc is not None
        return FaultAct(at, {"primary": {"started_pid": primary.proc.pid}})

    def _kill_secondaries(self, hosts: list[str]) -> FaultAct:
        at = self.live.clock()
        killed = {}
        for host in hosts:
            running = self.live.secondaries[host]
            killed[host] = srv.kill(running)
        self.live._watch()
        return FaultAct(at, {"killed": killed})

    def _start_secondaries(self, hosts: list[str]) -> FaultAct:
        started = {}
        for host in hosts:
            running = self.live.secondaries[host]
            if running.proc is None:
                srv.spawn(running, render=False)
                assert running.proc is not None
                started[host] = running.proc.pid
        at = self.live.clock()
        if started:
            self.live._watch()
        return FaultAct(at, {"started": started})

    def sleep_until(self, at: float) -> None:
        wait = at - self.live.clock()
        if wait > 0:
            time.sleep(wait)

    # --- bytes --------------------------------------------------------------------------------

    def link_bytes(self, hosts: list[str]) -> dict[str, int]:
        per = self._control().stats().get("directions", {})
        out = {}
        for host in hosts:
            names = self._directions(host, ("forward",))
            out[host] = sum(int(per.get(name, {}).get("passed_bytes", 0)) for name in names)
        return out

    def timeline_start(self, hosts: list[str]) -> None:
        self._timeline = {host: [] for host in hosts}
        self._stop.clear()
        self._timeline_hosts = hosts

        def sample() -> None:
            while not self._stop.is_set():
                self._sample()
                self._stop.wait(TIMELINE_INTERVAL)

        self._thread = threading.Thread(target=sample, name="fault-timeline", daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        try:
            now, got = self.live.clock(), self.link_bytes(self._timeline_hosts)
        except (LinkemControlError, CaseFailed):
            return
        for host, carried in got.items():
            series = self._timeline[host]
            # A flat stretch keeps its two ends only.
            if len(series) >= 2 and series[-1][1] == series[-2][1] == carried:
                series[-1] = [now, carried]
            else:
                series.append([now, carried])

    def timeline_stop(self) -> dict[str, list[list[float]]]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None
            self._sample()  # the curve ends where the repeat did
        return self._timeline

    # --- the servers' own account -------------------------------------------------------------

    def account(self, host: str, zone: str, since: float, *, stuck: bool) -> Account:
        running = self.live.secondaries[host]
        read = read_failures(type(running.server), srv.log_of(running), since, _ahead(running))
        lines, counts, failing, marks = read
        transfers = self._transfers(running, zone, since)
        retry_xfr, retry_from = None, None
        for entry in reversed(transfers):
            if entry.get("xfr"):
                retry_xfr, retry_from = entry["xfr"], f"{entry['side']} log"
                break
        status = self._status(running, zone) if stuck else None
        return Account(
            failures=counts.to_json(),
            failure_lines=failing[:MAX_FAILURE_LINES],
            marks=marks,
            transfers=transfers,
            retry_xfr=retry_xfr,
            retry_xfr_from=retry_from,
            status=status,
            log=lines[-MAX_LOG_LINES:] if stuck else [],
        )

    def _transfers(self, running: RunningServer, zone: str, since: float) -> list[dict[str, Any]]:
        """Transfers of `zone` logged since `since`: the secondary's incoming ones and the
        primary's outgoing ones to it, in time order."""
        out = []
        dialect = type(running.server)
        secondary_since = since + _ahead(running)  # each log stamps its own host's clock
        for entry in dialect.parse_log(srv.log_of(running)):
            at = entry.at_unix or 0
            if entry.direction == "in" and entry.zone == zone and at >= secondary_since:
                out.append(entry.to_json() | {"side": "secondary"})
        primary = self.live.primary
        if primary is not None:
            kind = type(primary.server)
            primary_since = since + _ahead(primary)
            for entry in kind.parse_log(srv.log_of(primary)):
                if (
                    entry.direction == "out"
                    and entry.zone == zone
                    and (entry.at_unix or 0) >= primary_since
                    and kind.peer_is(entry.peer, running.place.address)
                ):
                    out.append(entry.to_json() | {"side": "primary"})
        return sorted(out, key=lambda e: e.get("at_unix") or 0.0)

    def _status(self, running: RunningServer, zone: str) -> str:
        argv = running.server.zone_status_argv(zone)
        if argv is None:
            return f"not supported by {running.server.kind}"
        try:
            result = running.place.run(argv, check=False, timeout=30)
        except (OSError, ToolFailed) as exc:
            return f"{' '.join(argv)}: {exc}"
        return (result.stdout + result.stderr).strip()

    def renotify(self, zone: str) -> FaultAct:
        primary = self.live.primary
        assert primary is not None
        argv = primary.server.notify_argv(zone)
        if argv is None:
            return FaultAct(None, {}, f"not supported by {primary.server.kind}")
        at = self.live.clock()
        result = primary.place.run(argv, check=False, timeout=30)
        output = (result.stdout + result.stderr).strip()
        evidence = {"argv": argv, "status": result.returncode, "output": output}
        if result.returncode != 0:
            return FaultAct(None, evidence, f"{argv[0]} exited {result.returncode}: {output}")
        return FaultAct(at, evidence)
