"""A site's link on real hosts: linkem on each secondary host, emulating that host's own
link for its traffic with the primary (pure: what to run; the agent runs it).

On netns the router emulates every site's link between the segments; on a lab of hosts
there is no router of ours, so each secondary host delays its own packets: the forward
direction (primary -> it) where they arrive (INPUT, from the primary's address), the
reverse one where they leave (OUTPUT, to the primary's address). A scenario's sites are
then emulated alike on netns and on hosts, and the directions carry the names the netns
fleet gives them ("<host> forward"), which the link check reads.

What is not emulated here is refused by run/remote.py: a rate (a shaper at the host's
ingress needs an ifb device of its own) and the primary's uplink.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.link import linkem
from harness.link.path import longest_rtt
from harness.spec import LinkSpec

LINK_DIR = "link"  # in the host's run folder: linkem's config, stats, output
RULES_FILE = "link-rules.json"  # in the host's run folder: the rules teardown removes


def host_directions(host: str, link: LinkSpec) -> list[tuple[str, str, Any]]:
    """(name, chain, spec) of the host's impaired directions: forward taken in INPUT,
    reverse in OUTPUT."""
    chosen = [
        (f"{host} forward", "INPUT", link.forward),
        (f"{host} reverse", "OUTPUT", link.reverse),
    ]
    return [(name, chain, spec) for name, chain, spec in chosen if spec.impaired]


def nfqueue_rules(primary: str, queued: list[tuple[str, int]]) -> list[dict[str, Any]]:
    """The iptables rules ({tool, table, chain, rule}) handing the host's packets from
    (INPUT) and to (OUTPUT) the primary's address to linkem's queues: ip6tables for an
    IPv6 primary."""
    tool = "ip6tables" if ":" in primary else "iptables"
    out = []
    for chain, queue in queued:
        match = ["-s", primary] if chain == "INPUT" else ["-d", primary]
        rule = [*match, "-j", "NFQUEUE", "--queue-num", str(queue)]
        out.append({"tool": tool, "table": "filter", "chain": chain, "rule": rule})
    return out


def host_link(
    host: str, link: LinkSpec, primary: str, case: str, folder: str
) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
    """linkem's config (files in `folder`, the host's) and its rules for one secondary
    host, or None when its link is not impaired. Seeded per case and host, as the netns
    fleet seeds per case and site."""
    found = host_directions(host, link)
    if not found:
        return None
    queued = [
        (name, chain, spec, linkem.FIRST_QUEUE + i) for i, (name, chain, spec) in enumerate(found)
    ]
    config = linkem.config(
        [(name, spec, queue) for name, _, spec, queue in queued],
        rtt=longest_rtt(link),
        seed=linkem.instance_seed(link, case, host),
        stats_path=Path(folder) / "linkem-stats.json",  # the host's path
        stats_interval_ms=linkem.FAST_STATS_INTERVAL_MS,
    )
    return config, nfqueue_rules(primary, [(chain, queue) for _, chain, _, queue in queued])


def delete_argv(rule: dict[str, Any]) -> list[str]:
    return [rule["tool"], "-w", "-t", rule["table"], "-D", rule["chain"], *rule["rule"]]


def add_argv(rule: dict[str, Any]) -> list[str]:
    # Inserted first in the chain: a host's own ACCEPT rules must not let them pass by.
    return [rule["tool"], "-w", "-t", rule["table"], "-I", rule["chain"], "1", *rule["rule"]]
