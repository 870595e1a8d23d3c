"""The agent's measuring operations (a part of `remote.agent.Agent`): a client's pull
from this host, the primary's connections to its secondaries (the real path's
retransmits), this host's sockets through sock_diag (every TCP socket, the open
connections on a server's ports, a transfer's connection sampled), the bandwidth probe's
server, a cold start's zones polled and read back on this host, and a change stream's
serials followed here. Times they report are this
host's clock (unix seconds).
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from harness.core.stopping import stop_process
from harness.core.transport import Transport
from harness.measure.client_pull import pull_zone
from harness.measure.cold_start import polling_summary
from harness.observe.sockdiag import ConnectionCount, ConnectionWatch, tcp_sockets
from harness.remote.pathwatch import PathWatch
from harness.xfr import TsigKey, XfrError
from harness.xfr.follow import SerialFollower
from harness.xfr.poll_zones import ZonesTimeout, wait_for_zones
from harness.xfr.verify import verify_many


def proc_start(pid: int) -> int | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(text[text.rindex(")") + 2 :].split()[19])


def real_minus_mono() -> float:
    return time.time() - time.monotonic()


def counts(seen: Any) -> dict[str, Any]:
    """How a cold start's zones were polled (ZonesServed's counts, as JSON)."""
    names = ("rounds", "queries", "answers", "resends", "round_s")
    return {name: getattr(seen, name) for name in names}


class Measures:
    """The measuring half of the agent: its state, and the pid files it records for
    teardown (_pidfile), are the Agent's."""

    run_dir: Path
    spawned: dict[int, Any]  # pid -> Spawned (remote/agent_place.py)
    paths: PathWatch | None
    iperf: subprocess.Popen[Any] | None
    follower: SerialFollower | None  # a change stream's, while it runs
    watches: dict[int, ConnectionWatch]  # op_watch_start's, by id, until op_watch_stop

    # --- a cold start -------------------------------------------------------------------------

    def op_fresh(self, workdir: str) -> None:
        """A secondary's folder emptied: every zone configured, none on disk (a cold start
        starts from nothing, as the netns backend's does)."""
        folder = Path(workdir).resolve()
        if not folder.is_relative_to(self.run_dir.resolve()):
            raise XfrError(f"{folder} is not in this run's folder")
        shutil.rmtree(folder, ignore_errors=True)
        (folder / "zones").mkdir(parents=True)

    def op_wait_zones(
        self,
        name: str,
        address: str,
        zones: list[str],
        serial: int,
        timeout: float,
        max_rate: float,
        pid: int | None = None,
    ) -> dict[str, Any]:
        """Every zone of the secondary `name` (the process `pid` spawned) polled on this
        host until it serves `serial` (xfr/poll_zones.py), while it runs; when each was
        first served, and how it was polled."""
        running = None if pid is None else self.spawned.get(pid)

        def alive(done: int, total: int) -> None:
            status = running.proc.poll() if running is not None else -1
            if status is not None:
                raise XfrError(f"the {name} exited with status {status}")

        error = None
        try:
            seen = wait_for_zones(address, zones, serial, netns=None, timeout=timeout,
                                  since=time.monotonic(), max_rate=max_rate,
                                  between_rounds=alive)  # fmt: skip
        except ZonesTimeout as exc:
            seen, error = exc.result, str(exc)
        shift = real_minus_mono()
        return {
            "served": {zone: at + shift for zone, at in seen.served.items()},
            "unserved": {zone: at + shift for zone, at in seen.unserved.items()},
            "polling": polling_summary(seen),
            "counts": counts(seen),
            "error": error,
        }

    def op_verify_zones(self, zones: list[str], timeout: float) -> dict[str, dict[str, Any]]:
        """Many small zones read back from this host's secondary (xfr/verify.verify_many)."""
        copies = verify_many("127.0.0.1", zones, netns=None, timeout=timeout)
        return {zone: copy.to_dict() for zone, copy in copies.items()}

    # --- a client's pull ---------------------------------------------------------------------

    def op_pull(
        self,
        method: str,
        address: str,
        zone: str,
        transport: dict[str, Any],
        tsig: dict[str, str] | None,
        tls_ca: str | None,
        timeout: float,
    ) -> dict[str, Any]:
        """A client on this host pulls `zone` from `address` (AXFR) over `transport`
        (Transport.to_dict), with the harness's own reader or kdig, as the netns backend's
        pull does; times are this host's."""
        key = TsigKey(**tsig) if tsig else None
        ca = Path(tls_ca) if tls_ca else None
        return pull_zone(method, zone, address, None, Transport.from_dict(transport), tls_ca=ca,
                         tsig=key, timeout=timeout).to_dict()  # fmt: skip

    # --- the real path -----------------------------------------------------------------------

    def op_iperf_serve(self, address: str, port: int) -> int:
        """An iperf3 server for one test (the bandwidth probe), recorded for teardown; it
        exits after that test, or after 30 s without one."""
        self.op_iperf_stop()
        argv = ["iperf3", "-s", "-1", "-B", address, "-p", str(port), "--idle-timeout", "30"]
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
        self._pidfile("iperf3", {"name": "iperf3", "pid": proc.pid, "start": proc_start(proc.pid),
                                 "cgroup": []})  # fmt: skip
        self.iperf = proc
        time.sleep(0.2)  # listening
        if proc.poll() is not None:
            raise XfrError(f"iperf3 -s exited {proc.returncode} (is iperf3 installed?)")
        return proc.pid

    def op_iperf_stop(self) -> None:
        proc, self.iperf = self.iperf, None
        if proc is not None:
            stop_process(proc, 5)
        with contextlib.suppress(FileNotFoundError):
            (self.run_dir / "pids" / "iperf3.json").unlink()

    def op_paths_start(self, peers: list[str], port: int) -> None:
        """Watch this host's connections from `port` to `peers` (a repeat's transfers)."""
        if self.paths is None:
            self.paths = PathWatch(peers, port)

    def op_paths_stop(self) -> dict[str, Any]:
        """Per peer: segments sent, retransmitted, their share, the least RTT."""
        watch, self.paths = self.paths, None
        if watch is None:
            return {}
        counts = watch.counts()
        return counts | ({"error": watch.error} if watch.error else {})

    # --- this host's sockets (observe/sockdiag.py, run here) -----------------------------------

    def op_tcp_sockets(self) -> list[list[Any]]:
        """Every TCP socket of this host, without attributes (DiagSocket.to_json each)."""
        return [sock.to_json() for sock in tcp_sockets()]

    def op_open_connections(self, ports: list[int]) -> int:
        """TCP connections not LISTEN, TIME_WAIT or CLOSE with an end on one of `ports`."""
        with ConnectionCount(ports) as count:
            return count()

    def op_watch_start(self, address: str, port: int | None) -> int:
        """Sample tcp_info of this host's connections to (address, port) until
        op_watch_stop (a ConnectionWatch, dumping: the wire's candidates are the primary
        host's); its id."""
        watch = ConnectionWatch((address, port)).__enter__()
        self.watches[id(watch)] = watch
        return id(watch)

    def op_watch_stop(self, watch: int) -> dict[str, Any]:
        """Its peaks (connection_peaks) and why it stopped sampling, if it did."""
        found = self.watches.pop(watch, None)
        if found is None:
            return {"peaks": {}, "error": "no such watch"}
        found.__exit__(None, None, None)
        return {"peaks": found.peaks(), "error": found.error}

    def stop_watches(self) -> None:
        for watch in list(self.watches):
            self.op_watch_stop(watch)

    # --- a change stream ----------------------------------------------------------------------

    def op_follow_start(self, targets: dict[str, str], zone: str, interval: float) -> None:
        """Follow the serial of `zone` on this host's servers ({name: address}): one
        poller thread (xfr/follow.py), until op_follow_stop."""
        self.op_follow_stop()
        follower = SerialFollower({n: (a, None) for n, a in targets.items()}, zone,
                                  interval=interval)  # fmt: skip
        self.follower = follower.__enter__()

    def op_follow_expect(self, serial: int) -> None:
        if self.follower is not None:
            self.follower.expect(serial)

    def op_follow_take(self, timeout: float) -> dict[str, Any]:
        """The changes seen since the last call (waiting up to `timeout` for one), their
        times this host's unix time, and the queries sent so far."""
        assert self.follower is not None
        shift = real_minus_mono()
        changes = [
            [c.host, c.serial, c.at + shift, None if c.before is None else c.before + shift]
            for c in self.follower.take(timeout)
        ]
        return {"changes": changes, "queries": self.follower.queries()}

    def op_follow_stop(self) -> None:
        follower, self.follower = self.follower, None
        if follower is not None:
            follower.close()
