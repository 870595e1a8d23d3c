"""A visit's start: the secondaries' first copies and one unrecorded warm-up update, and
which secondaries the visit then measures (measure/measured.py).

The warm-up absorbs what a first update and a first transfer after the first copies cost
once: the settle by evidence (measure/settle.py) waits out the limiters and the dump the
first copies left, but nothing before the trigger shows that a primary's first update is
slow. Measured without the warm-up on the 14 M-record tld (run tld-20261128T101750): the
first update took 19.2 s against 0.03 s for the next, and the first transfer 46.6 s
against 25-29 s; on quick.toml's small zones no repeat moved. Pure against protocol.Bench.
"""

from __future__ import annotations

from harness.measure.measured import (
    FIRST_COPY,
    WARMUP,
    Missing,
    NoneServed,
    Prepared,
    measured,
    missing_error,
)
from harness.measure.protocol import (
    START_TIMEOUT,
    Bench,
    secondary_names,
    timeout_text,
    unrecorded_update,
)


def prepare_updates(bench: Bench) -> Prepared:
    """Start the secondaries, wait up to the deadline for every first copy, and run one
    unrecorded warm-up update; returns the serial the warm-up published (the next repeat
    publishes +1) and the secondaries left out of the measured set, missing their first
    copy or the warm-up (measure/measured.py). NoneServed when no secondary served."""
    plan = bench.plan
    zone, hosts = bench.first_zone, secondary_names(plan)
    limit = START_TIMEOUT + plan.timeout
    with bench.spent.phase("first_copies"):
        bench.prepare_secondaries()
        since = bench.wall()  # their words are read from their start
        bench.start_secondaries()
        # Once one secondary served its copy, the servers are up and the zone travels: a
        # secondary still without it one transfer timeout later is missing, not awaited for
        # the whole start allowance (a host down from the start cost a fleet 140 s).
        first = bench.wait_served(
            hosts, zone, bench.base_serial, bench.clock() + limit, straggle=plan.timeout
        )
    missing = _left_out(
        bench, hosts, first, (FIRST_COPY, limit, bench.base_serial), since, plan.timeout
    )
    warmup = bench.base_serial + 1
    with bench.spent.phase("warmup"):
        _, served = unrecorded_update(bench, warmup, "the warm-up serial", measured(hosts, missing))
    waited = (WARMUP, plan.timeout, warmup)
    missing |= _left_out(bench, measured(hosts, missing), served, waited, since)
    return Prepared(warmup, missing)


def _left_out(
    bench: Bench,
    hosts: list[str],
    served: dict[str, float],
    waited: tuple[str, float, int],
    since: float,
    straggle: float | None = None,
) -> dict[str, Missing]:
    """The `hosts` that did not serve what was `waited` for (why, how long, the serial),
    missing from now on; NoneServed, in each one's words since `since`, when none did.
    `straggle`: the others were waited for this long after the first one served."""
    why, timeout, serial = waited
    zone = bench.first_zone
    gone = [host for host in hosts if host not in served]
    if gone and len(gone) == len(hosts):
        said = {host: bench.logged(host, zone, serial, since).server_logged() for host in gone}
        raise NoneServed(timeout_text(timeout, ", ".join(gone), zone, serial), said)
    out = {}
    for host in gone:
        text = timeout_text(timeout, host, zone, serial)
        if straggle is not None:
            text = (
                f"timeout {straggle:g} s after another secondary's copy: the {host} never "
                f"served {zone} serial {serial}"
            )
        out[host] = Missing(why, missing_error(why, text), since)
    return out
