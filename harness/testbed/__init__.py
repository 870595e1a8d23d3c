"""Testbeds: a router and hosts, emulated links and per-host TCP settings, torn down exactly.

    with Testbed(scenario.link, scenario.hosts, run_dir) as bed:
        proc = bed.spawn(bed.secondary, ["iperf3", "-s", "-1"], stdout=..., stderr=...)
        ...

Hosts come from a provider (hosts.py); the testbed itself knows no container engine.

Everything created is listed in a registry file (/run/xfrbench/testbeds/<id>.json) as it is
created; `clean_leftovers()` removes what killed drivers left behind, and nothing else.
"""

from __future__ import annotations

from pathlib import Path

from harness.testbed import registry as _registry
from harness.testbed import topology as _topology
from harness.testbed.core import DEFAULT_BLOCK, Testbed, TestbedTerminated
from harness.testbed.hosts import Host, HostProvider, NetnsProvider
from harness.testbed.topology import Endpoint

__all__ = [
    "DEFAULT_BLOCK",
    "Endpoint",
    "Host",
    "HostProvider",
    "NetnsProvider",
    "Testbed",
    "TestbedTerminated",
    "clean_leftovers",
    "find_strays",
]


def clean_leftovers(
    directory: Path | None = None, *, problems: list[str] | None = None
) -> list[str]:
    """Undo what testbeds whose driver is dead left behind; returns what was removed.

    Only what their registry files list is touched (processes only while their start time
    matches); a live driver's testbed is left alone. What could not be undone, or was left
    alone on purpose, is appended to `problems` when given.
    """
    registries, unreadable = _registry.load_all(directory)
    notes = list(unreadable)
    removed: list[str] = []
    for registry in registries:
        if registry.driver_alive():
            continue
        done, skipped, failed = _registry.undo(registry, registries)
        removed += done
        notes += skipped + failed
    if problems is not None:
        problems.extend(notes)
    return removed


def find_strays(directory: Path | None = None) -> list[str]:
    """Namespaces named like ours that no registry lists: reported, never deleted."""
    registries, _ = _registry.load_all(directory)
    listed = {
        item.get("name")
        for r in registries
        for item in r.items
        if item.get("kind") in ("netns", "netns_attached")
    }
    try:
        names = sorted(path.name for path in Path("/run/netns").iterdir())
    except FileNotFoundError:
        return []
    return [name for name in names if _topology.NETNS_RE.match(name) and name not in listed]
