"""An AXFR case sharing its primary with IXFR cases: the primary withholds IXFR where a
secondary cannot be told to ask AXFR only (Knot 3.2), and the case is unsupported where the
primary cannot (issue 18). Pure: plans and capabilities, no servers."""

from __future__ import annotations

from pathlib import Path

from harness import spec
from harness.measure.primary_ixfr import provides_ixfr
from harness.plan.case import CasePlan, plan_case, support_problem
from harness.servers import Nsd
from harness.servers.binaries import ServerBinary
from harness.servers.capabilities import Capabilities

VERSIONS = {"bind": "9.18.28", "knot": "3.2.6", "nsd": "4.6.1", "pdns": "4.7.3"}


def _case(tmp_path: Path, primary: str, secondary: str, xfr: str, kinds: str) -> CasePlan:
    """The `xfr` case of a scenario whose cases are of `kinds` (TCP only)."""
    path = tmp_path / "s.toml"
    path.write_text(
        f'repeats = 1\ntransports = ["tcp"]\nxfr = {kinds}\n'
        f'[servers.primary]\nkind = "{primary}"\n[servers.secondary]\nkind = "{secondary}"\n'
    )
    return next(plan_case(c) for c in spec.load(path).cases if c.xfr == xfr)


def _binaries(plan: CasePlan) -> dict[str, ServerBinary]:
    return {
        h.name: ServerBinary(h.server.kind, Path("/usr/sbin/x"), VERSIONS[h.server.kind])
        for h in plan.hosts
    }


def _caps(plan: CasePlan) -> dict[str, tuple[str, Capabilities]]:
    return {name: (f"{b.kind} {b.version}", b.capabilities) for name, b in _binaries(plan).items()}


def test_the_primary_withholds_ixfr_only_for_a_secondary_that_would_ask_it(
    tmp_path: Path,
) -> None:
    both = '["axfr", "ixfr"]'
    axfr = _case(tmp_path, "bind", "knot", "axfr", both)
    assert not provides_ixfr(axfr, _binaries(axfr))
    ixfr = _case(tmp_path, "bind", "knot", "ixfr", both)
    assert provides_ixfr(ixfr, _binaries(ixfr))
    # BIND, NSD and PowerDNS secondaries ask AXFR when told: nothing to withhold.
    for secondary in ("bind", "nsd", "pdns"):
        plan = _case(tmp_path, "bind", secondary, "axfr", both)
        assert provides_ixfr(plan, _binaries(plan)), secondary


def test_an_axfr_case_is_unsupported_where_the_primary_cannot_withhold_ixfr(
    tmp_path: Path,
) -> None:
    both = '["axfr", "ixfr"]'
    plan = _case(tmp_path, "nsd", "knot", "axfr", both)
    assert support_problem(plan, _caps(plan)) == (
        "secondary knot 3.2.6: Knot 3.2.6 cannot be told to ask AXFR only: it asks IXFR, "
        "and primary nsd 4.6.1: NSD 4.6.1 as a primary: no switch of IXFR off by reconfig "
        "was tried (AXFR beside IXFR cases)"
    )
    # Alone (no IXFR case keeps the primary providing IXFR), or with a primary that can.
    alone = _case(tmp_path, "nsd", "knot", "axfr", '["axfr"]')
    assert support_problem(alone, _caps(alone)) is None
    for primary in ("bind", "knot"):
        plan = _case(tmp_path, primary, "knot", "axfr", both)
        assert support_problem(plan, _caps(plan)) is None, primary
    assert Nsd.capabilities("4.6.1").axfr_only_secondary.ok
