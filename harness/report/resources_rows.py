"""The report's resources table: summary["resources"] (results/resources.py, per case and
per server) as rows, a fleet's by host and site."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.core.terms import ROLES as SERVER_ROLES


@dataclass
class RoleResources:
    role: str
    cpu_user_s_per_transfer: float | None
    cpu_system_s_per_transfer: float | None
    cpu_total_s_per_transfer: float | None
    cpu_s_total: float | None
    anon_peak_bytes: int | None  # sampled in the case (harness.results.resources)
    charged_peak_bytes: int | None  # page cache included, since the server started
    namespace_time_wait_peak: int | None  # the whole namespace's, no transfer's
    peak_ephemeral_ports: int | None
    retrans_segs: int | None
    tcp_timeouts: int | None
    # Medians over the case's transfers (harness.results.resources per_transfer); None
    # in runs from before they were recorded.
    memory_peak_per_transfer_bytes: int | None = None
    charged_peak_per_transfer_bytes: int | None = None
    connections_per_transfer: float | None = None
    time_wait_left_per_transfer: float | None = None
    harness_connections_per_transfer: float | None = None


@dataclass
class CaseResources:
    case: str
    roles: dict[str, RoleResources]  # row label ("primary", "secondary ns1, near") -> figures
    link: dict[str, dict[str, int]]  # direction -> {"passed": n, "dropped": n}


def as_float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def as_int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value)


def _resource_rows(by_host: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """(row label, role, figures) of a case's servers: a 1+1 case's are keyed by role; a
    fleet's by host, with their role and site among their figures ("secondary ns1, near":
    an inventory's primary is not called "primary"), primary first."""
    rows = []
    for key, figures in by_host.items():
        if not isinstance(figures, dict) or key == "link":
            continue
        role = key if key in SERVER_ROLES else figures.get("role")
        if role not in SERVER_ROLES:
            continue
        site = figures.get("site")
        label = key if key == role else f"{role} {key}" + (f", {site}" if site else "")
        rows.append((label, str(role), figures))
    rows.sort(key=lambda row: SERVER_ROLES.index(row[1]))  # stable: the hosts' order
    return rows


def case_resources(resources: dict[str, Any]) -> list[CaseResources]:
    """summary["resources"] (the contract's per-case resource summary) as dataclasses; a key
    that is missing or not a number becomes None rather than an error."""
    out = []
    for case, by_role in resources.items():
        if not isinstance(by_role, dict):
            continue
        roles = {}
        for label, role, figures in _resource_rows(by_role):
            cpu = figures.get("cpu_s_per_transfer")
            cpu = cpu if isinstance(cpu, dict) else {}
            roles[label] = RoleResources(
                role=role,
                cpu_user_s_per_transfer=as_float(cpu.get("user")),
                cpu_system_s_per_transfer=as_float(cpu.get("system")),
                cpu_total_s_per_transfer=as_float(cpu.get("total")),
                cpu_s_total=as_float(figures.get("cpu_s_total")),
                anon_peak_bytes=as_int(figures.get("anon_peak_bytes")),
                # A summary from before holds "peak_rss_bytes": the charged peak (or more).
                charged_peak_bytes=as_int(
                    figures.get("charged_peak_bytes", figures.get("peak_rss_bytes"))
                ),
                # A summary from before names the namespace's peak "peak_time_wait".
                namespace_time_wait_peak=as_int(
                    figures.get("namespace_time_wait_peak", figures.get("peak_time_wait"))
                ),
                peak_ephemeral_ports=as_int(figures.get("peak_ephemeral_ports")),
                retrans_segs=as_int(figures.get("retrans_segs")),
                tcp_timeouts=as_int(figures.get("tcp_timeouts")),
                memory_peak_per_transfer_bytes=as_int(
                    figures.get("memory_peak_per_transfer_bytes")
                ),
                charged_peak_per_transfer_bytes=as_int(
                    figures.get("charged_peak_per_transfer_bytes")
                ),
                connections_per_transfer=as_float(figures.get("connections_per_transfer")),
                time_wait_left_per_transfer=as_float(figures.get("time_wait_left_per_transfer")),
                harness_connections_per_transfer=as_float(
                    figures.get("harness_connections_per_transfer")
                ),
            )
        link: dict[str, dict[str, int]] = {}
        raw_link = by_role.get("link")
        if isinstance(raw_link, dict):
            for direction, counts in raw_link.items():
                if isinstance(counts, dict):
                    kept = {k: v for k, v in counts.items() if as_int(v) is not None}
                    link[str(direction)] = kept
        out.append(CaseResources(case=str(case), roles=roles, link=link))
    return out
