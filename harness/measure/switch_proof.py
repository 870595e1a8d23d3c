"""A transport switch proven before it is measured.

After the harness switched running secondaries to the selected case's transport
(LiveCase.select: their reconfiguration, or a restart), one unrecorded update, like the
warm-up of protocol.prepare_updates, must reach every measured secondary (those not missing
since the visit's first copies, measure/measured.py) over the new transport as the wire and
the servers' logs show it (transport_seen.py). A switch that does not is the
harness's error: its slot is never measured, so no transfer result is blamed on the
transport (issue 18: an NSD switched to XoT by a reconfiguration it could not carry out
was recorded as 16 XoT timeouts). Pure against protocol.Bench.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.core.transport import Transport
from harness.measure.measured import Missing, measured
from harness.measure.protocol import START_TIMEOUT, Bench, PublishFailed, unrecorded_update
from harness.measure.transport_seen import TransportSeen
from harness.xfr import XfrTimeout


@dataclass(frozen=True)
class SwitchProof:
    serial: int  # the unrecorded serial that proved it (or failed to)
    seconds: float  # from the first wait to the last check, on the bench's clock
    seen: dict[str, TransportSeen] = field(default_factory=dict)  # host -> its evidence
    problems: dict[str, str] = field(default_factory=dict)  # host -> why not proven

    @property
    def ok(self) -> bool:
        return not self.problems

    def reason(self, transport: Transport) -> str:
        """Why the switch failed, in one line for the records."""
        why = "; ".join(f"{host}: {text}" for host, text in self.problems.items())
        return f"the switch to {transport} was not proven by serial {self.serial}: {why}"

    def for_host(self, host: str) -> dict[str, Any]:
        """What a record of `host` keeps of the proof."""
        seen = self.seen.get(host)
        return {
            "serial": self.serial,
            "seconds": round(self.seconds, 3),
            "seen": None if seen is None else seen.to_json(),
        }


def prove_switch(
    bench: Bench,
    serial: int,
    serving: int,
    restarted: list[str],
    missing: Mapping[str, Missing] | None = None,
    switched_at: float | None = None,
) -> SwitchProof:
    """Publish `serial` (the primary serves `serving` now) and wait for every measured
    secondary of the selected case (all but `missing`); each must have taken it over the
    case's transport. `restarted`: secondaries started again by the switch (at
    `switched_at`, the bench's clock), first given the time a start takes to serve
    `serving` (so that the NOTIFY of `serial` finds them up); a restarted secondary's
    connections count from its start: NSD, finding its copy on disk, checks the SOA at
    start over a connection it keeps, and takes `serial` on it."""
    plan = bench.plan
    missing = missing or {}
    zone = bench.first_zone
    hosts = measured([host.name for host in plan.secondaries], missing)
    restarted = measured(restarted, missing)
    start, since = bench.clock(), bench.wall()
    problems: dict[str, str] = {}
    if restarted:
        wait = START_TIMEOUT + plan.timeout
        back = bench.wait_served(restarted, zone, serving, bench.clock() + wait)
        for host in restarted:
            if host not in back:
                problems[host] = f"restarted, it did not serve serial {serving} within {wait:g} s"
    try:
        published, served = unrecorded_update(bench, serial, "the switch's serial", hosts)
    except XfrTimeout as exc:
        raise PublishFailed(str(exc)) from None
    seen: dict[str, TransportSeen] = {}
    for host in hosts:
        if host not in served:
            problems.setdefault(host, f"it did not serve serial {serial} within {plan.timeout:g} s")
            continue
        logged = bench.logged(host, zone, serial, since)
        opened = published.issued
        if host in restarted and switched_at is not None:
            opened = min(opened, switched_at)
        ports = bench.connect_ports(host, opened)  # to now: see update_repeat
        seen[host] = TransportSeen.of(ports, logged.primary, logged.secondary)
        problem = seen[host].unproven(plan.transport)
        if problem is not None:
            problems.setdefault(host, problem)
    return SwitchProof(serial, bench.clock() - start, seen, problems)
