"""What a change stream saw, and its records: one per secondary and serial (pure).

Where the facts live (docs/architecture.md, "Results format"):
- each record (secondary, serial s) holds the publication latency of s at that secondary
  (`duration_s`, from the primary's first answer with s), its error, the publish's slot
  and lateness (`phases`, `extra.stream`);
- `server_logged.transfer` holds the transfer that brought s (or a later serial) to that
  secondary, as the servers logged it: its kind, the serial it brought, how many serials it
  carried (`carried` > 1: a condensed transfer), and for an AXFR that replaced an IXFR the
  reason in the server's own words. Every transfer a secondary made during the stream
  carried at least one serial, so the records of one secondary, taken together, list
  every transfer it made (results/stream.py counts them by their `serial`);
- the record of the final serial holds the secondary's failed attempts during the stream,
  in its own words (`server_logged.secondary_failures`, servers/failures.py).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from harness.measure.protocol import Verification
from harness.measure.records import Observed, RecordContext, failure, transfer_record
from harness.results.model import UNCHECKED, TransferRecord
from harness.xfr.follow import SerialChange
from harness.xfr.serial import serial_ge, serial_gt

PRIMARY = "primary"  # the primary's name among the followed servers (its host's name)


@dataclass(frozen=True)
class Put:
    """A serial put on the primary: when the harness began and when the primary took it
    (bench clock). When it serves it is seen by following it."""

    issued: float
    returned: float
    method: str


@dataclass(frozen=True)
class StreamTransfer:
    """One incoming transfer a secondary made during the stream, as the servers logged it
    (the secondary's log, or the primary's where the secondary's does not say)."""

    serial: int | None  # the serial it brought
    xfr: str | None  # "ixfr" | "axfr"; None where no log says
    from_serial: int | None = None  # where an IXFR started, when a log says
    at_unix: float | None = None  # when it ended, by the log's stamp
    fallback: str | None = None  # an AXFR in place of an IXFR: why, in the server's words
    fallback_kind: str | None = None  # journal trimmed | history inconsistent | ...
    fallback_by: str | None = None  # whose line said so: "knot (primary)"
    bytes: int | None = None
    messages: int | None = None
    source: str = "secondary"  # whose log said it

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass
class Published:
    serial: int
    due: float  # its slot, bench clock
    issued: float
    returned: float
    method: str

    @property
    def late(self) -> float:
        return max(0.0, self.issued - self.due)


@dataclass
class Ahead:
    """A secondary answered a serial the primary had not been given (nsd #411)."""

    serial: int
    at: float
    newest: int  # the newest serial published by then


@dataclass
class Back:
    """A secondary answered an older serial than one it had served (it went back)."""

    serial: int
    at: float
    highest: int  # the newest serial it had served
    highest_at: float  # when it was first seen serving that


@dataclass
class StreamSeen:
    """What one stream saw, in bench clock times."""

    start: float
    start_wall: float
    base: int  # the serial every server served before the stream
    scheduled: list[tuple[int, float]]  # (serial, due) of every serial of the schedule
    published: list[Published] = field(default_factory=list)
    changes: dict[str, list[SerialChange]] = field(default_factory=dict)  # PRIMARY too
    ahead: dict[str, list[Ahead]] = field(default_factory=dict)
    back: dict[str, list[Back]] = field(default_factory=dict)
    publish_error: str | None = None  # why the stream stopped publishing
    primary_wrong: bool = False  # the primary serves something else than was published
    waited_until: float = 0.0  # when the flow stopped waiting for the fleet
    queries: dict[str, int] = field(default_factory=dict)  # SOA queries sent to each server

    def wall_at(self, at: float) -> float:
        return self.start_wall + (at - self.start)

    def newest_at(self, at: float) -> int:
        """The newest serial put on the primary by `at` (the base before any)."""
        newest = self.base
        for put in self.published:
            if put.issued <= at:
                newest = put.serial
        return newest

    def serving(self, host: str) -> int:
        changes = self.changes.get(host)
        return changes[-1].serial if changes else self.base

    def absorb(self, changes: list[SerialChange]) -> None:
        """Keep every change; check each secondary's against what was published by then
        (ahead of it) and against what it served before (back from it)."""
        for change in changes:
            mine = self.changes.setdefault(change.host, [])
            highest = _highest(mine)
            mine.append(change)
            if change.host == PRIMARY:
                continue
            newest = self.newest_at(change.at)
            if serial_gt(change.serial, newest):
                ahead = Ahead(change.serial, change.at, newest)
                self.ahead.setdefault(change.host, []).append(ahead)
            if highest is not None and serial_gt(highest.serial, change.serial):
                back = Back(change.serial, change.at, highest.serial, highest.at)
                self.back.setdefault(change.host, []).append(back)

    def lag(self, hosts: list[str], now: float) -> dict[str, tuple[int, float]]:
        """Per secondary: published serials it does not serve yet, and how long the oldest
        of them has been published."""
        out = {}
        for host in hosts:
            serving = self.serving(host)
            missing = [p for p in self.published if not serial_ge(serving, p.serial)]
            out[host] = (len(missing), now - missing[0].issued if missing else 0.0)
        return out


def _highest(changes: list[SerialChange]) -> SerialChange | None:
    """The first change to the newest serial among `changes` (RFC 1982)."""
    best = None
    for change in changes:
        if best is None or serial_gt(change.serial, best.serial):
            best = change
    return best


@dataclass(frozen=True)
class StreamLogs:
    """What the servers logged of each secondary during the stream."""

    transfers: dict[str, list[StreamTransfer]]  # host -> its incoming transfers
    failures: dict[str, dict[str, Any]]  # host -> its failed attempts (FailureCounts json)
    # host -> the link's counters and its TCP over the whole stream (extra.link, extra.tcp,
    # and extra.link_span_s, the seconds they cover), in its final serial's record
    wire: dict[str, dict[str, Any]] = field(default_factory=dict)


def first_serving(changes: list[SerialChange], serial: int) -> SerialChange | None:
    """The first change to `serial` or a later one (RFC 1982)."""
    return next((c for c in changes if serial_ge(c.serial, serial)), None)


def carried(transfers: list[StreamTransfer], base: int) -> list[tuple[StreamTransfer, int]]:
    """Each transfer with the number of serials it carried (from the serial before it)."""
    out = []
    before = base
    for item in sorted(
        (t for t in transfers if t.serial is not None and serial_gt(t.serial, base)),
        key=lambda t: (t.serial - base) % 2**32,  # type: ignore[operator]
    ):
        assert item.serial is not None
        out.append((item, (item.serial - before) % 2**32))
        before = item.serial
    return out


def _transfer_of(serial: int, made: list[tuple[StreamTransfer, int]]) -> dict[str, Any]:
    for item, count in made:
        if item.serial is not None and serial_ge(item.serial, serial):
            return item.to_json() | {"carried": count, "condensed": count > 1}
    return {}


def stream_records(
    ctx: RecordContext,
    repeat: int,
    zone: str,
    seen: StreamSeen,
    checks: dict[str, Verification],
    logs: StreamLogs,
    extra: dict[str, Any],
) -> list[TransferRecord]:
    """One record per secondary and scheduled serial (see the module docstring); the
    record of the final serial also holds the secondary's failed attempts during the
    stream (`server_logged.secondary_failures`)."""
    plan = ctx.plan
    hosts = [h.name for h in plan.secondaries]
    published = {p.serial: p for p in seen.published}
    last = seen.published[-1].serial if seen.published else None
    made = {host: carried(logs.transfers.get(host, []), seen.base) for host in hosts}
    out = []
    for serial, due in seen.scheduled:
        put = published.get(serial)
        started = seen.wall_at(put.issued if put else due)
        if put is None or seen.primary_wrong:
            why = seen.publish_error or "the stream stopped before this serial"
            why = why if put is not None else f"not published: {why}"
            for host in hosts:
                observed = failure(serial, why, started, kind="publish")
                observed.extra = dict(extra)
                out.append(transfer_record(ctx, host=host, repeat=repeat, zone=zone,
                                           observed=observed))  # fmt: skip
            continue
        primary = first_serving(seen.changes.get(PRIMARY, []), serial)
        firsts = {h: first_serving(seen.changes.get(h, []), serial) for h in hosts}
        seen_at = [c.at for c in (primary, *firsts.values()) if c is not None]
        origin = min(seen_at) if seen_at else None
        primary_error = None
        if primary is not None:
            primary_error = primary.at - max(primary.before or put.issued, put.issued)
        for host in hosts:
            first = firsts[host]
            by_primary = primary is not None and primary.at == origin
            base_extra = {
                "due_s": round(due - seen.start, 6),
                "issued_s": round(put.issued - seen.start, 6),
                "late_s": round(put.late, 6),
                "issued_at": round(seen.wall_at(put.issued), 6),
                "serial_method": put.method,
                "origin": "primary" if by_primary else "a secondary",
            }
            if plan.stream is not None and plan.stream.sla is not None:
                base_extra["sla_s"] = plan.stream.sla
            if primary_error is not None:
                base_extra["primary_error_s"] = round(max(0.0, primary_error), 6)
            logged: dict[str, Any] = {}
            transfer = _transfer_of(serial, made[host])
            if transfer:
                logged["transfer"] = transfer
            if serial == last and logs.failures.get(host):
                logged["secondary_failures"] = logs.failures[host]
            if serial == last and seen.queries:  # what following it cost, once per host
                base_extra["soa_queries"] = seen.queries.get(host, 0)
                base_extra["primary_soa_queries"] = seen.queries.get(PRIMARY, 0)
            if first is None or origin is None:
                never = "the primary never served it" if origin is None else ""
                text = (
                    f"timeout after {plan.timeout:g} s from the last publish: {host} never "
                    f"served serial {serial} (it serves {seen.serving(host)})"
                    + (f"; {never}" if never else "")
                )
                kind = "publish" if origin is None else "timeout"
                observed = failure(serial, text, started, kind=kind)
                observed.extra = extra | {"stream": base_extra}
                observed.server_logged = logged
                out.append(transfer_record(ctx, host=host, repeat=repeat, zone=zone,
                                           observed=observed))  # fmt: skip
                continue
            duration = first.at - origin
            low = max(first.before if first.before is not None else put.issued, put.issued)
            copy_records, kind, problem = _outcome(seen, host, last, checks.get(host))
            # Only the final serial's copy is checked: an earlier serial was served until
            # the next arrived, and nothing read that copy.
            unchecked = problem is None and serial != last
            record_extra = extra | {"stream": base_extra}
            if unchecked:
                copy_records = None
                record_extra[UNCHECKED] = (
                    f"not verified: only the final serial's copy is checked ({host}'s at "
                    f"serial {last} was)"
                )
            else:
                record_extra["zone_records"] = copy_records
            base_extra["served_at"] = round(seen.wall_at(first.at), 6)
            base_extra["served_s"] = round(first.at - seen.start, 6)
            if first.serial != serial:  # it never served s alone: it went straight past it
                base_extra["served_serial"] = first.serial
            observed = Observed(
                serial=serial,
                duration_s=duration,
                started_at=seen.wall_at(origin),
                ok=problem is None,
                error=problem,
                verified=problem is None and not unchecked,
                failure=kind,
                phases={
                    "publish_late": put.late,
                    "primary_put": max(0.0, put.returned - put.issued),
                    "primary_served": max(0.0, origin - put.issued),
                    "served": duration,
                },
                server_logged=logged,
                extra=record_extra
                | (checks[host].facts() if serial == last and host in checks else {})
                | (logs.wire.get(host, {}) if serial == last else {}),
                duration_error_s=max(0.0, first.at - low),
            )
            out.append(transfer_record(ctx, host=host, repeat=repeat, zone=zone,
                                       observed=observed))  # fmt: skip
    return out


def _outcome(
    seen: StreamSeen, host: str, last: int | None, check: Verification | None
) -> tuple[int | None, Any, str | None]:
    """(records of the verified copy, failure kind, the problem) of one secondary's
    records: ahead of the primary, never at the final serial, or its copy differs."""
    ahead, back = seen.ahead.get(host), seen.back.get(host)
    if ahead and not (back and back[0].at < ahead[0].at):
        bad = ahead[0]
        return (
            None,
            "verification",
            f"{host} served serial {bad.serial}, which the primary had not been given "
            f"(the newest published then: {bad.newest}), {bad.at - seen.start:.3f} s into "
            "the stream",
        )
    if back:
        went = back[0]
        return (
            None,
            "verification",
            f"{host} went back to serial {went.serial} {went.at - seen.start:.3f} s into "
            f"the stream, after serving serial {went.highest} from "
            f"{went.highest_at - seen.start:.3f} s",
        )
    if check is None:
        return (
            None,
            "timeout",
            f"{host} never reached the final serial {last} (it serves {seen.serving(host)}): "
            "not verified",
        )
    if not check.ok:
        return check.records, check.failure, check.problem
    return check.records, None, None
