"""An agent-backed place (remote/place.py) over a real agent on this machine: the channel
runs `python -m harness.remote.agent` here instead of over ssh; the place's primitives
(put, read, remove, spawn, stop, kill, run) carried out by it, confined to its run's folder.
"""

from __future__ import annotations

import secrets
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import pytest

from harness.core.errors import ToolFailed
from harness.measure.cold_start import read_cold_start_log
from harness.observe.sockdiag import SockDiagRefused
from harness.remote.agent_sockets import AgentCount
from harness.remote.channel import AgentChannel, AgentError, ClockReading
from harness.remote.place import AgentPlaces, HostClock
from harness.servers import Bind

REPOSITORY = Path(__file__).resolve().parents[2]
FIXTURES = REPOSITORY / "tests" / "fixtures"


def dead(pid: int) -> bool:
    """Gone, or a zombie its new parent has not reaped yet."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat[stat.rindex(")") + 2] == "Z"


def agent_places(tmp_path: Path, offset_s: float | None = None) -> Iterator[AgentPlaces]:
    """A real agent on this machine; its clock read as `offset_s` ahead when given (a
    remote host's clock, as the channel would have measured it)."""
    run_dir = tmp_path / "host"
    argv = ["env", f"PYTHONPATH={REPOSITORY}", sys.executable, "-m", "harness.remote.agent",
            str(run_dir), secrets.token_hex(3)]  # fmt: skip
    channel = AgentChannel("h1", argv)
    channel.call("hello", wait=30)
    reading = channel.measure_clock(3)
    if offset_s is not None:
        reading = ClockReading(offset_s, 0.001, 0.002, time.time(), 1)
    try:
        yield AgentPlaces({"h1": ("127.0.0.1", channel, str(run_dir))}, lambda name: reading)
    finally:
        channel.close()


@pytest.fixture
def places(tmp_path: Path) -> Iterator[AgentPlaces]:
    yield from agent_places(tmp_path)


def test_files_are_put_read_and_removed_only_in_the_runs_folder(
    places: AgentPlaces, tmp_path: Path
) -> None:
    place = places.place("h1")
    conf = place.folder("primary", "server.conf")
    place.put(conf, b"listen: 127.0.0.1\n", mode=0o600)
    assert place.read(conf) == "listen: 127.0.0.1\n"
    assert conf.stat().st_mode & 0o777 == 0o600
    place.put(conf, b"x" * 9_000_000)  # more than one read's chunk
    assert len(place.read(conf)) == 9_000_000
    place.remove(place.folder("primary"))
    assert not conf.exists() and place.read(conf) == ""
    with pytest.raises(AgentError, match="not in this run's folder"):
        place.put(tmp_path / "elsewhere", b"no")
    assert not (tmp_path / "elsewhere").exists()


def test_a_spawned_process_is_recorded_stopped_and_its_output_kept(places: AgentPlaces) -> None:
    place = places.place("h1")
    workdir = place.folder("cases", "v1", "h1")
    proc = place.start(["sh", "-c", "echo started; exec sleep 60"], workdir=workdir)
    pidfiles = list(place.folder("pids").glob("h1-*.json"))
    assert len(pidfiles) == 1 and str(proc.pid) in pidfiles[0].read_text()
    assert proc.poll() is None
    deadline = time.monotonic() + 5
    while "started" not in place.read(workdir / "stdout.log") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert place.read(workdir / "stdout.log") == "started\n"
    assert place.stop(proc) == -15
    assert proc.poll() == -15
    assert not list(place.folder("pids").glob("h1-*.json"))
    assert dead(proc.pid)


def test_a_crash_kills_the_whole_tree_and_a_later_stop_keeps_its_status(
    places: AgentPlaces,
) -> None:
    place = places.place("h1")
    workdir = place.folder("cases", "v1", "h1")
    proc = place.start(["sh", "-c", "sleep 60 & sleep 60; wait"], workdir=workdir)
    deadline = time.monotonic() + 5
    children: list[int] = []
    while len(children) < 2 and time.monotonic() < deadline:
        children = [int(p) for p in Path(f"/proc/{proc.pid}/task/{proc.pid}/children")
                    .read_text().split()]  # fmt: skip
        time.sleep(0.02)
    killed = place.kill(proc)
    assert proc.pid in killed and set(children) <= set(killed)
    assert all(dead(pid) for pid in killed)
    assert place.stop(proc) == -9


def test_a_tools_status_and_output_and_a_failure_when_checked(places: AgentPlaces) -> None:
    place = places.place("h1")
    done = place.run(["sh", "-c", "echo out; echo err >&2; exit 3"], check=False)
    assert (done.returncode, done.stdout, done.stderr) == (3, "out\n", "err\n")
    with pytest.raises(ToolFailed, match="exited with 3"):
        place.run(["sh", "-c", "exit 3"])
    copy = place.folder("copy.txt")
    place.put(place.folder("x"), b"")  # the run's folder exists
    place.run(["echo", "a copy"], output=copy)
    assert place.read(copy) == "a copy\n"


def test_a_hosts_times_go_onto_the_controllers_clock_and_back() -> None:
    reading = ClockReading(offset_s=2.5, error_s=0.001, rtt_s=0.002, at=0.0, samples=1)
    clock = HostClock(lambda: reading)
    host_now = time.time() + 2.5
    assert abs(clock.to_bench(host_now) - time.monotonic()) < 0.01
    assert abs(clock.to_host(clock.to_bench(host_now)) - host_now) < 1e-5
    assert abs(clock.to_wall(host_now) - time.time()) < 0.01


def test_a_cold_starts_log_is_read_against_its_start_on_the_hosts_clock(tmp_path: Path) -> None:
    """A host 30 s ahead of the controller: its server's log stamps its own clock, so the
    engine's start time goes onto that clock (Place.host_time) before the log is read, as
    LiveCase.cold_start_log does; read against the controller's it would be 30 s off."""
    text = (FIXTURES / "bind_xfer.log").read_text()
    last = max(e.at_unix for e in Bind.parse_log(text) if e.direction == "in" and e.at_unix)
    started = last - 30.0 - 1.5  # the engine's unix time: 1.5 s before, on the host's clock
    for places in agent_places(tmp_path, offset_s=30.0):
        place = places.place("h1")
        log = place.folder("cases", "v1", "h1", "named.log")
        place.put(log, text.encode())
        assert place.host_time(started) == pytest.approx(last - 1.5)
        read = read_cold_start_log(Bind, place.read(log), place.host_time(started))
        assert read.last_transfer_s == 1.5
        assert read_cold_start_log(Bind, text, started).last_transfer_s == 31.5


def test_a_hosts_sockets_are_read_by_its_agent(places: AgentPlaces) -> None:
    """sock_diag run by the agent on its host (here, this machine's namespace): every TCP
    socket rebuilt as DiagSockets, the open connections on a server's port counted, and a
    connection's tcp_info sampled while a transfer-sized write crosses it."""
    place = places.place("h1")
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)) as client:
            accepted, _ = server.accept()
            with accepted:
                found = [s for s in place.tcp_sockets() if port in (s.sport, s.dport)]
                assert {(s.state_name, s.sport == port) for s in found} == {
                    ("listen", True), ("established", True), ("established", False),
                }  # fmt: skip
                with place.connection_count({port}) as count:
                    assert count() == 2  # both ends of the one connection
                with place.connection_watch(("127.0.0.1", port), None) as watch:
                    until = time.monotonic() + 0.5  # the watch samples every 20 ms
                    while time.monotonic() < until:
                        client.sendall(b"x" * 65536)
                        received = 0
                        while received < 65536:
                            received += len(accepted.recv(1 << 20))
                        time.sleep(0.02)
                peaks = watch.peaks()
                assert watch.error is None
                assert peaks["samples"] >= 1 and peaks["connections"] == 1, peaks
                assert peaks["bytes_acked"] > 0 and "rtt_ms_min" in peaks
    with place.connection_count({port}) as count:
        assert count() == 0


class _RefusingHost:
    """A channel to a host whose kernel refuses sock_diag: the agent's answer, as
    AgentChannel raises it (this machine's kernel does not refuse, so it is stood in)."""

    def call(self, op: str, **args: object) -> object:
        raise SockDiagRefused(f"{op}: sock_diag: Operation not permitted")


def test_a_count_on_a_host_that_refuses_sock_diag_raises_where_it_is_made() -> None:
    """As a local count does, so that settle leaves that host's connections uncounted
    (measure/quiet.py) rather than failing at its first look."""
    with pytest.raises(SockDiagRefused):
        AgentCount(cast(AgentChannel, _RefusingHost()), [53, 853])
