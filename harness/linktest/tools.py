"""Measuring a testbed's link: RTT (ping), loss each way (paced UDP flood), throughput (iperf3).

Parsers are pure functions; the measuring functions run the tools inside the testbed's
namespaces through Testbed.spawn/Host.run, so every process is registered for teardown.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from harness.core.errors import EnvironmentProblem, ToolFailed

if TYPE_CHECKING:
    from harness.testbed import Testbed

_PING_TIME = re.compile(r"icmp_seq=(\d+) .*time=([0-9.]+) ms")
_PING_SENT = re.compile(r"^(\d+) packets transmitted", re.MULTILINE)


# --- pure -------------------------------------------------------------------------------


@dataclass(frozen=True)
class RttSample:
    sent: int
    samples: int
    min_ms: float
    median_ms: float
    mean_ms: float
    max_ms: float
    stdev_ms: float


def parse_ping(stdout: str, sent: int) -> RttSample:
    """Per-reply times from `ping -n` output (duplicates of a sequence number counted once).

    `sent` is used only when the summary line is missing (ping -w sends until enough replies).
    """
    if summary := _PING_SENT.search(stdout):
        sent = int(summary[1])
    times: dict[int, float] = {}
    for match in _PING_TIME.finditer(stdout):
        times.setdefault(int(match[1]), float(match[2]))
    values = list(times.values())
    if not values:
        return RttSample(sent, 0, math.nan, math.nan, math.nan, math.nan, math.nan)
    return RttSample(
        sent=sent,
        samples=len(values),
        min_ms=min(values),
        median_ms=statistics.median(values),
        mean_ms=statistics.fmean(values),
        max_ms=max(values),
        stdev_ms=statistics.pstdev(values),
    )


def within(measured: float, configured: float, *, absolute: float, relative: float) -> bool:
    return abs(measured - configured) <= absolute + relative * abs(configured)


def flood_pps(rate_bps: int | None, size: int, *, ceiling: float = 20_000) -> float:
    """Packets per second for a loss probe: at most half a rate-limited link's capacity."""
    if not rate_bps:
        return ceiling
    frame_bits = 8 * (size + 8 + 20 + 14)  # UDP, IP, Ethernet headers
    return max(10.0, min(ceiling, 0.5 * rate_bps / frame_bits))


def parse_iperf3(report: dict[str, Any]) -> dict[str, Any]:
    """The figures we keep from `iperf3 -J` (client side, which also carries the receiver's)."""
    if "error" in report:
        raise ValueError(str(report["error"]))
    end = report.get("end", {})
    received = end.get("sum_received", {})
    sent = end.get("sum_sent", {})
    sender = (end.get("streams") or [{}])[0].get("sender", {})
    return {
        "throughput_bps": float(received.get("bits_per_second", 0.0)),
        "sender_bps": float(sent.get("bits_per_second", 0.0)),
        "bytes_received": int(received.get("bytes", 0)),
        "seconds": float(received.get("seconds", 0.0)),
        "retransmits": sent.get("retransmits"),
        "mean_rtt_ms": sender.get("mean_rtt", 0) / 1000 if sender.get("mean_rtt") else None,
        "max_snd_cwnd": sender.get("max_snd_cwnd"),
        "congestion": end.get("sender_tcp_congestion"),
    }


# --- measuring ---------------------------------------------------------------------------


def measure_rtt(bed: Testbed, count: int = 100, interval: float = 0.01) -> RttSample:
    rtt = _rtt_hint(bed)
    deadline = count * interval + 2 * rtt + 3
    result = bed.primary.run(
        [
            "ping",
            "-n",
            "-c",
            str(count),
            "-i",
            f"{interval:g}",
            "-s",
            "56",
            "-w",
            str(math.ceil(deadline)),
            bed.secondary.address,
        ],
        check=False,
        timeout=deadline + 10,
    )
    if result.returncode not in (0, 1):  # 1: some replies missing, which loss explains
        raise ToolFailed(["ping"], result.returncode, result.stderr)
    return parse_ping(result.stdout, count)


def _rtt_hint(bed: Testbed) -> float:
    link = bed.link
    return link.forward.delay + link.forward.jitter + link.reverse.delay + link.reverse.jitter


@dataclass(frozen=True)
class LossSample:
    sent: int
    received: int
    duplicates: int
    reordered: int

    @property
    def loss_percent(self) -> float:
        return 100.0 * (1 - self.received / self.sent) if self.sent else math.nan

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "loss_percent": self.loss_percent}


def _python_argv(module: str, *args: str) -> list[str]:
    return [sys.executable, "-m", module, *args]


def measure_loss(
    bed: Testbed, packets: int = 20_000, size: int = 64, port: int = 5301
) -> dict[str, LossSample]:
    """Both directions at once: a paced flood primary -> secondary and secondary -> primary."""
    rtt = _rtt_hint(bed)
    flows = {
        "forward": (bed.primary, bed.secondary, bed.link.forward.rate),
        "reverse": (bed.secondary, bed.primary, bed.link.reverse.rate),
    }
    receivers: dict[str, subprocess.Popen[str]] = {}
    senders: dict[str, subprocess.Popen[str]] = {}
    pps = {name: flood_pps(rate, size) for name, (_, _, rate) in flows.items()}
    longest = max(packets / rate for rate in pps.values())
    try:
        for name, (_, dst, _) in flows.items():
            proc = bed.spawn(
                dst,
                _python_argv(
                    "harness.linktest.flood",
                    "recv",
                    "--bind",
                    dst.address,
                    "--port",
                    str(port),
                    "--idle",
                    f"{max(1.0, 2 * rtt + 0.5):g}",
                    "--max-wait",
                    f"{longest + 4 * rtt + 30:g}",
                ),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            receivers[name] = proc
            line = proc.stdout.readline() if proc.stdout else ""
            if line.strip() != "ready":
                raise EnvironmentProblem(f"loss probe receiver did not start: {line!r}")
        for name, (src, dst, _) in flows.items():
            senders[name] = bed.spawn(
                src,
                _python_argv(
                    "harness.linktest.flood",
                    "send",
                    "--to",
                    dst.address,
                    "--port",
                    str(port),
                    "--count",
                    str(packets),
                    "--pps",
                    f"{pps[name]:g}",
                    "--size",
                    str(size),
                ),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        results: dict[str, LossSample] = {}
        for name in flows:
            sent = _json_result(senders[name], longest + 60)
            got = _json_result(receivers[name], longest + 4 * rtt + 60)
            results[name] = LossSample(
                sent["sent"], got["received"], got["duplicates"], got["reordered"]
            )
        return results
    finally:
        for proc in [*senders.values(), *receivers.values()]:
            bed.stop(proc, timeout=2)


def _json_result(proc: subprocess.Popen[Any], timeout: float) -> dict[str, Any]:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        raise EnvironmentProblem(f"a measuring process did not finish in {timeout:.0f} s") from None
    lines = [line for line in (out or "").splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise ToolFailed(["harness.linktest.flood"], proc.returncode or 1, err or "")
    return dict(json.loads(lines[-1]))


def iperf3_binary() -> str:
    found = shutil.which("iperf3")
    if not found:
        raise EnvironmentProblem("iperf3 is not installed; `apt-get install iperf3` (make setup)")
    return found


def measure_throughput(
    bed: Testbed,
    duration: float = 5.0,
    *,
    omit: int = 0,
    port: int = 5201,
    extra: list[str] | None = None,
) -> dict[str, Any]:
    """iperf3: server on the secondary, client on the primary sending (the way a zone goes)."""
    binary = iperf3_binary()
    server = bed.spawn(
        bed.secondary,
        [binary, "-s", "-1", "-B", bed.secondary.address, "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        _wait_listening(bed, port)
        rtt = _rtt_hint(bed)
        result = bed.primary.run(
            [
                binary,
                "-c",
                bed.secondary.address,
                "-p",
                str(port),
                "-J",
                "-t",
                f"{duration:g}",
                "-O",
                str(omit),
                *(extra or []),
            ],
            check=False,
            timeout=duration + omit + 20 * rtt + 60,
        )
        try:
            report = json.loads(result.stdout)
        except json.JSONDecodeError:
            raise ToolFailed(["iperf3"], result.returncode, result.stderr) from None
        try:
            return parse_iperf3(report)
        except ValueError as exc:
            raise ToolFailed(["iperf3"], result.returncode, str(exc)) from None
    finally:
        bed.stop(server, timeout=2)


def _wait_listening(bed: Testbed, port: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = bed.secondary.run(["ss", "-Hltn", f"sport = :{port}"], check=False).stdout
        if out.strip():
            return
        time.sleep(0.02)
    raise EnvironmentProblem(f"iperf3 server did not listen on port {port} within {timeout} s")
