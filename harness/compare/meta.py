"""What differs between two runs' environments (pure): server versions, kernel, host, CPU,
OS, link backend, harness commit; and whether a run finished."""

from __future__ import annotations

import json
from dataclasses import dataclass

from harness.results.meta import RunMeta


@dataclass
class Difference:
    what: str
    a: str
    b: str

    def __str__(self) -> str:
        return f"{self.what}: {self.a} -> {self.b}"


def server_versions(meta: RunMeta) -> dict[str, str]:
    versions: dict[str, str] = {}
    for key, server in meta.servers.items():
        name = server.kind if server.kind not in versions else key  # two builds of one server
        versions[name] = server.version or "?"
    return versions


def metadata_differences(meta_a: RunMeta, meta_b: RunMeta) -> list[Difference]:
    """What differs between the two runs' environments (spec hash aside)."""
    out = []
    versions_a, versions_b = server_versions(meta_a), server_versions(meta_b)
    for kind in sorted(set(versions_a) | set(versions_b)):
        va, vb = versions_a.get(kind, "(absent)"), versions_b.get(kind, "(absent)")
        if va != vb:
            out.append(Difference(f"{kind} version", va, vb))
    for key, what in (
        ("kernel", "kernel"),
        ("hostname", "host"),
        ("cpu_model", "CPU"),
        ("cpu_count", "CPU count"),
        ("os", "OS"),
        ("git_commit", "harness commit"),
    ):
        va, vb = getattr(meta_a.host, key), getattr(meta_b.host, key)
        if key == "git_commit":  # as git prints it
            va, vb = (str(v)[:12] if v else v for v in (va, vb))
        if va != vb:
            out.append(Difference(what, str(va or "(unknown)"), str(vb or "(unknown)")))
    if meta_a.link_backend != meta_b.link_backend:
        out.append(Difference("link backend", str(meta_a.link_backend), str(meta_b.link_backend)))
    return out


def run_state(meta: RunMeta) -> str | None:
    if meta.state == "interrupted":
        return "was interrupted (Ctrl-C)"
    if meta.state == "unfinished":
        return "never finished (no end time in run.json)"
    return None


# What an upgrade changes: the server or its configuration, not the experiment.
SERVER_KEYS = ("binary", "suite", "config")


def _snippets_described(meta: RunMeta) -> dict[str, object]:
    """The run's scenario as written, each configuration snippet's file named with its
    hash (the text counts: one file edited between two runs is a change)."""
    scenario = json.loads(json.dumps(meta.scenario))
    for use in meta.configs or []:
        where, _, name = use["key"].partition(".")
        name = name.removesuffix(".config")
        if where == "servers":
            holders = [scenario.get("servers", {}).get(name)]
        else:
            holders = [s for s in scenario.get("secondaries") or [] if s.get("name") == name]
        for holder in holders:
            if isinstance(holder, dict) and holder.get("config") == use["path"]:
                holder["config"] = f"{use['path']} (sha256 {use['sha256'][:12]})"
    return scenario


def _without_servers(scenario: dict[str, object]) -> tuple[dict[str, object], dict[str, str]]:
    """The scenario with each server's binary, suite and snippet (and its name and
    description) taken out, and those ("servers.secondary.suite" -> value)."""
    rest = json.loads(json.dumps(scenario))
    for key in ("name", "description"):  # words about the experiment, not the experiment
        rest.pop(key, None)
    taken: dict[str, str] = {}
    servers = rest.get("servers")
    for role, server in servers.items() if isinstance(servers, dict) else []:
        for key in SERVER_KEYS:
            if isinstance(server, dict) and key in server:
                taken[f"servers.{role}.{key}"] = str(server.pop(key))
    sites = rest.get("secondaries")
    for site in sites if isinstance(sites, list) else []:
        for key in SERVER_KEYS:
            if isinstance(site, dict) and key in site:
                taken[f"secondaries.{site.get('name')}.{key}"] = str(site.pop(key))
    return rest, taken


def server_changes(meta_a: RunMeta, meta_b: RunMeta) -> list[Difference] | None:
    """When the two runs' scenarios differ only in their servers' binaries, suites or
    configuration snippets (an upgrade: the same experiment on another server or
    configuration), those differences; None when the experiment itself differs."""
    if not meta_a.scenario or not meta_b.scenario:
        return None  # a run that did not record its scenario: nothing to tell by
    rest_a, servers_a = _without_servers(_snippets_described(meta_a))
    rest_b, servers_b = _without_servers(_snippets_described(meta_b))
    if rest_a != rest_b:
        return None
    keys = sorted(set(servers_a) | set(servers_b))
    changes = [
        Difference(key, servers_a.get(key, "(default)"), servers_b.get(key, "(default)"))
        for key in keys
        if servers_a.get(key) != servers_b.get(key)
    ]
    return changes or None
