"""Per-run compose projects for real: up, attach, route through the link, exec, down.

Needs root and Docker; the session fixture builds the images (see conftest.py).
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from harness.compose import daemon, deploy, project
from harness.core.errors import EnvironmentProblem
from harness.core.netns import socket_in
from harness.testbed import DEFAULT_BLOCK
from harness.testbed import registry as reg
from harness.testbed import topology as planning

pytestmark = [
    pytest.mark.root,
    pytest.mark.compose,
    pytest.mark.slow,
    # One dockerd and one session of images (conftest.py): the compose tests on one worker.
    pytest.mark.xdist_group("compose"),
]


def _spec(
    images: dict[str, str], shared: list[Path], mtus: dict[str, int] | None = None
) -> tuple[str, project.ProjectSpec]:
    """A plan on a slice no docker network holds, with a fresh testbed id."""
    testbed_id = secrets.token_hex(3)
    slice_ = planning.choose_slice(DEFAULT_BLOCK, testbed_id, deploy.docker_subnets())
    return testbed_id, project.plan_project(testbed_id, slice_, images, shared, mtus)


def spec_slice(spec: project.ProjectSpec) -> str:
    subnet = ipaddress.IPv4Network(spec.networks["primary"].subnet)
    return str(subnet.supernet())


def _ns_inode(pid: int, kind: str) -> int:
    return os.stat(f"/proc/{pid}/ns/{kind}").st_ino


def test_project_up_routes_exec_and_down(compose_images: dict[str, str], tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    testbed_id, spec = _spec(compose_images, [run_dir], mtus={"primary": 1400})
    names = {
        host: planning.netns_name(testbed_id, suffix)
        for host, suffix in (("primary", "p"), ("router", "r"), ("secondary", "s"))
    }
    names_by_service = {"primary": names["primary"], "link": names["router"]}
    names_by_service["secondary"] = names["secondary"]
    compose = deploy.ComposeProject(spec, tmp_path / "project")
    attached: list[str] = []
    sleeper: subprocess.Popen[bytes] | None = None
    with compose as deployment:
        assert deployment.project == f"xfb-{testbed_id}"
        assert set(deployment.containers) == set(project.SERVICES)
        for endpoint in project.ENDPOINTS:
            net = spec.networks[endpoint]
            segment = deployment.segment(endpoint)
            assert (segment.subnet, segment.link_address, segment.host_address) == (
                net.subnet,
                net.link_address,
                net.host_address,
            )
        for service in project.SERVICES:
            container = deployment.containers[service]
            assert container.running and container.pid > 1
            assert container.image == spec.images[service]
            # tini is PID 1: `down` ends the idle container at once.
            assert Path(f"/proc/{container.pid}/comm").read_text().strip() == "docker-init"
        try:
            for service, name in names_by_service.items():
                deploy.attach_netns(name, deployment.pid(service))
                attached.append(name)
            for service, argvs in deployment.route_argvs().items():
                for argv in argvs:
                    subprocess.run(["ip", "netns", "exec", names[service], *argv], check=True)
            interfaces = {
                service: deploy.interface_addresses(name)
                for service, name in names_by_service.items()
            }
            plan = deployment.topology_plan(testbed_id, DEFAULT_BLOCK, interfaces, names)
            assert plan.namespaces == names and plan.slice == spec_slice(spec)
            router_ifs = {seg.router_if for seg in plan.segments.values()}
            assert len(router_ifs) == 2
            for seg in plan.segments.values():
                host = names["primary" if seg.endpoint == "primary" else "secondary"]
                for netns, ifname in ((names["router"], seg.router_if), (host, seg.host_if)):
                    mtu = subprocess.run(
                        ["ip", "netns", "exec", netns, "cat", f"/sys/class/net/{ifname}/mtu"],
                        capture_output=True,
                        text=True,
                        check=True,
                    ).stdout.strip()
                    # The network's MTU option reaches both ends of the primary's segment.
                    assert mtu == ("1400" if seg.endpoint == "primary" else "1500"), netns

            # One hop: the packet went through the link container (TTL 64 -> 63).
            secondary_addr = spec.networks["secondary"].host_address
            ping = subprocess.run(
                [
                    "ip",
                    "netns",
                    "exec",
                    names["primary"],
                    "ping",
                    "-n",
                    "-c1",
                    "-w5",
                    secondary_addr,
                ],
                capture_output=True,
                text=True,
                check=False,
            )
            assert ping.returncode == 0, ping.stdout + ping.stderr
            assert re.search(r"ttl=63\b", ping.stdout), ping.stdout

            # The driver's sockets live in the attached namespaces: secondary listens,
            # primary connects, across the link.
            _tcp_roundtrip(names["secondary"], names["primary"], secondary_addr)

            # Tools run from the container's file system (Debian 13's servers here).
            pid = deployment.pid("primary")
            assert "BIND 9.20" in deploy.run_in(pid, ["named", "-v"]).stdout
            assert "3.4" in deploy.run_in(pid, ["knotd", "-V"]).stdout

            # The run folder is the same folder inside the endpoints, and only there.
            deploy.check_shared(pid, run_dir)
            deploy.check_shared(deployment.pid("secondary"), run_dir)
            with pytest.raises(EnvironmentProblem, match="not shared"):
                deploy.check_shared(deployment.pid("link"), run_dir)

            # A spawned process is in the container's namespaces, with our pid and cwd.
            sleeper = subprocess.Popen(
                project.nsenter_argv(pid, ["sleep", "60"], cwd=run_dir, die_with_parent=True),
                start_new_session=True,
            )
            _wait_for_exec(sleeper.pid, "sleep")
            for kind in ("mnt", "net", "uts", "ipc"):
                assert _ns_inode(sleeper.pid, kind) == _ns_inode(pid, kind), kind
            assert _ns_inode(sleeper.pid, "pid") == _ns_inode(os.getpid(), "pid")
            assert os.readlink(f"/proc/{sleeper.pid}/cwd") == str(run_dir)
            sleeper.send_signal(signal.SIGTERM)
            assert sleeper.wait(10) == -signal.SIGTERM
            _dies_with_its_parent(pid)
        finally:
            if sleeper is not None and sleeper.poll() is None:
                sleeper.kill()
                sleeper.wait(10)
            for name in attached:
                deploy.detach_netns(name)
    assert deploy.leftovers(spec.name) == []
    assert not any(Path("/run/netns", name).exists() for name in names.values())
    held = deploy.docker_subnets()
    assert not ({net.subnet for net in spec.networks.values()} & held)
    assert {"container", "network"} <= {item.split()[0] for item in compose.removed}


def _tcp_roundtrip(server_ns: str, client_ns: str, address: str) -> None:
    listener = socket_in(server_ns, socket.AF_INET, socket.SOCK_STREAM)
    listener.settimeout(10)
    got: list[bytes] = []
    try:
        listener.bind((address, 0))
        listener.listen(1)
        port = listener.getsockname()[1]

        def accept() -> None:
            conn, _ = listener.accept()
            with conn:
                got.append(conn.recv(64))

        thread = threading.Thread(target=accept)
        thread.start()
        client = socket_in(client_ns, socket.AF_INET, socket.SOCK_STREAM)
        client.settimeout(10)
        with client:
            client.connect((address, port))
            client.sendall(b"through the link")
        thread.join(10)
    finally:
        listener.close()
    assert got == [b"through the link"]


def _dies_with_its_parent(container_pid: int) -> None:
    """A server spawned with die_with_parent does not outlive a SIGKILLed driver."""
    spawn = "import subprocess, sys, time; print(subprocess.Popen(sys.argv[1:]).pid, flush=True)"
    argv = project.nsenter_argv(container_pid, ["sleep", "60"], die_with_parent=True)
    driver = subprocess.Popen(
        [sys.executable, "-c", spawn + "; time.sleep(60)", *argv],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert driver.stdout is not None
    child = int(driver.stdout.readline())
    _wait_for_exec(child, "sleep")
    driver.kill()
    driver.wait(10)
    for _ in range(500):
        if reg.proc_start_time(child) is None:  # gone, or a zombie awaiting its reaper
            return
        threading.Event().wait(0.01)
    os.kill(child, signal.SIGKILL)
    raise AssertionError(f"pid {child} outlived its parent")


def _wait_for_exec(pid: int, comm: str) -> None:
    for _ in range(200):
        with contextlib.suppress(FileNotFoundError):
            if Path(f"/proc/{pid}/comm").read_text().strip() == comm:
                return
        threading.Event().wait(0.01)
    raise AssertionError(f"pid {pid} never became {comm}")


def test_missing_image_fails_before_creating_anything(
    compose_images: dict[str, str], tmp_path: Path
) -> None:
    images = dict(compose_images, link="xfrbench/link:no-such-suite")
    _, spec = _spec(images, [])
    with (
        pytest.raises(EnvironmentProblem, match="no-such-suite.*not built"),
        deploy.ComposeProject(spec, tmp_path),
    ):
        pass
    assert deploy.leftovers(spec.name) == []


def test_down_without_the_compose_file_removes_by_label(
    compose_images: dict[str, str], tmp_path: Path
) -> None:
    """What `xfrbench clean` does after a killed driver whose run folder is gone."""
    _, spec = _spec(compose_images, [])
    compose = deploy.ComposeProject(spec, tmp_path)
    try:
        compose.up()
        compose.file.unlink()
        removed = deploy.down_project(spec.name, compose.file)
        assert sorted(item.split()[0] for item in removed) == ["container"] * 3 + ["network"] * 2
    finally:
        deploy.down_project(spec.name, None)
    assert deploy.leftovers(spec.name) == []
    assert (
        daemon.docker("ps", "-aq", "--filter", f"label=io.xfrbench.project={spec.name}").stdout
        == ""
    )
