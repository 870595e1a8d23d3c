"""The one place a TransferRecord is built, from a case's context and what a flow observed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.core.terms import SERVER_TO_SERVER, Method
from harness.plan.case import CasePlan
from harness.results.model import UNCHECKED, Failure, TransferRecord


@dataclass(frozen=True)
class RecordContext:
    """What every record of a case shares."""

    run_id: str
    plan: CasePlan
    bound: dict[str, dict[str, float]] = field(default_factory=dict)  # host -> bit/s bounds
    rtt: dict[str, float] = field(default_factory=dict)  # host -> configured path RTT, s


@dataclass
class Observed:
    """What one attempt measured; None where it was not seen."""

    serial: int | None
    duration_s: float | None
    started_at: float  # unix time of the trigger / connect
    ok: bool
    error: str | None = None
    verified: bool = False
    records: int | None = None
    bytes: int | None = None
    messages: int | None = None
    phases: dict[str, float] = field(default_factory=dict)
    server_logged: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    unsupported: bool = False
    bound: dict[str, float] | None = None  # this transfer's own (the advertised window)
    failure: Failure | None = None  # why it does not count; None when it does
    duration_error_s: float | None = None  # how late the end of duration_s may be seen


def transfer_record(
    ctx: RecordContext,
    *,
    host: str,
    repeat: int,
    zone: str,
    observed: Observed,
    method: Method = SERVER_TO_SERVER,
) -> TransferRecord:
    """The record of one attempt towards the secondary `host` (or a client pull on its host)."""
    plan = ctx.plan
    secondary = next((h for h in plan.secondaries if h.name == host), plan.secondaries[0])
    extra = dict(observed.extra)
    if plan.is_fleet and secondary.name in ctx.rtt:
        extra["path_rtt_s"] = ctx.rtt[secondary.name]
    failed = observed.failure
    unchecked = observed.ok and bool(observed.extra.get(UNCHECKED))
    if failed is None and not (observed.ok and observed.verified) and not unchecked:
        failed = "unsupported" if observed.unsupported else "verification"
    if observed.ok and observed.verified and observed.duration_s is not None:
        failed = None
    return TransferRecord(
        run_id=ctx.run_id,
        case=plan.name,
        repeat=repeat,
        primary_kind=plan.primary.server.kind,
        secondary_kind=secondary.server.kind,
        host=secondary.name,
        site=secondary.site if plan.is_fleet else None,
        transport=plan.transport.name,
        xfr=plan.xfr,
        zone=zone,
        serial=observed.serial,
        records=observed.records,
        bytes=observed.bytes,
        messages=observed.messages,
        duration_s=observed.duration_s,
        started_at=observed.started_at,
        ok=observed.ok,
        error=observed.error,
        verified=observed.verified,
        trigger=plan.trigger,
        method=method,
        phases=observed.phases,
        server_logged=observed.server_logged,
        bound=observed.bound
        if observed.bound is not None
        else ({} if observed.unsupported else ctx.bound.get(secondary.name, {})),
        unsupported=observed.unsupported,
        failure=failed,
        duration_error_s=observed.duration_error_s,
        extra=extra,
    )


def failure(
    serial: int | None,
    error: str,
    started_at: float,
    *,
    kind: Failure,
    unsupported: bool = False,
) -> Observed:
    """An attempt that produced no figure, with its reason and the kind of failure."""
    return Observed(
        serial=serial,
        duration_s=None,
        started_at=started_at,
        ok=False,
        error=error,
        records=0,
        bytes=0,
        messages=0,
        unsupported=unsupported,
        failure="unsupported" if unsupported else kind,
    )
