"""Whether the primary provides IXFR in the selected case, and its switch when that changes.

A group's primary keeps IXFR history whenever one of its cases is an IXFR case. A secondary
that cannot be told to ask AXFR only (Knot 3.2: Capabilities.axfr_only_secondary) asks IXFR
in the group's AXFR cases too, and a primary that provides IXFR answers with one: measured,
that is an IXFR time in the AXFR row. In such an AXFR case the primary stops providing IXFR
(it answers the request with the whole zone), by its own reconfiguration; where its dialect
cannot (Capabilities.withholds_ixfr_primary), plan/case.py declares the case unsupported.
"""

from __future__ import annotations

from harness.measure.processes import RunningServer, put_config
from harness.plan.case import CasePlan
from harness.servers.binaries import ServerBinary


def provides_ixfr(case: CasePlan, binaries: dict[str, ServerBinary]) -> bool:
    """False in an AXFR case with a secondary that cannot be told to ask AXFR only."""
    return case.ixfr or all(
        binaries[host.name].capabilities.axfr_only_secondary.ok for host in case.secondaries
    )


def switch_primary(primary: RunningServer, provide: bool, timeout: float) -> bool:
    """Render the running primary to provide IXFR or not, and reconfigure it, when that
    changes (a primary without IXFR history has nothing to withhold). True: it switched."""
    setup = primary.server.setup
    if not setup.ixfr or setup.provide_ixfr == provide:
        return False
    setup.provide_ixfr = provide
    put_config(primary)
    primary.place.run(primary.server.reconfig_argv(), timeout=timeout)
    return True
