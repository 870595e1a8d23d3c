"""The checked-in docker-compose.yml, as Compose itself reads it (v2, or Debian 12's 1.29).

No daemon needed: `compose config` resolves the file, its variables and their defaults.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from harness.compose import daemon, images, project
from harness.core.errors import EnvironmentProblem

pytestmark = [pytest.mark.compose]

REPO = Path(__file__).resolve().parents[2]
FILE = REPO / "docker-compose.yml"
PASSWORD = {"GRAFANA_ADMIN_PASSWORD": "not-a-real-password"}


def _cli() -> tuple[str, ...]:
    try:
        return daemon.compose_cli()
    except EnvironmentProblem as exc:
        pytest.skip(str(exc))


def _config(env: dict[str, str]) -> dict[str, Any]:
    """The resolved file as data: v2 prints JSON; 1.29 prints YAML, read with the PyYAML
    that docker-compose 1.29 itself runs on (Debian's python3-yaml)."""
    if _cli() == ("docker", "compose"):
        out = daemon.compose("xfbcheck", FILE, "config", "--format", "json", env=env)
        return dict(json.loads(out.stdout))
    out = daemon.compose("xfbcheck", FILE, "config", env=env)
    python = shutil.which("python3", path="/usr/bin")
    assert python, "docker-compose 1.29 runs on /usr/bin/python3"
    parsed = subprocess.run(
        [python, "-c", "import json, sys, yaml; print(json.dumps(yaml.safe_load(sys.stdin)))"],
        input=out.stdout,
        capture_output=True,
        text=True,
        check=True,
    )
    return dict(json.loads(parsed.stdout))


def _host_ips(ports: list[Any]) -> list[str]:
    """The host address of each published port, in either CLI's output form."""
    ips = []
    for port in ports:
        if isinstance(port, dict):
            ips.append(str(port.get("host_ip", "")))
        else:
            parts = str(port).split(":")
            ips.append(parts[0] if len(parts) == 3 else "")
    return ips


def test_the_file_resolves_with_its_defaults() -> None:
    config = _config(PASSWORD)
    services = config["services"]
    assert set(services) == {"primary", "secondary", "link", "driver", "prometheus", "grafana"}
    assert services["primary"]["image"] == images.server_tag("bookworm")
    assert services["secondary"]["image"] == images.server_tag("bookworm")
    assert services["link"]["image"] == images.link_tag("bookworm")
    assert services["driver"]["image"] == images.driver_tag()
    assert services["prometheus"]["image"] == images.prometheus_tag("bookworm")
    # Published ports only on loopback; the testbed's own services publish none.
    for name, service in services.items():
        ips = _host_ips(service.get("ports", []))
        assert all(ip == "127.0.0.1" for ip in ips), (name, service.get("ports"))
        if name in project.SERVICES or name == "driver":
            assert not ips, name
    env = services["grafana"]["environment"]
    assert env["GF_SECURITY_ADMIN_PASSWORD"] == PASSWORD["GRAFANA_ADMIN_PASSWORD"]


def test_the_testbed_hosts_match_what_discovery_expects() -> None:
    services = _config(PASSWORD)["services"]
    networks = {name: set(services[name]["networks"]) for name in project.SERVICES}
    assert networks == {"primary": {"net_p"}, "secondary": {"net_s"}, "link": {"net_p", "net_s"}}
    for name in project.SERVICES:
        assert services[name]["init"] is True
        assert services[name]["command"] == ["sleep", "infinity"]
    assert str(services["link"]["sysctls"]["net.ipv4.ip_forward"]) == "1"
    driver = services["driver"]
    assert driver["pid"] == "host" and not driver.get("privileged")
    assert {"SYS_ADMIN", "NET_ADMIN", "SYS_PTRACE"} <= set(driver["cap_add"])
    assert "networks" in driver and not set(driver["networks"]) & {"net_p", "net_s"}
    # The run folder and the control sockets: the same paths in the driver and the servers.
    shared = {_target(v) for v in driver["volumes"]}
    shared -= {"/var/run/docker.sock", "/opt/xfrbench/scenarios"}
    assert shared == {"/opt/xfrbench/results", "/run/xfrbench/ctl"}
    for name in project.ENDPOINTS:
        assert {_target(v) for v in services[name]["volumes"]} == shared


def _target(volume: Any) -> str:
    if isinstance(volume, dict):
        return str(volume["target"])
    return str(volume).split(":")[1]


def test_grafana_mounts_what_the_provisioning_files_name() -> None:
    grafana = _config(PASSWORD)["services"]["grafana"]
    targets = {_target(v) for v in grafana["volumes"]}
    assert "/etc/grafana/provisioning" in targets
    provider = (REPO / "dashboards" / "provisioning" / "dashboards").glob("*.y*ml")
    paths = {m for f in provider for m in re.findall(r"^\s*path:\s*(\S+)", f.read_text(), re.M)}
    assert paths and paths <= targets


def test_server_versions_are_picked_by_environment() -> None:
    env = PASSWORD | {"PRIMARY_SUITE": "trixie", "SECONDARY_SUITE": "bookworm-backports"}
    services = _config(env)["services"]
    assert services["primary"]["image"] == images.server_tag("trixie")
    assert services["secondary"]["image"] == images.server_tag("bookworm-backports")
    assert set(images.SERVER_VARIANTS) == {"bookworm", "bookworm-backports", "trixie"}


def test_grafana_refuses_to_start_without_a_password(monkeypatch: pytest.MonkeyPatch) -> None:
    _cli()
    monkeypatch.delenv("GRAFANA_ADMIN_PASSWORD", raising=False)
    result = daemon.compose("xfbcheck", FILE, "config", check=False)
    assert result.returncode != 0
    assert "GRAFANA_ADMIN_PASSWORD" in result.stderr
