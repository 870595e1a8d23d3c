"""Case plans and the testbeds they describe, with one secondary and with three: names,
addresses, link directions, build commands and the teardown of what was built. No root."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from harness import spec
from harness.core.errors import EnvironmentProblem
from harness.core.transport import Transport
from harness.plan.case import (
    COMPOSE_VARIANTS,
    NETNS_VARIANTS,
    CasePlan,
    group_cases,
    plan_case,
    support_problem,
    supported_part,
)
from harness.servers import DIALECTS, Support
from harness.testbed import emulation, topology
from harness.testbed import registry as reg
from harness.testbed.hosts import netns_build_steps


def _plan(tmp_path: Path, text: str) -> CasePlan:
    path = tmp_path / "s.toml"
    path.write_text(text)
    return plan_case(spec.load(path).cases[0])


def _fleet(plan: CasePlan, count: int) -> CasePlan:
    first = plan.secondaries[0]
    hosts = tuple(
        dataclasses.replace(first, name=f"far-{i}", site="far") for i in range(1, count + 1)
    )
    return dataclasses.replace(plan, hosts=(plan.primary, *hosts))


def test_one_secondary(tmp_path: Path) -> None:
    plan = _plan(
        tmp_path,
        'repeats = 4\ntransports = ["xot-tsig"]\nxfr = ["ixfr"]\ntrigger = "notify"\n'
        '[zones]\npreset = "tiny"\nixfr_changes = 10\n'
        '[servers.secondary]\nkind = "knot"\n[link]\ndelay = "10ms"\n'
        "[hosts.secondary]\nsysctl = { 'net.ipv4.tcp_sack' = 0 }\n",
    )
    assert [(h.name, h.role, h.server.kind) for h in plan.hosts] == [
        ("primary", "primary", "bind"),
        ("secondary", "secondary", "knot"),
    ]
    assert plan.transport == Transport("xot-tsig", True, "hmac-sha256", 853)
    assert plan.ixfr and plan.notify
    assert plan.changes == 2  # a tiny zone has one NS to replace
    assert plan.transfers() == 4 and plan.methods == ("server-to-server",)
    primary, secondary = plan.endpoints()
    assert not primary.link.impaired and secondary.link.forward.delay == 0.010
    assert secondary.settings.sysctls() == {"net.ipv4.tcp_sack": "0"}


def test_support_problems_are_structured_reasons(tmp_path: Path) -> None:
    plan = _plan(tmp_path, 'transports = ["xot"]\n[servers.primary]\nkind = "knot"\n')

    def caps(kind: str, version: str) -> tuple[str, object]:
        return f"{kind} {version}", DIALECTS[kind].capabilities(version)  # type: ignore[index]

    servers = {"primary": caps("knot", "3.2.6"), "secondary": caps("bind", "9.18.49")}
    assert support_problem(plan, servers) == (  # type: ignore[arg-type]
        "primary knot 3.2.6: Knot 3.2.6 has no XoT (added in 3.4)"
    )
    servers["primary"] = caps("knot", "3.4.6")
    assert support_problem(plan, servers) is None  # type: ignore[arg-type]
    nsd = _plan(tmp_path, 'transports = ["xot"]\n[servers.primary]\nkind = "nsd"\n')
    reason = support_problem(
        nsd, {"primary": caps("nsd", "4.6.1"), "secondary": caps("bind", "9.18.49")}
    )  # type: ignore[arg-type]
    assert reason is not None and "ALPN" in reason
    assert DIALECTS["nsd"].capabilities("4.6.1").caveats  # the XoT IXFR hang of 4.6


def test_ixfr_of_a_signed_zone_needs_a_secondary_that_asks_it(tmp_path: Path) -> None:
    versions = Path(__file__).resolve().parents[2] / "zones/examples/own/versions"
    text = f'xfr = ["ixfr"]\n[zones]\nversions = "{versions}"\n[servers.secondary]\nkind = "pdns"\n'
    signed = _plan(tmp_path, text)
    assert signed.zone_spec.signed
    servers = {
        "primary": ("bind 9.18.49", DIALECTS["bind"].capabilities("9.18.49")),
        "secondary": ("pdns 4.7.3", DIALECTS["pdns"].capabilities("4.7.3")),
    }
    reason = support_problem(signed, servers)  # type: ignore[arg-type]
    assert reason is not None and reason.startswith("secondary pdns 4.7.3: ")
    assert "asks no IXFR for a zone with DNSSEC records" in reason
    # The same servers, an unsigned zone: IXFR it is.
    unsigned = _plan(tmp_path, 'xfr = ["ixfr"]\n[servers.secondary]\nkind = "pdns"\n')
    assert support_problem(unsigned, servers) is None  # type: ignore[arg-type]
    axfr = _plan(tmp_path, text.replace('"ixfr"', '"axfr"'))
    assert support_problem(axfr, servers) is None  # type: ignore[arg-type]
    # PowerDNS as the primary of a signed zone: not done, saying why.
    primary = _plan(tmp_path, text.replace("secondary]", "primary]").replace('"ixfr"', '"axfr"'))
    pdns_first = {"primary": servers["secondary"], "secondary": servers["primary"]}
    reason = support_problem(primary, pdns_first)  # type: ignore[arg-type]
    assert reason is not None and reason.startswith("primary pdns 4.7.3: ")
    assert "NSEC3s beside the chain it makes" in reason


def test_every_capability_a_case_needs_is_checked_in_both_roles(tmp_path: Path) -> None:
    plan = _plan(tmp_path, 'transports = ["tcp-tsig"]\nxfr = ["ixfr"]\n')
    able = DIALECTS["bind"].capabilities("9.18.49")
    servers = {"primary": ("bind 9.18.49", able), "secondary": ("bind 9.18.49", able)}
    assert support_problem(plan, servers) is None
    for field, reason in (("tsig", "no TSIG here"), ("ixfr_secondary", "asks for AXFR only")):
        unable = dataclasses.replace(able, **{field: Support(False, reason)})
        secondary = {**servers, "secondary": ("x 1.0.0", unable)}
        assert support_problem(plan, secondary) == f"secondary x 1.0.0: {reason}"
        assert reason in unable.notes
    no_tsig = dataclasses.replace(able, tsig=Support(False, "no TSIG here"))
    assert support_problem(plan, {**servers, "primary": ("x 1.0.0", no_tsig)}) == (
        "primary x 1.0.0: no TSIG here"
    )
    # Without TSIG and IXFR the same servers can run it.
    plain = _plan(tmp_path, 'transports = ["tcp"]\nxfr = ["axfr"]\n')
    unable = dataclasses.replace(able, tsig=Support(False, "t"), ixfr_secondary=Support(False, "i"))
    assert support_problem(plain, {"primary": ("b", able), "secondary": ("x", unable)}) is None


def test_a_fleet_case_runs_on_the_secondaries_that_can_take_it(tmp_path: Path) -> None:
    path = tmp_path / "f.toml"
    path.write_text(
        'transports = ["tcp", "xot"]\n'
        + "".join(f'[[secondaries]]\nname = "{k}"\nkind = "{k}"\n' for k in ("bind", "knot"))
    )
    tcp, xot = (plan_case(case) for case in spec.load(path).cases)
    servers = {
        "primary": ("bind 9.18.49", DIALECTS["bind"].capabilities("9.18.49")),
        "bind": ("bind 9.18.49", DIALECTS["bind"].capabilities("9.18.49")),
        "knot": ("knot 3.2.6", DIALECTS["knot"].capabilities("3.2.6")),
    }
    assert supported_part(tcp, servers) == (tcp, {})  # type: ignore[arg-type]
    part, reasons = supported_part(xot, servers)  # type: ignore[arg-type]
    assert part is not None and [h.name for h in part.secondaries] == ["bind"]
    assert reasons == {"knot": "secondary knot 3.2.6: Knot 3.2.6 has no XoT (added in 3.4)"}
    # Without the Knot secondary the XoT case needs a testbed of its own.
    assert [len(g.cases) for g in group_cases([tcp, part])] == [1, 1]
    # A primary that cannot: the whole case.
    servers["primary"] = ("knot 3.2.6", DIALECTS["knot"].capabilities("3.2.6"))
    assert supported_part(xot, servers) == (None, {})  # type: ignore[arg-type]


def test_one_primary_and_three_secondaries_build_and_tear_down(tmp_path: Path) -> None:
    plan = _fleet(_plan(tmp_path, '[link]\ndelay = "50ms"\nrate = "20mbit"\n'), 3)
    endpoints = plan.endpoints()
    assert plan.transfers() == 3 * 3
    topo = topology.plan_topology("0a1b2c", "198.18.0.0/15", "198.18.7.0/24", endpoints)
    assert topo.namespaces == {
        "primary": "xfb-0a1b2c-p",
        "far-1": "xfb-0a1b2c-s1",
        "far-2": "xfb-0a1b2c-s2",
        "far-3": "xfb-0a1b2c-s3",
        "router": "xfb-0a1b2c-r",
    }
    assert all(topology.NETNS_RE.match(name) for name in topo.namespaces.values())
    subnets = [seg.subnet for seg in topo.segments.values()]
    assert subnets == ["198.18.7.0/26", "198.18.7.64/26", "198.18.7.128/26", "198.18.7.192/26"]
    assert topo.address("far-3") == "198.18.7.194" and topo.address("router") == "198.18.7.1"

    # Every secondary's link has its own two directions; the reverse ones share the egress
    # towards the primary and are told apart by their source segment.
    found = emulation.directions(topo, endpoints)
    assert [d.name for d in found] == [
        f"far-{i} {way}" for i in (1, 2, 3) for way in ("forward", "reverse")
    ]
    reverse = [d for d in found if d.name.endswith("reverse")]
    assert {d.egress for d in reverse} == {"veth-p"}
    assert [d.source for d in reverse] == subnets[1:]
    placed = emulation.tc_commands(found, "linkem", emulation.link_rtt(endpoints))
    assert {place for place, _ in placed} == {"router"}
    tc = [argv for _, argv in placed]
    filters = [argv for argv in tc if argv[:3] == ["tc", "filter", "add"]]
    assert [argv[argv.index("src") + 1] for argv in filters] == subnets[1:]
    assert sum(1 for argv in tc if "root" in argv) == 4  # one per egress: 3 sites + primary
    queues = emulation.queue_numbers(found, every_direction=False)
    assert [q for _, q in queues] == [10, 11, 12, 13, 14, 15]

    # Build: every namespace recorded before it exists; teardown removes exactly those.
    mtus = dict.fromkeys(topo.segments, 1500)
    steps = netns_build_steps(topo, mtus)
    items = [step.item for step in steps if step.item is not None]
    assert [item["name"] for item in items] == [
        "xfb-0a1b2c-r",
        "xfb-0a1b2c-p",
        "xfb-0a1b2c-s1",
        "xfb-0a1b2c-s2",
        "xfb-0a1b2c-s3",
    ]
    veths = [s.argv for s in steps if "veth" in s.argv]
    assert len(veths) == 4 and all(argv[-1] == "xfb-0a1b2c-r" for argv in veths)
    routes = [s.argv for s in steps if "route" in s.argv]
    assert [argv[2] for argv in routes] == [
        "xfb-0a1b2c-p",
        *(f"xfb-0a1b2c-s{i}" for i in (1, 2, 3)),
    ]
    actions, notes = reg.plan_cleanup(items, lambda pid: None)
    assert [a.target for a in actions] == [item["name"] for item in reversed(items)]
    assert notes == []


def test_a_slice_grows_with_the_fleet_and_a_small_block_refuses_it() -> None:
    block = topology.parse_block("198.18.0.0/15")
    assert topology.slice_prefixlen(block, 2) == 24
    assert topology.slice_prefixlen(block, 64) == 24  # 64 /30 segments fill a /24
    assert topology.slice_prefixlen(block, 101) == 23
    assert topology.slice_prefixlen(block, 101, topology.COMPOSE_SEGMENT_PREFIXLEN) == 22
    with pytest.raises(ValueError, match="need more"):
        topology.slice_prefixlen(topology.parse_block("10.0.0.0/28"), 5)


def test_endpoint_names_are_checked() -> None:
    with pytest.raises(ValueError, match="exactly one primary"):
        topology.netns_suffixes([topology.Endpoint("a", "secondary")])
    twice = [topology.Endpoint("p", "primary"), topology.Endpoint("p", "secondary")]
    with pytest.raises(ValueError, match="unique"):
        topology.netns_suffixes(twice)


def test_the_primary_uplink_is_shaped_once_for_every_site(tmp_path: Path) -> None:
    text = (
        '[link]\ndelay = "20ms"\n[[secondaries]]\nname = "near"\ncount = 2\n'
        '[[secondaries]]\nname = "far"\nlink = { delay = "150ms", loss = "1%" }\n'
        '[uplink]\nrate = "50mbit"\ndelay = "1ms"\n'
    )
    plan = _plan(tmp_path, text)
    assert [(h.name, h.site) for h in plan.secondaries] == [
        ("near-1", "near"),
        ("near-2", "near"),
        ("far", "far"),
    ]
    endpoints = plan.endpoints()
    topo = topology.plan_topology("0a1b2c", "198.18.0.0/15", "198.18.7.0/24", endpoints)
    found = emulation.directions(topo, endpoints)
    up, down = found[-2:]
    assert (up.name, up.place, up.egress, up.hook) == (
        "uplink forward",
        "primary",
        "veth-r",
        "PREROUTING",
    )
    assert down.aggregate and down.egress == "veth-p" and down.hook == "POSTROUTING"
    # Longest site round trip (2 x 150 ms) plus the uplink's (2 x 1 ms).
    assert emulation.link_rtt(endpoints) == pytest.approx(0.302)
    placed = emulation.tc_commands(found, "linkem", emulation.link_rtt(endpoints))
    on_primary = [argv for place, argv in placed if place == "primary"]
    assert any("50000000bit" in argv for argv in on_primary)  # the uplink's rate, once
    towards_primary = [argv for place, argv in placed if place == "router" and "veth-p" in argv]
    top = next(a for a in towards_primary if "classid" in a and a[a.index("classid") + 1] == "1:1")
    assert top[top.index("ceil") + 1] == "50000000bit"  # caps every site's reverse class
    rules = {d.name: emulation.nfqueue_rule(d, q) for d, q in emulation.queue_numbers(found, False)}
    assert rules["uplink forward"][:2] == ("mangle", "PREROUTING")
    assert rules["uplink reverse"] == (
        "mangle", "POSTROUTING", ["-o", "veth-p", "-j", "NFQUEUE", "--queue-num", "17"]
    )  # fmt: skip
    assert rules["far forward"] == (
        "filter", "FORWARD",
        ["-i", "veth-p", "-o", "veth-s3", "-j", "NFQUEUE", "--queue-num", "14"],
    )  # fmt: skip
    with pytest.raises(EnvironmentProblem, match="linkem only"):
        lossy = dataclasses.replace(
            found[-1], spec=spec.DirectionSpec.model_validate({"delay": "5ms"})
        )
        emulation.tc_commands([*found[:-1], lossy], "netem", 0.3)


def test_server_variants_share_a_group_where_the_hosts_can_switch_them(tmp_path: Path) -> None:
    path = tmp_path / "ab.toml"
    path.write_text(
        'transports = ["tcp", "xot"]\n[servers.primary]\nkind = "bind"\n'
        "[matrix]\nservers.primary.options = [\n"
        '  { label = "many" },\n  { label = "one", transfer-format = "one-answer" },\n]\n'
    )
    plans = [plan_case(case) for case in spec.load(path).cases]
    assert len(plans) == 4
    both = group_cases(plans, NETNS_VARIANTS)
    assert [len(g.cases) for g in both] == [4]
    assert len({c.servers_key for c in both[0].cases}) == 2  # many-answers, one-answer
    assert plans[0].switch_key[1:] == ("tcp", "axfr", "")
    assert [len(g.cases) for g in group_cases(plans)] == [2, 2]  # an inventory: apart
    binaries = tmp_path / "b.toml"
    binaries.write_text(
        '[servers.secondary]\nkind = "bind"\n'
        '[matrix]\nservers.secondary.binary = ["/usr/sbin/named", "/opt/named"]\n'
    )
    plans = [plan_case(case) for case in spec.load(binaries).cases]
    assert [len(g.cases) for g in group_cases(plans, NETNS_VARIANTS)] == [2]
    assert [len(g.cases) for g in group_cases(plans, COMPOSE_VARIANTS)] == [1, 1]
