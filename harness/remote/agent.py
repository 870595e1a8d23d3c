"""The agent: the harness's own modules, run with a remote host's python3, answering the
controller over the SSH channel that started it (JSON lines on stdin and stdout).

    python3 -m harness.remote.agent RUN_DIR TAG      # started by remote/channel.py

On its host it does what the netns backend does inside a namespace: it renders and starts
the servers (a dialect each, in a cgroup of its own, pid files under RUN_DIR/pids), runs
their control tools, puts new serials on the primary, polls SOA serials (the secondary's
served time is seen on its own host), watches the primary's wire for NOTIFYs, reads a
copy back for verification (RRSUM), and samples its servers. Times it reports are this
host's clock (unix seconds); the controller converts them with the offset it measured.

Requests run on threads of their own, so a long wait for serials never holds the clock
exchange or the sampler's lines back. Nothing but answers goes to stdout.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import IO, Any

from harness.core.stopping import stop_process
from harness.core.transport import Transport
from harness.metrics.exporter import Exporter
from harness.observe.procfs import parse_port_range
from harness.observe.sampler import Sampler, Target
from harness.remote.agent_link import LinkOps
from harness.remote.agent_measures import Measures, proc_start, real_minus_mono
from harness.remote.agent_place import STOP_WAIT, Primitives, Spawned
from harness.remote.pathwatch import PathWatch
from harness.results.folder import SAMPLES
from harness.servers import Server, ServerSetup, ZoneEntry, make_server
from harness.servers.base import NewVersion, Reach
from harness.xfr import TsigKey, XfrError, XfrTimeout
from harness.xfr.poll import wait_for_serials
from harness.xfr.secrets import TlsFiles
from harness.xfr.update import query_soa, with_serial
from harness.xfr.verify import verify_copy
from harness.xfr.wire_watch import WireWatch
from harness.zonegen.model import ChangeSet


def setup_from(data: dict[str, Any]) -> ServerSetup:
    """A dialect's setup from the controller's JSON (paths are this host's)."""
    tsig = TsigKey(**data["tsig"]) if data.get("tsig") else None
    known = TsigKey(**data["tsig_known"]) if data.get("tsig_known") else None
    update = TsigKey(**data["update_key"]) if data.get("update_key") else None

    def tls_files(t: dict[str, str] | None) -> TlsFiles | None:
        if not t:
            return None
        return TlsFiles(Path(t["ca_cert"]), Path(t["cert"]), Path(t["key"]), t["hostname"])

    return ServerSetup(
        role=data["role"],
        address=data["address"],
        peers=tuple(data["peers"]),
        zones=[ZoneEntry(z["origin"], Path(z["file"])) for z in data["zones"]],
        workdir=Path(data["workdir"]),
        transport=Transport.from_dict(data["transport"]) if data.get("transport") else None,
        tsig=tsig,
        tsig_known=known,
        tsig_only=data.get("tsig_only", True),
        tls=tls_files(data.get("tls")),
        tls_known=tls_files(data.get("tls_known")),
        ixfr=data.get("ixfr", True),
        provide_ixfr=data.get("provide_ixfr", True),
        notify=data.get("notify", True),
        options=dict(data.get("options", {})),
        config=str(data.get("config", "")),
        signed=bool(data.get("signed", False)),
        update_key=update,
        control_socket=Path(data["control_socket"]) if data.get("control_socket") else None,
    )


class Running:
    def __init__(self, name: str, server: Server, proc: subprocess.Popen[Any], group: Any):
        self.name = name
        self.server = server
        self.proc = proc
        self.group = group


class Agent(Measures, LinkOps, Primitives):
    def __init__(self, run_dir: Path, tag: str, out: IO[str]) -> None:
        self.run_dir = run_dir
        self.tag = tag
        self.out = out
        self.lock = threading.Lock()
        self.servers: dict[str, Running] = {}  # what op_start rendered and started
        self.spawned: dict[int, Spawned] = {}  # pid -> what op_spawn started
        self.wire: WireWatch | None = None
        self.sampler: Sampler | None = None
        self.lines: list[dict[str, Any]] = []  # sample lines not yet sent
        self.exporter: Exporter | None = None  # this host's samples, for the run's Prometheus
        self.paths: PathWatch | None = None  # the primary's connections during a repeat
        self.iperf: subprocess.Popen[Any] | None = None  # the bandwidth probe's server
        (run_dir / "pids").mkdir(parents=True, exist_ok=True)
        # Itself too: after a killed controller, teardown.yml stops it (it stops its servers).
        self._pidfile("agent", {"name": "agent", "pid": os.getpid(),
                                "start": proc_start(os.getpid()), "cgroup": []})  # fmt: skip

    # --- the channel ----------------------------------------------------------------------

    def reply(self, message: dict[str, Any]) -> None:
        text = json.dumps(message, separators=(",", ":"))
        with self.lock:
            self.out.write(text + "\n")
            self.out.flush()

    def handle(self, request: dict[str, Any]) -> None:
        rid = request.get("id")
        try:
            op = getattr(self, "op_" + str(request["op"]))
            result = op(**request.get("args", {}))
            self.reply({"id": rid, "ok": True, "result": result})
        except Exception as exc:
            detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            self.reply({"id": rid, "ok": False, "error": detail, "type": type(exc).__name__})

    def serve(self, lines: IO[str]) -> None:
        for line in lines:
            if not line.strip():
                continue
            request = json.loads(line)
            if request.get("op") == "shutdown":
                self.shutdown()
                self.reply({"id": request.get("id"), "ok": True, "result": None})
                return
            threading.Thread(target=self.handle, args=(request,), daemon=True).start()
        self.shutdown()  # the controller went away: leave nothing running

    # --- clocks and facts -----------------------------------------------------------------

    def op_hello(self) -> dict[str, Any]:
        return {
            "pid": os.getpid(),
            "python": sys.version.split()[0],
            "netns": os.readlink("/proc/self/ns/net"),
            "time": time.time(),
        }

    def op_time(self) -> float:
        return time.time()

    def op_sysctls(self, keys: list[str]) -> dict[str, str]:
        out = {}
        for key in keys:
            with contextlib.suppress(OSError):
                out[key] = " ".join(Path("/proc/sys", *key.split(".")).read_text().split())
        return out

    def op_run(self, argv: list[str], timeout: float = 30.0) -> dict[str, Any]:
        """A tool of this host (a server's version flag, say): its status and output."""
        result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        return {"status": result.returncode, "output": result.stdout + result.stderr}

    def op_flush_metrics(self) -> None:
        """Forget cached route metrics (ssthresh, RTT) so that repeats start alike."""
        subprocess.run(["ip", "tcp_metrics", "flush"], capture_output=True, timeout=10)

    def op_ping(self, address: str, count: int = 5) -> dict[str, Any]:
        argv = ["ping", "-n", "-q", "-c", str(count), "-i", "0.2", "-w", "10", address]
        result = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        return {"status": result.returncode, "output": result.stdout.strip()}

    # --- files ----------------------------------------------------------------------------

    def op_read(self, path: str, offset: int = 0, limit: int = 8 << 20) -> dict[str, Any]:
        try:
            with open(path, "rb") as handle:
                handle.seek(offset)
                data = handle.read(limit)
        except FileNotFoundError:
            data = b""
        return {"data": base64.b64encode(data).decode(), "offset": offset + len(data)}

    # --- servers --------------------------------------------------------------------------

    def op_start(self, name: str, kind: str, binary: str, setup: dict[str, Any]) -> dict[str, Any]:
        server = make_server(kind, setup_from(setup), Path(binary))  # type: ignore[arg-type]
        for zone in server.setup.zones:
            zone.file.parent.mkdir(parents=True, exist_ok=True)
        # The control socket lives apart from the workdir (a unix socket's path is short):
        # Knot and NSD refuse to start when its folder is missing.
        server.setup.socket_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        server.render()
        spawned = self._spawn(name, server.argv(), server.setup.workdir)
        proc = spawned.proc
        self.servers[name] = Running(name, server, proc, spawned.group)
        return {"pid": proc.pid, "started_at": time.time(), "log": str(server.log_path),
                "workdir": str(server.setup.workdir), "argv": server.argv()}  # fmt: skip

    def _pidfile(self, name: str, record: dict[str, Any]) -> None:
        path = self.run_dir / "pids" / f"{name}.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(record))
        os.replace(tmp, path)

    def op_wait_listening(self, address: str, port: int, timeout: float) -> None:
        """Until something listens on address:port here (a primary's TLS listener)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                socket.create_connection((address, port), timeout=1.0).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise XfrTimeout(f"nothing listened on {address} port {port} "
                                     f"within {timeout:g} s") from None  # fmt: skip
                time.sleep(0.05)

    def op_alive(self, names: list[str]) -> dict[str, int | None]:
        return {n: self.servers[n].proc.poll() for n in names if n in self.servers}

    def op_stop(self, name: str) -> int | None:
        running = self.servers.pop(name, None)
        if running is None:
            return None
        proc = running.proc
        stop_process(proc, STOP_WAIT)
        self._forget(Spawned(name, proc, running.group))
        with contextlib.suppress(PermissionError):  # a control path outside the run's folder
            self.op_remove(str(running.server.control_path))
        return proc.returncode

    def _tool(self, argv: list[str], timeout: float) -> dict[str, Any]:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        if result.returncode != 0:
            raise XfrError(f"{argv[0]} exited {result.returncode}: {result.stderr.strip()[-400:]}")
        return {"stdout": result.stdout[-2000:]}

    def op_reconfig(self, name: str, setup: dict[str, Any], timeout: float) -> None:
        running = self.servers[name]
        fresh = setup_from(setup)
        fresh.control_socket = running.server.setup.control_socket
        running.server.setup = fresh
        running.server.render()
        self._tool(running.server.reconfig_argv(), timeout)

    def op_control(self, name: str, action: str, zone: str, timeout: float) -> None:
        server = self.servers[name].server
        argv = server.retransfer_argv(zone) if action == "retransfer" else server.refresh_argv(zone)
        self._tool(argv, timeout)

    def op_publish(
        self, name: str, zone: str, serial: int, change: dict[str, Any] | None, timeout: float
    ) -> dict[str, Any]:
        """The dialect's publish on this host, then the wait until the primary serves it."""
        server = self.servers[name].server
        address = server.setup.address
        soa = query_soa(address, zone, netns=None, timeout=timeout)
        changes = None
        if change is not None:
            changes = ChangeSet(**{k: Path(v) if k.endswith("_path") else v
                                   for k, v in change.items()})  # fmt: skip
        version = NewVersion(zone, with_serial(soa, serial), changes)
        reach = Reach(address, None, timeout, lambda argv: self._tool(argv, timeout))
        issued = time.time()
        method = server.publish(version, reach)
        seen = wait_for_serials({"p": (address, None)}, zone, serial,
                                deadline=time.monotonic() + timeout, interval=0.005)  # fmt: skip
        if "p" not in seen.served:
            raise XfrTimeout(f"timeout after {timeout:g} s: the primary never served {zone} "
                             f"serial {serial} ({method})")  # fmt: skip
        return {
            "issued": issued,
            "served": seen.served["p"] + real_minus_mono(),
            "method": method,
            "old_soa": soa.to_text(),
            "new_soa": version.soa.to_text(),
        }

    # --- serials, copies, the wire -----------------------------------------------------------

    def op_soa_serial(self, address: str, zone: str, timeout: float) -> int:
        (rdata,) = list(query_soa(address, zone, netns=None, timeout=timeout))
        return int(rdata.serial)

    def op_wait_serials(
        self, targets: dict[str, str], zone: str, serial: int, timeout: float, interval: float
    ) -> dict[str, Any]:
        seen = wait_for_serials(
            {name: (address, None) for name, address in targets.items()}, zone, serial,
            deadline=time.monotonic() + timeout, interval=interval,
        )  # fmt: skip
        shift = real_minus_mono()
        return {
            "served": {k: v + shift for k, v in seen.served.items()},
            "unserved": {k: v + shift for k, v in seen.unserved.items()},
            "max_gap_s": seen.max_gap_s,
        }

    def op_verify(self, zone: str, timeout: float) -> dict[str, Any]:
        copy = verify_copy("127.0.0.1", zone, netns=None, timeout=timeout)
        return {k: getattr(copy, k) for k in ("ok", "xfr", "zone", "error", "serial", "records",
                                              "bytes", "messages", "digest")}  # fmt: skip

    def op_wire_start(self, peers: list[str]) -> None:
        if self.wire is None:
            self.wire = WireWatch(None, peers).__enter__()  # type: ignore[arg-type]

    def op_wire_stop(self) -> None:
        if self.wire is not None:
            self.wire.__exit__(None, None, None)
            self.wire = None

    def op_wire_notify(
        self, serial: int, timeout: float, peer: str, since: float = 0.0
    ) -> float | None:
        """When the first NOTIFY for `serial` to `peer` left at or after `since` (this host's
        unix time, as the answer)."""
        assert self.wire is not None
        shift = real_minus_mono()
        at = self.wire.wait_notify(serial, timeout, peer, since=since - shift)
        return None if at is None else at + shift

    def op_wire_events(
        self, peer: str, since: float, until: float | None = None
    ) -> list[dict[str, Any]]:
        """What the primary's wire saw of `peer` between two times (this host's unix time;
        until None: up to now)."""
        assert self.wire is not None
        shift = real_minus_mono()
        events = self.wire.events(peer, since - shift, None if until is None else until - shift)
        return [{"at": e.at + shift, "kind": e.kind, "peer": e.peer, "serial": e.serial,
                 "port": e.port, "to_port": e.to_port} for e in events]  # fmt: skip

    def op_wire_last(self, kinds: list[str], peer: str | None = None) -> float | None:
        """When the latest event of one of `kinds` (of `peer`, or any) was seen."""
        assert self.wire is not None
        at = self.wire.last(kinds, peer)
        return None if at is None else at + real_minus_mono()

    def op_wire_forget(self, before: float) -> None:
        if self.wire is not None:
            self.wire.forget_before(before - real_minus_mono())

    # --- samples ----------------------------------------------------------------------------

    def op_metrics_serve(
        self, run_id: str, scenario: str, spec_hash: str, address: str, port: int
    ) -> int | None:
        """Serve this host's samples on http://ADDRESS:PORT/metrics (0: any free port),
        under the names and labels of the run's own exporter; returns the port."""
        if self.exporter is None:
            exporter = Exporter(run_id, scenario, spec_hash, port, address, run_info=False)
            self.exporter = exporter.__enter__()
        return self.exporter.port

    def _sampled(self, line: dict[str, Any]) -> None:
        self.lines.append(line)
        if self.exporter is not None:
            self.exporter.observe_sample(line)

    def op_sample_watch(
        self, case: str, targets: list[dict[str, Any]], interval: float
    ) -> list[dict[str, Any]]:
        if self.sampler is None:
            self.sampler = Sampler(self.run_dir / SAMPLES, interval, self._sampled)
            self.sampler.__enter__()
        chosen, ranges = [], {}
        port_range = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text()
        for t in targets:  # by the pid it spawned (op_spawn), or the name it started
            running = self.spawned.get(t["pid"]) if "pid" in t else self.servers.get(t["name"])
            if running is None or running.proc.poll() is not None:
                continue
            chosen.append(Target(t["role"], t["server"], running.proc.pid, running.group,
                                 t["host"], t.get("site", "")))  # fmt: skip
            ranges[t["host"]] = parse_port_range(port_range)
        self.sampler.watch(case, chosen, None, ranges)
        return self._take()

    def op_sample_mark(self, event: str, repeat: int) -> list[dict[str, Any]]:
        if self.sampler is not None:
            self.sampler.mark(event, repeat)
        return self._take()

    def op_sample_unwatch(self) -> list[dict[str, Any]]:
        if self.sampler is not None:
            self.sampler.unwatch()
        return self._take()

    def op_samples(self) -> list[dict[str, Any]]:
        return self._take()

    def _take(self) -> list[dict[str, Any]]:
        taken = self.lines[:]
        del self.lines[: len(taken)]
        return taken

    # --- the end ----------------------------------------------------------------------------

    def shutdown(self) -> None:
        with contextlib.suppress(Exception):
            self.op_link_stop()  # the rules first: without linkem they would drop packets
        for name in list(self.servers):
            with contextlib.suppress(Exception):
                self.op_stop(name)
        self.halt_spawned()
        if self.wire is not None:
            self.wire.__exit__(None, None, None)
            self.wire = None
        if self.sampler is not None:
            self.sampler.close()
            self.sampler = None
        if self.exporter is not None:
            self.exporter.close()
            self.exporter = None
        if self.paths is not None:
            self.paths.counts()
            self.paths = None
        self.op_iperf_stop()
        with contextlib.suppress(FileNotFoundError):
            (self.run_dir / "pids" / "agent.json").unlink()


def main(argv: list[str]) -> int:
    run_dir, tag = Path(argv[0]), argv[1]
    out = sys.stdout
    sys.stdout = sys.stderr  # a stray print must never corrupt the channel
    agent = Agent(run_dir, tag, out)
    signal.signal(signal.SIGTERM, lambda s, f: sys.exit(0))
    signal.signal(signal.SIGHUP, lambda s, f: sys.exit(0))  # the SSH channel closed
    try:
        agent.serve(sys.stdin)
    finally:
        agent.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
