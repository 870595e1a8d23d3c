"""A site's link on a secondary host (remote/hostlink.py): linkem's config and the NFQUEUE
rules that feed it, from a scenario written by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import spec
from harness.core.errors import UserInputError
from harness.remote.hostlink import add_argv, control_socket, delete_argv, host_link

SCENARIO = """
transports = ["tcp"]
xfr = ["axfr"]
[[secondaries]]
name = "near"
[[secondaries]]
name = "far"
[secondaries.link]
delay = "40ms"
[secondaries.link.reverse]
loss = "1%"
"""
# linkem's own packets (duplicates, forged resets: its mark, linkem/src/rawsock.rs) pass by.
LINKEMS_OWN = ["-m", "mark", "!", "--mark", "0x6c6b"]


def _sites(tmp_path: Path) -> dict[str, spec.LinkSpec]:
    (tmp_path / "s.toml").write_text(SCENARIO)
    scenario = spec.load(tmp_path / "s.toml").cases[0].scenario
    return {site.name: site.link for site in scenario.fleet}


def test_a_delayed_site_queues_both_directions_of_its_host_with_the_primary(
    tmp_path: Path,
) -> None:
    links = _sites(tmp_path)
    built = host_link("ns3", links["far"], "10.77.0.10", "case-a", "/var/tmp/x/r1/cases/v/ns3-link")
    assert built is not None
    config, rules = built
    # Named as the netns fleet names a site's directions, on this host's own queues.
    assert [(d["name"], d["queue"], d["delay_us"]) for d in config["directions"]] == [
        ("ns3 forward", 10, 40_000),
        ("ns3 reverse", 11, 40_000),
    ]
    assert config["directions"][1]["loss"] == {"model": "random", "p": 0.01, "correlation": 0.0}
    assert config["directions"][0]["loss"] == {"model": "none"}
    assert config["stats_path"] == "/var/tmp/x/r1/cases/v/ns3-link/linkem-stats.json"
    assert rules == [
        {"tool": "iptables", "table": "filter", "chain": "INPUT",
         "rule": ["-s", "10.77.0.10", *LINKEMS_OWN, "-j", "NFQUEUE", "--queue-num", "10"]},
        {"tool": "iptables", "table": "filter", "chain": "OUTPUT",
         "rule": ["-d", "10.77.0.10", *LINKEMS_OWN, "-j", "NFQUEUE", "--queue-num", "11"]},
    ]  # fmt: skip
    assert add_argv(rules[0])[:7] == ["iptables", "-w", "-t", "filter", "-I", "INPUT", "1"]
    assert delete_argv(rules[0])[:6] == ["iptables", "-w", "-t", "filter", "-D", "INPUT"]
    # Each host and case draws its own drops; the same ones again for the same pair.
    again = host_link("ns3", links["far"], "10.77.0.10", "case-a", "/f")
    other = host_link("ns4", links["far"], "10.77.0.10", "case-a", "/f")
    assert again is not None and other is not None
    assert again[0]["seed"] == config["seed"] != other[0]["seed"]


def test_an_unimpaired_site_runs_no_linkem_and_an_ipv6_primary_takes_ip6tables(
    tmp_path: Path,
) -> None:
    links = _sites(tmp_path)
    assert host_link("ns1", links["near"], "10.77.0.10", "case-a", "/f") is None
    built = host_link("ns3", links["far"], "2001:db8::10", "case-a", "/f")
    assert built is not None
    assert {rule["tool"] for rule in built[1]} == {"ip6tables"}


def test_a_host_taking_faults_queues_every_direction_with_headers_and_control(
    tmp_path: Path,
) -> None:
    """As the netns testbed of a faulted group: linkem on both ways of an unimpaired site
    too, reading headers (bytes, resets), its control socket in the host's run folder."""
    links = _sites(tmp_path)
    folder = "/var/tmp/xfrbench/r1/cases/v/ns1-link"
    control = control_socket("/var/tmp/xfrbench/r1")
    assert control == "/var/tmp/xfrbench/r1/ctl/linkem.sock"
    built = host_link("ns1", links["near"], "10.77.0.10", "case-a", folder, control)
    assert built is not None
    config, rules = built
    assert [(d["name"], d["delay_us"], d["inspect"]) for d in config["directions"]] == [
        ("ns1 forward", 0, True),
        ("ns1 reverse", 0, True),
    ]
    assert config["control_path"] == control
    assert [r["chain"] for r in rules] == ["INPUT", "OUTPUT"]
    assert all(r["rule"][2:7] == LINKEMS_OWN for r in rules)
    # Without faults the plain link's settings: no control, no headers read.
    plain = host_link("ns3", links["far"], "10.77.0.10", "case-a", folder)
    assert plain is not None and "control_path" not in plain[0]
    assert not any(d.get("inspect") for d in plain[0]["directions"])


def test_a_control_socket_too_deep_for_a_unix_socket_is_refused() -> None:
    with pytest.raises(UserInputError) as caught:
        control_socket("/srv/" + "x" * 100 + "/r1")
    assert "xfrbench_root" in str(caught.value)
