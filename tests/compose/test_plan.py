"""The compose backend's pure parts: the project plan, its rendering, docker output parsers,
and the image catalog. No root and no Docker needed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.compose import images, project
from harness.core.errors import EnvironmentProblem, UserInputError

IMAGES = {"primary": "xfrbench/server:trixie", "secondary": "xfrbench/server:bookworm"}
IMAGES["link"] = "xfrbench/link:trixie"


def test_plan_uses_the_slice_halves_like_the_netns_testbed() -> None:
    spec = project.plan_project("0a1b2c", "198.18.5.0/24", IMAGES, [Path("/srv/run")])
    assert spec.name == "xfb-0a1b2c"
    p, s = spec.networks["primary"], spec.networks["secondary"]
    assert (p.name, p.subnet, p.link_address, p.host_address, p.gateway) == (
        "net_p",
        "198.18.5.0/25",
        "198.18.5.1",
        "198.18.5.2",
        "198.18.5.126",
    )
    assert (s.name, s.subnet, s.link_address, s.host_address, s.gateway) == (
        "net_s",
        "198.18.5.128/25",
        "198.18.5.129",
        "198.18.5.130",
        "198.18.5.254",
    )


def test_plan_rejects_bad_input() -> None:
    with pytest.raises(UserInputError, match="too small"):
        project.plan_project("0a1b2c", "198.18.5.0/29", IMAGES)
    with pytest.raises(ValueError, match="no image given for link"):
        project.plan_project("0a1b2c", "198.18.5.0/24", {"primary": "a", "secondary": "b"})
    with pytest.raises(ValueError, match="absolute"):
        project.plan_project("0a1b2c", "198.18.5.0/24", IMAGES, [Path("relative/run")])
    with pytest.raises(ValueError, match="testbed id"):
        project.plan_project("XYZ", "198.18.5.0/24", IMAGES)
    with pytest.raises(UserInputError, match="compose project name"):
        project.check_project_name("Bad Name")


def test_render_wires_two_networks_through_the_link() -> None:
    spec = project.plan_project(
        "0a1b2c",
        "198.18.5.0/24",
        IMAGES,
        [Path("/srv/run"), Path("/run/xfrbench/ctl")],
        {"secondary": 1280},
    )
    doc = project.render(spec)
    json.dumps(doc)  # JSON is what gets written, and JSON is YAML
    assert "version" not in doc  # read as the Compose Specification by v2 and 1.29
    services = doc["services"]
    assert set(services) == {"primary", "secondary", "link"}
    assert services["primary"]["networks"] == {"net_p": {"ipv4_address": "198.18.5.2"}}
    assert services["secondary"]["networks"] == {"net_s": {"ipv4_address": "198.18.5.130"}}
    assert services["link"]["networks"] == {
        "net_p": {"ipv4_address": "198.18.5.1"},
        "net_s": {"ipv4_address": "198.18.5.129"},
    }
    assert services["link"]["sysctls"]["net.ipv4.ip_forward"] == "1"
    assert "volumes" not in services["link"]  # only the endpoints see the run folder
    for endpoint in ("primary", "secondary"):
        assert services[endpoint]["volumes"] == [
            "/srv/run:/srv/run",
            "/run/xfrbench/ctl:/run/xfrbench/ctl",
        ]
    for service in services.values():
        assert service["init"] is True and service["command"] == ["sleep", "infinity"]
        assert "ports" not in service  # nothing published
    nets = doc["networks"]
    assert nets["net_p"]["ipam"]["config"] == [
        {"subnet": "198.18.5.0/25", "gateway": "198.18.5.126"}
    ]
    assert "driver_opts" not in nets["net_p"]
    assert nets["net_s"]["driver_opts"] == {"com.docker.network.driver.mtu": "1280"}


def test_nsenter_argv_keeps_the_command_last() -> None:
    assert project.nsenter_argv(42, ["named", "-v"]) == [
        "nsenter",
        "--target=42",
        "--mount",
        "--net",
        "--uts",
        "--ipc",
        "--",
        "named",
        "-v",
    ]
    argv = project.nsenter_argv(42, ["knotd"], cwd=Path("/srv/run"), die_with_parent=True)
    assert argv[:4] == ["setpriv", "--pdeathsig", "TERM", "--"]
    assert "--wd=/srv/run" in argv and argv[-2:] == ["--", "knotd"]


def _container(service: str, nets: dict[str, tuple[str, int]], **labels: str) -> dict:
    return {
        "Id": f"{service}0123456789abcdef",
        "Config": {
            "Image": f"img-{service}",
            "Labels": {project.LABEL_SERVICE: service, project.LABEL_PROJECT: "p", **labels},
        },
        "State": {"Running": True, "Pid": 100 + len(service)},
        "NetworkSettings": {
            "Networks": {
                name: {"IPAddress": addr, "IPPrefixLen": plen}
                for name, (addr, plen) in nets.items()
            }
        },
    }


NETWORKS = [
    {
        "Name": "p_net_p",
        "Labels": {project.LABEL_NETWORK: "net_p"},
        "IPAM": {"Config": [{"Subnet": "198.19.255.0/25", "Gateway": "198.19.255.126"}]},
    },
    {
        "Name": "p_net_s",
        "Labels": {project.LABEL_NETWORK: "net_s"},
        "IPAM": {"Config": [{"Subnet": "198.19.255.128/25"}, {"Subnet": "fd00::/64"}]},
    },
]


def _deployment() -> project.Deployment:
    names, subnets = project.parse_networks(NETWORKS)
    assert names == {"p_net_p": "net_p", "p_net_s": "net_s"}
    assert subnets == {"net_p": "198.19.255.0/25", "net_s": "198.19.255.128/25"}
    inspected = [
        _container("primary", {"p_net_p": ("198.19.255.2", 25)}),
        _container("secondary", {"p_net_s": ("198.19.255.130", 25)}),
        _container("link", {"p_net_p": ("198.19.255.1", 25), "p_net_s": ("198.19.255.129", 25)}),
        _container("primary", {}, **{project.LABEL_ONEOFF: "True"}),  # `compose run`: skipped
    ]
    return project.Deployment("p", project.parse_containers(inspected, names), subnets)


def test_discovered_deployment_gives_segments_and_routes() -> None:
    deployment = _deployment()
    assert deployment.pid("primary") == 107
    seg = deployment.segment("secondary")
    assert (seg.network, seg.subnet, seg.link_address, seg.host_address) == (
        "net_s",
        "198.19.255.128/25",
        "198.19.255.129",
        "198.19.255.130",
    )
    assert deployment.route_argvs() == {
        "primary": [["ip", "route", "replace", "198.19.255.128/25", "via", "198.19.255.1"]],
        "secondary": [["ip", "route", "replace", "198.19.255.0/25", "via", "198.19.255.129"]],
    }
    assert deployment.describe()["containers"]["link"]["addresses"] == {
        "net_p": "198.19.255.1/25",
        "net_s": "198.19.255.129/25",
    }


def test_topology_plan_for_the_netns_testbed_code() -> None:
    deployment = _deployment()
    interfaces = {
        "link": {"198.19.255.1": "eth1", "198.19.255.129": "eth0"},
        "primary": {"198.19.255.2": "eth0"},
        "secondary": {"198.19.255.130": "eth0"},
    }
    names = {"primary": "xfb-0a1b2c-p", "router": "xfb-0a1b2c-r", "secondary": "xfb-0a1b2c-s"}
    plan = deployment.topology_plan("0a1b2c", "198.18.0.0/15", interfaces, names)
    assert plan.slice == "198.19.255.0/24"
    assert plan.namespaces == {
        "primary": "xfb-0a1b2c-p",
        "router": "xfb-0a1b2c-r",
        "secondary": "xfb-0a1b2c-s",
    }
    assert plan.address("router") == "198.19.255.1"
    assert plan.address("secondary") == "198.19.255.130"
    seg = plan.segments["primary"]
    assert (seg.router_if, seg.host_if, seg.subnet) == ("eth1", "eth0", "198.19.255.0/25")
    assert plan.segments["secondary"].router_if == "eth0"
    with pytest.raises(EnvironmentProblem, match="no interface holds 198.19.255.130"):
        deployment.topology_plan("0a1b2c", "198.18.0.0/15", interfaces | {"secondary": {}}, names)


def test_an_endpoint_must_share_exactly_one_network_with_the_link() -> None:
    deployment = _deployment()
    lonely = project.Container("primary", "x", 1, "img", True, {"other": ("10.9.9.9", 24)})
    broken = project.Deployment("p", deployment.containers | {"primary": lonely})
    with pytest.raises(EnvironmentProblem, match="shares 0 networks"):
        broken.segment("primary")


def test_two_containers_for_one_service_are_refused() -> None:
    twice = [_container("link", {}), _container("link", {})]
    with pytest.raises(EnvironmentProblem, match="more than one container"):
        project.parse_containers(twice, {})


def test_parse_ip_addr() -> None:
    text = json.dumps(
        [
            {"ifname": "lo", "addr_info": [{"family": "inet", "local": "127.0.0.1"}]},
            {"ifname": "eth1", "addr_info": [{"family": "inet", "local": "198.19.255.129"}]},
            {"ifname": "eth0", "addr_info": [{"family": "inet6", "local": "fe80::1"}]},
        ]
    )
    assert project.parse_ip_addr(text) == {"127.0.0.1": "lo", "198.19.255.129": "eth1"}


def test_base_image_files_and_sources() -> None:
    sources = images.apt_sources("trixie", "http://m/debian", "http://m/debian-security")
    assert sources.splitlines() == [
        "deb http://m/debian trixie main",
        "deb http://m/debian trixie-updates main",
        "deb http://m/debian-security trixie-security main",
        "deb http://m/debian trixie-backports main",
    ]
    files = images.base_files("trixie", "http://m/debian", "http://m/debian-security")
    assert files["usr/sbin/policy-rc.d"] == ("#!/bin/sh\nexit 101\n", 0o755)
    assert f"{images.BASE_LABEL}={images.BASE_FORMAT}" in " ".join(images.import_changes("trixie"))


def test_image_plan_needs_each_base_once() -> None:
    plan = images.ImagePlan(
        servers=("bookworm-backports", "trixie", "bookworm"),
        link_suite="trixie",
        prometheus_suite="bookworm",
        driver=True,
    )
    assert plan.suites() == ["bookworm", "trixie"]
    assert images.ImagePlan(servers=("trixie",), link_suite="trixie").suites() == ["trixie"]
    with pytest.raises(UserInputError, match="unknown server image variant"):
        images.ImagePlan(servers=("sid",)).suites()
    with pytest.raises(UserInputError, match="unknown Debian suite"):
        images.ImagePlan(servers=(), link_suite="buster").suites()


def test_every_dockerfile_builds_from_a_local_base() -> None:
    for path in sorted(images.DOCKER_DIR.glob("Dockerfile.*")):
        text = path.read_text()
        assert "FROM xfrbench/debian:${BASE_SUITE}" in text, path.name
        assert "ARG BASE_SUITE" in text, path.name
