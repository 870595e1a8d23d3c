"""Whether a scenario's largest case fits in this host's memory: a fleet of 64 BIND
secondaries of a 1 M-record zone needs about 32 GiB, and a run that finds out by the
kernel's OOM killer has wasted its hour. Each dialect states its footprint (base, bytes
per record, bytes per zone; servers/base.Footprint); a case needs the sum over its
servers, one group's servers being up at a time.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.core.errors import UserInputError
from harness.plan.case import CasePlan
from harness.servers import DIALECTS

HEADROOM = 0.85  # of the host's memory: the driver, the page cache of zone files, the kernel


@dataclass(frozen=True)
class MemoryNeed:
    case: str
    total_bytes: float
    per_secondary: dict[str, tuple[int, float]]  # kind -> (servers, bytes each)
    primary_bytes: float


def memory_need(plan: CasePlan) -> MemoryNeed:
    """About how much memory the servers of one case hold while they take its zones."""
    spec = plan.zone_spec
    records, zones = spec.records * spec.zones, spec.zones
    per: dict[str, tuple[int, float]] = {}
    for host in plan.secondaries:
        kind = host.server.kind
        count, _ = per.get(kind, (0, 0.0))
        per[kind] = (count + 1, DIALECTS[kind].footprint.bytes_for(records, zones))
    primary = DIALECTS[plan.primary.server.kind].footprint.bytes_for(records, zones)
    total = primary + sum(count * each for count, each in per.values())
    return MemoryNeed(plan.name, total, per, primary)


def check_memory(plans: list[CasePlan], memory_bytes: int, path: Path | str) -> None:
    """Refuse a scenario whose largest case needs more than this host can hold."""
    if not plans or memory_bytes <= 0:
        return
    need = max((memory_need(plan) for plan in plans), key=lambda n: n.total_bytes)
    allowed = memory_bytes * HEADROOM
    if need.total_bytes <= allowed:
        return
    gib = 2**30
    servers = ", ".join(
        f"{count} {kind} secondar{'y' if count == 1 else 'ies'} x ~{each / 2**20:,.0f} MiB"
        for kind, (count, each) in need.per_secondary.items()
    )
    fleet = any(count > 1 for count, _ in need.per_secondary.values())
    raise UserInputError(
        f"case {need.case} needs about {need.total_bytes / gib:.1f} GiB ({servers}, and the "
        f"primary ~{need.primary_bytes / 2**20:,.0f} MiB), more than {HEADROOM:.0%} of this "
        f"host's {memory_bytes / gib:.1f} GiB",
        file=path,
        key="secondaries" if fleet else "zones.records",
        fix="lower a site's count or the zone's records, or run on a host with more memory",
    )


def host_memory_bytes(meminfo: Path = Path("/proc/meminfo")) -> int:
    """MemTotal of this host (0 when it cannot be read: the check is then skipped)."""
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0
