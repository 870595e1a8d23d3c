"""The agent: the harness's own modules, run with a remote host's python3, answering the
controller over the SSH channel that started it (JSON lines on stdin and stdout).

    python3 -m harness.remote.agent RUN_DIR TAG      # started by remote/channel.py

On its host it executes what the controller's case engine asks (remote/agent_place.py:
spawn the argv it is given in a cgroup with a pid file under RUN_DIR/pids, signal, halt,
kill, put and remove files of the run's folder, run tools), and the probes that must run
next to a server: SOA polls (a secondary's served time is seen on its own host), the
primary's wire, copies read back (RRSUM), samples of the processes it spawned, the real
path's counts, its site's link (linkem). It decides nothing about a case. Times it reports
are this host's clock (unix seconds); the controller converts them with the offset it
measured.

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

from harness.metrics.exporter import Exporter
from harness.observe.procfs import parse_port_range
from harness.observe.sampler import Sampler, Target
from harness.remote.agent_link import LinkOps
from harness.remote.agent_measures import Measures, proc_start, real_minus_mono
from harness.remote.agent_place import Primitives, Spawned
from harness.remote.pathwatch import PathWatch
from harness.results.folder import SAMPLES
from harness.xfr import XfrTimeout
from harness.xfr.poll import wait_for_serials
from harness.xfr.verify import verify_copy
from harness.xfr.wire_watch import WireWatch


class Agent(Measures, LinkOps, Primitives):
    def __init__(self, run_dir: Path, tag: str, out: IO[str]) -> None:
        self.run_dir = run_dir
        self.tag = tag
        self.out = out
        self.lock = threading.Lock()
        self.spawned: dict[int, Spawned] = {}  # pid -> what op_spawn started
        self.wire: WireWatch | None = None
        self.sampler: Sampler | None = None
        self.lines: list[dict[str, Any]] = []  # sample lines not yet sent
        self.exporter: Exporter | None = None  # this host's samples, for the run's Prometheus
        self.paths: PathWatch | None = None  # the primary's connections during a repeat
        self.iperf: subprocess.Popen[Any] | None = None  # the bandwidth probe's server
        self.follower: Any = None  # a change stream's serial follower (op_follow_start)
        self.watches: dict[int, Any] = {}  # transfers' connections sampled (op_watch_start)
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

    # --- serials, copies, the wire -----------------------------------------------------------

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
        for t in targets:  # by the pid it spawned (op_spawn)
            running = self.spawned.get(t["pid"])
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
        self.op_follow_stop()
        self.stop_watches()
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
