"""Which CPUs the harness and the servers run on: disjoint sets where the host has cores
enough, the same ones (said so) where it has not.

A benchmark whose driver competes with the servers it times measures itself too. With at
least ``MIN_CPUS`` CPUs the driver (and every tool and link emulator it starts) is held to
the first quarter of them by its CPU affinity, and each server to the rest by a cpuset
cgroup (harness.observe.cgroup); a server's affinity is set by the kernel when it joins its
cpuset group, so what it inherited from the driver does not hold it. With fewer CPUs, or no
cpuset controller to hold the servers, both share every CPU, and run.json says so and why.

``plan_placement`` decides (pure); ``apply_placement`` holds the driver to its set.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

MIN_CPUS = 4  # below this, a core of their own would leave the servers too few


@dataclass(frozen=True)
class CpuPlacement:
    isolation: str  # "disjoint" | "shared" | "remote" (the servers on other hosts)
    reason: str  # one line for run.json and the report
    online: list[int]  # the CPUs the driver was allowed when the run began
    harness: list[int] = field(default_factory=list)  # empty when shared
    servers: list[int] = field(default_factory=list)  # empty when shared
    method: str | None = None  # how servers are held: "cgroup-v1 cpuset", "cgroup-v2 cpuset"

    @property
    def server_cpus(self) -> str | None:
        """The servers' cpuset list ("1-3"), None when they share the driver's CPUs."""
        return cpu_text(self.servers) if self.isolation == "disjoint" else None

    def to_json(self) -> dict[str, Any]:
        return {
            "isolation": self.isolation,
            "reason": self.reason,
            "online": cpu_text(self.online),
            "harness": cpu_text(self.harness) if self.harness else None,
            "servers": cpu_text(self.servers) if self.servers else None,
            "method": self.method,
        }


def cpu_list(text: str) -> list[int]:
    """A kernel CPU list ("0-2,5") as numbers."""
    out: list[int] = []
    for part in text.strip().split(","):
        if not part:
            continue
        first, _, last = part.partition("-")
        out += range(int(first), int(last or first) + 1)
    return sorted(set(out))


def cpu_text(cpus: list[int]) -> str:
    """Numbers as a kernel CPU list: runs of consecutive CPUs as ranges."""
    runs: list[list[int]] = []
    for cpu in sorted(set(cpus)):
        if runs and cpu == runs[-1][1] + 1:
            runs[-1][1] = cpu
        else:
            runs.append([cpu, cpu])
    return ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs)


def plan_placement(online: list[int], layout_kind: str, cpuset_root: str | None) -> CpuPlacement:
    """Disjoint sets when there are ``MIN_CPUS`` CPUs or more and a cpuset controller: the
    harness gets the first quarter (at least one), the servers the rest."""
    cpus = sorted(online)
    count = len(cpus)
    if count < MIN_CPUS:
        reason = (
            f"{count} CPU{'s' if count != 1 else ''}, fewer than {MIN_CPUS}: the harness "
            "shared the servers' cores"
        )
        return CpuPlacement("shared", reason, cpus)
    if layout_kind == "proc" or cpuset_root is None:
        reason = (
            f"{count} CPUs, but no cpuset controller to hold the servers: the harness "
            "shared the servers' cores"
        )
        return CpuPlacement("shared", reason, cpus)
    own = max(1, count // 4)
    harness, servers = cpus[:own], cpus[own:]
    reason = f"{count} CPUs: the harness on {cpu_text(harness)}, the servers on {cpu_text(servers)}"
    method = f"cgroup-{layout_kind} cpuset"
    return CpuPlacement("disjoint", reason, cpus, harness, servers, method)


def online_cpus() -> list[int]:
    """The CPUs this process may run on (a container's or taskset's limits included)."""
    return sorted(os.sched_getaffinity(0))


def apply_placement(placement: CpuPlacement) -> None:
    """Hold every thread of the driver to the harness's CPUs (threads and processes it
    starts later inherit them). Shared: nothing to do."""
    if placement.isolation != "disjoint":
        return
    wanted = set(placement.harness)
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), wanted)
        except ProcessLookupError:  # a thread that ended meanwhile
            continue
