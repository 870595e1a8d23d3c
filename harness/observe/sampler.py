"""Samples the servers and the link into samples.jsonl: periodically and at transfer marks.

A daemon thread takes a sample every `interval` seconds while a case is watched; `mark()`
takes one at once, synchronously, at a transfer's start and end. After the start mark's
sample each server's cgroup starts a new charged-memory peak where the kernel allows it
(`Cgroup.reset_peak`): the end mark's line carries it as `transfer_charged_peak_bytes`,
the most memory charged to the server from its start mark to its end mark. Each sample is one JSON
line per server and per link direction (the shapes are in the module `harness.metrics`
docstring), appended and flushed as taken so that a run killed half-way keeps them. A
server that has exited is skipped; a reader that fails is reported once (a log warning and
`Sampler.errors`, for run.json) and never stops the run. Its samples are left out rather than
written half-filled: every line in the file has the contract's fields.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from harness.observe import procfs
from harness.observe.cgroup import Cgroup, CgroupUsage

log = logging.getLogger(__name__)

MARK_EVENTS = ("transfer-start", "transfer-end")
# The most of one core sampling may take, marks included, counted in CPU seconds of the
# threads that sample. A sample costs about 1-3 ms per server (a sock_diag dump walks the
# kernel's TCP hash table, shared by every namespace): a fleet of 100 would take half a
# core at one sample a second, so the interval stretches instead. The whole driver is held
# to 10 % of a run's wall (issue 22): sampling gets a fifth of that.
CPU_BUDGET = 0.02


@dataclass
class Target:
    role: str  # "primary" | "secondary"
    server: str  # its kind: "bind", "knot", "nsd", "pdns"
    pid: int
    cgroup: Cgroup | None = None
    host: str = ""  # the testbed host ("primary", "secondary", "seoul-1"); default: the role
    site: str = ""  # a secondary's site in a fleet

    @property
    def name(self) -> str:
        return self.host or self.role


def normalize_link_counters(counters: dict[str, Any]) -> dict[str, dict[str, int]]:
    """`Testbed.link_counters()` -> {direction: {"passed", "dropped"}} (cumulative packets).

    Shapes per direction: linkem {passed, dropped_loss, dropped_overflow, dropped_down, ...,
    state}; netem qdisc {packets, drops, ...}; either may carry "htb" (the rate limiter's
    class 1:1, which the
    packets leave last). With htb, passed is what left htb; dropped adds htb's drops to
    linkem's (linkem queues before htb). netem sits inside htb and its drops already
    include every drop htb counts for it, so they are not added twice. A direction with no
    counters (unimpaired, nothing emulated) is left out.
    """
    out: dict[str, dict[str, int]] = {}
    for direction, stats in counters.items():
        if not isinstance(stats, dict):
            continue
        htb = stats.get("htb") if isinstance(stats.get("htb"), dict) else None
        if "passed" in stats:  # linkem
            passed = int(stats["passed"])
            # Its random drops, queue overflows and, in faulted cases, the faults' drops.
            dropped = sum(int(v) for k, v in stats.items() if k.startswith("dropped_"))
            if htb and "packets" in htb:
                passed = int(htb["packets"])
                dropped += int(htb.get("drops", 0))
        elif "packets" in stats:  # netem qdisc
            passed, dropped = int(stats["packets"]), int(stats.get("drops", 0))
            if htb and "packets" in htb:
                passed = int(htb["packets"])
        elif htb and "packets" in htb:  # rate limit alone
            passed, dropped = int(htb["packets"]), int(htb.get("drops", 0))
        else:
            continue
        out[direction] = {"passed": passed, "dropped": dropped}
    return out


def server_sample(
    head: dict[str, Any], target: Target, usage: CgroupUsage, net: procfs.NetSnapshot
) -> dict[str, Any]:
    """One server line: the shared head, the target, CPU and memory, then the TCP figures;
    an end mark's line adds the transfer's charged peak where one was kept."""
    transfer_peak = usage.peak_since_reset_bytes
    if head.get("event") != "transfer-end" or transfer_peak is None:
        transfer = {}
    else:
        transfer = {"transfer_charged_peak_bytes": transfer_peak}
    return {
        **head,
        "role": target.role,
        "host": target.name,
        **({"site": target.site} if target.site else {}),
        "server": target.server,
        "pid": target.pid,
        "source": usage.source,
        "cpu_user_s": round(usage.cpu_user_s, 6),
        "cpu_system_s": round(usage.cpu_system_s, 6),
        "cpu_resolution_s": usage.cpu_resolution_s,
        "anon_bytes": usage.anon_bytes,
        "charged_bytes": usage.charged_bytes,
        "charged_peak_bytes": usage.charged_peak_bytes,
        **transfer,
        **net.fields(),
    }


def read_usage(target: Target) -> CgroupUsage:
    if target.cgroup is not None:
        return target.cgroup.read()
    tree = procfs.read_proc_tree(target.pid)
    return CgroupUsage(
        cpu_user_s=tree.cpu_user_s,
        cpu_system_s=tree.cpu_system_s,
        anon_bytes=tree.anon_bytes,
        charged_bytes=None,
        charged_peak_bytes=None,
        source="proc",
        cpu_resolution_s=tree.tick_s,
    )


@dataclass
class _Watch:
    case: str
    targets: list[Target]
    starts: dict[int, int | None]  # pid -> start time at watch(): a recycled pid is skipped
    link_counters: Callable[[], dict[str, Any]] | None
    port_ranges: dict[str, procfs.PortRange]
    repeat: int | None = None  # the transfer in progress, for periodic lines


class Sampler:
    """Context manager: opens `out` for appending and runs the sampling thread."""

    def __init__(
        self,
        out: Path,
        interval: float = 1.0,
        on_sample: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        if interval <= 0:
            raise ValueError(f"sampling interval must be positive, not {interval}")
        self.out = out
        self.interval = interval
        self.on_sample = on_sample
        self.errors: list[str] = []  # each distinct failure once
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._watch: _Watch | None = None
        self._file: IO[str] | None = None
        self._thread: threading.Thread | None = None
        self._cost: list[float] = []
        self.cpu_s = 0.0  # CPU seconds of every sample so far (marks included)
        self._cpu_unpaid = 0.0  # of which not yet paid for by a stretched interval
        self.longest_interval_s = interval  # the interval as stretched to keep to CPU_BUDGET

    # --- lifecycle --------------------------------------------------------------------

    def __enter__(self) -> Sampler:
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self._file = self.out.open("a", encoding="utf-8")
        self._thread = threading.Thread(target=self._loop, name="xfrbench-sampler", daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=max(5.0, 2 * self.interval))
            self._thread = None
        with self._lock:
            if self._file is not None:
                self._file.flush()
                os.fsync(self._file.fileno())
                self._file.close()
                self._file = None

    @property
    def sample_cost_s(self) -> float | None:
        """Median wall time of one full sample (all targets and the link), so far."""
        if not self._cost:
            return None
        ordered = sorted(self._cost)
        return ordered[len(ordered) // 2]

    # --- what to sample ---------------------------------------------------------------

    def watch(
        self,
        case: str,
        targets: list[Target],
        link_counters: Callable[[], dict[str, Any]] | None = None,
        port_ranges: dict[str, procfs.PortRange] | None = None,
    ) -> list[dict[str, Any]]:
        """Sample these targets under `case` from now on; takes a first sample at once
        (the case's start for its totals) and returns it."""
        ranges = dict(port_ranges or {})
        missing = sorted({t.name for t in targets} - set(ranges))
        if missing:
            raise ValueError(f"no ip_local_port_range given for {', '.join(missing)}")
        with self._lock:
            kept = {id(t.cgroup) for t in targets}
            for old in self._watch.targets if self._watch is not None else []:
                if old.cgroup is not None and id(old.cgroup) not in kept:
                    old.cgroup.stop_peak()
            self._watch = _Watch(
                case=case,
                targets=list(targets),
                starts={t.pid: procfs.start_time(t.pid) for t in targets},
                link_counters=link_counters,
                port_ranges=ranges,
            )
            return self._sample_locked("periodic")

    def unwatch(self) -> list[dict[str, Any]]:
        """A last sample (the case's end for its totals), then stop sampling; returns it."""
        with self._lock:
            lines = self._sample_locked("periodic") if self._watch else []
            for target in self._watch.targets if self._watch is not None else []:
                if target.cgroup is not None:
                    target.cgroup.stop_peak()
            self._watch = None
            return lines

    def mark(self, event: str, repeat: int) -> list[dict[str, Any]]:
        """Sample every target now for a transfer's start or end; returns the lines."""
        if event not in MARK_EVENTS:
            raise ValueError(f"mark event must be one of {MARK_EVENTS}, not {event!r}")
        with self._lock:
            if self._watch is None:
                return []
            self._watch.repeat = repeat
            lines = self._sample_locked(event)
            for target in self._watch.targets:
                if target.cgroup is None:
                    continue
                try:
                    if event == "transfer-start":
                        target.cgroup.reset_peak()  # after the sample: it holds the one before
                    else:
                        target.cgroup.stop_peak()
                except OSError as exc:
                    self._error(f"{target.name}'s memory peak", exc)
            if event == "transfer-end":
                self._watch.repeat = None
            return lines

    def record(self, lines: list[dict[str, Any]], passed_on: bool = True) -> None:
        """Lines sampled elsewhere (an agent on a remote host samples its own servers):
        written, and passed on like this sampler's own unless their host serves them."""
        with self._lock:
            self._write(lines, passed_on)

    def note(self, case: str, lines: list[dict[str, Any]]) -> None:
        """Write lines a flow observed itself (a stream's lag per secondary, role
        "stream") with the samples' head, in the same file and to the same callback."""
        with self._lock:
            repeat = self._watch.repeat if self._watch is not None else None
            head = {"t": round(time.time(), 6), "event": "note", "case": case, "repeat": repeat}
            self._write([{**head, **line} for line in lines])

    # --- sampling ---------------------------------------------------------------------

    def _loop(self) -> None:
        due = time.monotonic() + self.interval
        while not self._stop.wait(max(0.0, due - time.monotonic())):
            with self._lock:
                if self._watch is not None and self._file is not None:
                    self._sample_locked("periodic")
            # Keep to the grid, stretched so that sampling (marks included) stays within its
            # CPU budget; after a long stall skip the missed ticks instead of bursting.
            with self._lock:
                step = max(self.interval, self._cpu_unpaid / CPU_BUDGET)
                self._cpu_unpaid = 0.0
            self.longest_interval_s = max(self.longest_interval_s, step)
            due += step
            if due < time.monotonic():
                due = time.monotonic() + step

    def _sample_locked(self, event: str) -> list[dict[str, Any]]:
        watch = self._watch
        assert watch is not None
        began = time.perf_counter()
        cpu_began = time.thread_time()
        head = {"t": round(time.time(), 6), "event": event, "case": watch.case}
        head["repeat"] = watch.repeat
        lines: list[dict[str, Any]] = []
        nets: dict[tuple[int, procfs.PortRange], procfs.NetSnapshot] = {}
        for target in watch.targets:
            try:
                if procfs.start_time(target.pid) != watch.starts.get(target.pid):
                    continue  # exited (or its pid now names another process)
                # Servers sharing a namespace (compose, tests) share one read of its tables.
                key = (procfs.netns_inode(target.pid), watch.port_ranges[target.name])
                if key not in nets:
                    nets[key] = procfs.read_net(target.pid, key[1])
                net = nets[key]
                usage = read_usage(target)
            except procfs.ProcessGone:
                continue
            except Exception as exc:  # a sampler must never stop the run
                self._error(f"{target.name} ({target.server} pid {target.pid})", exc)
                continue
            lines.append(server_sample(head, target, usage, net))
        if watch.link_counters is not None:
            try:
                link = normalize_link_counters(watch.link_counters())
            except Exception as exc:
                self._error("link", exc)
            else:
                for name, counts in sorted(link.items()):
                    # "seoul-1 forward" is the forward direction of seoul-1's link.
                    host, _, direction = name.rpartition(" ")
                    where = {"host": host} if host else {}
                    lines.append(
                        {**head, "role": "link", "direction": direction, **where, **counts}
                    )
        self._write(lines)
        self._cost.append(time.perf_counter() - began)
        del self._cost[:-1000]
        cpu = time.thread_time() - cpu_began
        self.cpu_s += cpu
        self._cpu_unpaid += cpu
        return lines

    def _error(self, what: str, exc: Exception) -> None:
        message = f"sampling {what}: {type(exc).__name__}: {exc}"
        if message not in self.errors:
            self.errors.append(message)
            log.warning("%s (reported once)", message)

    def _write(self, lines: list[dict[str, Any]], passed_on: bool = True) -> None:
        if self._file is None:
            return
        for line in lines:
            self._file.write(json.dumps(line, separators=(",", ":")) + "\n")
        self._file.flush()
        if self.on_sample is not None and passed_on:
            for line in lines:
                try:
                    self.on_sample(line)
                except Exception as exc:  # an exporter bug must not stop sampling
                    self._error("on_sample callback", exc)
