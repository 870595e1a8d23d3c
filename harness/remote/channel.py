"""The controller's end of an agent: an SSH channel to one host, requests and answers as
JSON lines, and the clock exchange that puts the host's times on the controller's clock.

    channel = open_channel(host, python="/usr/bin/python3", bundle=..., run_dir=..., tag=...)
    channel.call("wait_serials", timeout=30, targets={...}, zone="example.", ...)
    clock = channel.measure_clock()          # offset and its error, NTP-style

The channel is `ssh` with the inventory's connection variables (the same host, port, user,
key and options Ansible uses); the agent on the far end is started by it, and dies with it
(SIGHUP, or stdin closing), stopping whatever servers it still runs.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import subprocess
import threading
import time
from dataclasses import dataclass
from typing import Any

from harness.core.errors import EnvironmentProblem, XfrbenchError
from harness.core.stopping import stop_process
from harness.inventory import InventoryHost
from harness.observe.sockdiag import SockDiagRefused
from harness.xfr import XfrError, XfrTimeout

CLOCK_SAMPLES = 9
CALL_SLACK = 30.0  # seconds beyond a request's own timeout before the channel is called dead


class AgentError(XfrbenchError):
    """The agent could not do what it was asked (its own message, its host named)."""


@dataclass(frozen=True)
class ClockReading:
    """A host's clock against the controller's: host - controller (seconds), the bound of
    its error (half the round trip of the best exchange), when it was taken (controller
    unix time) and how (method)."""

    offset_s: float
    error_s: float
    rtt_s: float
    at: float
    samples: int
    method: str = "ntp-style over the ssh channel"

    def to_json(self) -> dict[str, Any]:
        return {
            "offset_s": round(self.offset_s, 7),
            "error_s": round(self.error_s, 7),
            "rtt_s": round(self.rtt_s, 7),
            "at": round(self.at, 3),
            "samples": self.samples,
            "method": self.method,
        }


def best_exchange(exchanges: list[tuple[float, float, float]]) -> ClockReading:
    """From (sent, host time, received) triples on the controller's clock, the offset of
    the exchange with the shortest round trip: the host read its clock somewhere between
    sent and received, so the offset is known to within half that round trip (pure)."""
    if not exchanges:
        raise ValueError("no clock exchange")
    sent, host, received = min(exchanges, key=lambda e: e[2] - e[0])
    rtt = received - sent
    return ClockReading(host - (sent + rtt / 2), rtt / 2, rtt, received, len(exchanges))


def agent_argv(python: str, bundle: str, run_dir: str, tag: str) -> list[str]:
    """The command that runs an agent with `python`, its modules from `bundle`."""
    return ["env", f"PYTHONPATH={bundle}", python, "-m", "harness.remote.agent", run_dir, tag]


class AgentChannel:
    """Requests to the agent that `argv` starts (over ssh: open_channel), answers back;
    `name` is its host's, for messages."""

    def __init__(self, name: str, argv: list[str]):
        self.name = name
        self.argv = argv
        self._ids = itertools.count(1)
        self._waiting: dict[int, tuple[threading.Event, list[dict[str, Any]]]] = {}
        self._lock = threading.Lock()
        self._write = threading.Lock()
        self._stderr: list[str] = []
        self._closed = False
        self.proc = subprocess.Popen(
            self.argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
            start_new_session=True,
        )
        threading.Thread(target=self._read, name=f"agent-{name}", daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                message = json.loads(line)
            except ValueError:
                self._stderr.append(line.strip())
                continue
            with self._lock:
                waiting = self._waiting.pop(int(message.get("id") or 0), None)
            if waiting is not None:
                waiting[1].append(message)
                waiting[0].set()
        self._closed = True
        with self._lock:
            for event, _ in self._waiting.values():
                event.set()

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._stderr.append(line.rstrip())
            del self._stderr[:-50]

    def stderr_tail(self) -> str:
        return " | ".join(line for line in self._stderr[-5:] if line)

    def call(self, op: str, *, wait: float = 60.0, **args: Any) -> Any:
        """The agent's answer to `op` (its arguments: `args`), waited for `wait` seconds
        and some slack; raises AgentError (XfrTimeout, XfrError for the agent's own)."""
        rid = next(self._ids)
        event, box = threading.Event(), []
        with self._lock:
            self._waiting[rid] = (event, box)
        text = json.dumps({"id": rid, "op": op, "args": args}, separators=(",", ":"))
        try:
            with self._write:
                assert self.proc.stdin is not None
                self.proc.stdin.write(text + "\n")
                self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            self._closed = True
        if not self._closed:
            event.wait(wait + CALL_SLACK)
        if not box:
            with self._lock:
                self._waiting.pop(rid, None)
            why = "closed" if self._closed else f"no answer within {wait + CALL_SLACK:g} s"
            raise AgentError(
                f"the agent on {self.name} ({op}): channel {why}: {self.stderr_tail()}"
            )
        message = box[0]
        if message.get("ok"):
            return message.get("result")
        error = f"{self.name}: {message.get('error')}"
        if message.get("type") in ("XfrTimeout",):
            raise XfrTimeout(error)
        if message.get("type") in ("XfrError",):
            raise XfrError(error)
        if message.get("type") == "SockDiagRefused":  # this host's kernel said no
            raise SockDiagRefused(error)
        raise AgentError(f"the agent on {error}")

    def measure_clock(self, samples: int = CLOCK_SAMPLES) -> ClockReading:
        exchanges = []
        for _ in range(samples):
            sent = time.time()
            host = float(self.call("time", wait=10))
            exchanges.append((sent, host, time.time()))
        return best_exchange(exchanges)

    def close(self) -> None:
        """Ask the agent to stop its servers and exit; then close the channel."""
        if self.proc.poll() is None:
            with contextlib.suppress(AgentError, XfrbenchError):
                self.call("shutdown", wait=30)
            with contextlib.suppress(OSError):
                assert self.proc.stdin is not None
                self.proc.stdin.close()
            stop_process(self.proc, 15, signalled=True)  # asked by "shutdown" and EOF


def open_channel(
    host: InventoryHost, *, python: str, bundle: str, run_dir: str, tag: str
) -> AgentChannel:
    channel = AgentChannel(host.name, host.ssh.argv(agent_argv(python, bundle, run_dir, tag)))
    try:
        channel.call("hello", wait=30)
    except AgentError as exc:
        channel.close()
        raise EnvironmentProblem(
            f"host {host.name}: the agent did not start over ssh ({exc})"
        ) from None
    return channel
