"""A site's link on real hosts: linkem on each secondary host, emulating that host's own
link for its traffic with the primary (pure: what to run; the agent runs it).

On netns the router emulates every site's link between the segments; on a lab of hosts
there is no router of ours, so each secondary host delays its own packets: the forward
direction (primary -> it) where they arrive (INPUT, from the primary's address), the
reverse one where they leave (OUTPUT, to the primary's address). A scenario's sites are
then emulated alike on netns and on hosts, and the directions carry the names the netns
fleet gives them ("<host> forward"), which the link check reads.

A group with faults (measure/live_faults.py) has linkem on every direction of each
secondary host, impaired or not, reading headers (bytes, TCP) and taking commands on a
control socket in the host's run folder (`control_socket`), as the netns testbed of a
faulted group does on its router; the agent relays the commands (op_link_control) and
remote/linkctl.py routes each to the host whose direction it names. linkem's own packets
(duplicates, forged resets) carry its mark (`OWN_MARK`) and the rules let them by: on an end
host a reset sent to the primary leaves by the OUTPUT chain that linkem queues.

What is not emulated here is refused by run/remote.py: a configured rate (a shaper at the
host's ingress needs an ifb device of its own) and the primary's uplink. A slow-primary
fault's rate is linkem's own runtime bottleneck, so it runs here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.core.errors import UserInputError
from harness.link import linkem
from harness.link.path import longest_rtt
from harness.spec import LinkSpec

LINK_DIR = "link"  # in the host's run folder: linkem's config, stats, output
RULES_FILE = "link-rules.json"  # in the host's run folder: the rules teardown removes
OWN_MARK = 0x6C6B  # linkem/src/rawsock.rs: the mark of the packets linkem sends itself
SOCKET_MAX = 107  # bytes of a unix socket's path


def host_directions(host: str, link: LinkSpec, every: bool = False) -> list[tuple[str, str, Any]]:
    """(name, chain, spec) of the host's impaired directions (`every`: all of them, for
    faults): forward taken in INPUT, reverse in OUTPUT."""
    chosen = [
        (f"{host} forward", "INPUT", link.forward),
        (f"{host} reverse", "OUTPUT", link.reverse),
    ]
    return [(name, chain, spec) for name, chain, spec in chosen if spec.impaired or every]


def control_socket(run_dir: str) -> str:
    """linkem's control socket on a host: in the run's folder (removed with it), a path a
    unix socket can bind (the run folder's root is the operator's: too deep is refused)."""
    path = f"{run_dir}/ctl/linkem.sock"
    if len(path.encode()) > SOCKET_MAX:
        raise UserInputError(
            f"linkem's control socket {path} is longer than a unix socket's {SOCKET_MAX} bytes",
            key="xfrbench_root",
            fix="give the hosts a shorter xfrbench_root in the inventory",
        )
    return path


def nfqueue_rules(primary: str, queued: list[tuple[str, int]]) -> list[dict[str, Any]]:
    """The iptables rules ({tool, table, chain, rule}) handing the host's packets from
    (INPUT) and to (OUTPUT) the primary's address to linkem's queues, but for linkem's own
    (its mark): ip6tables for an IPv6 primary."""
    tool = "ip6tables" if ":" in primary else "iptables"
    out = []
    for chain, queue in queued:
        match = ["-s", primary] if chain == "INPUT" else ["-d", primary]
        mine = ["-m", "mark", "!", "--mark", hex(OWN_MARK)]
        rule = [*match, *mine, "-j", "NFQUEUE", "--queue-num", str(queue)]
        out.append({"tool": tool, "table": "filter", "chain": chain, "rule": rule})
    return out


def host_link(
    host: str,
    link: LinkSpec,
    primary: str,
    case: str,
    folder: str,
    control: str | None = None,
) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
    """linkem's config (files in `folder`, the host's) and its rules for one secondary
    host, or None when its link is not impaired and it takes no faults. `control`: its
    control socket (faults: every direction then, reading headers). Seeded per case and
    host, as the netns fleet seeds per case and site."""
    found = host_directions(host, link, every=control is not None)
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
        # With faults the file carries linkem's events too: not rewritten so often.
        stats_interval_ms=linkem.FAST_STATS_INTERVAL_MS
        if control is None
        else linkem.STATS_INTERVAL_MS,
        control_path=None if control is None else Path(control),
        inspect=control is not None,
    )
    return config, nfqueue_rules(primary, [(chain, queue) for _, chain, _, queue in queued])


def delete_argv(rule: dict[str, Any]) -> list[str]:
    return [rule["tool"], "-w", "-t", rule["table"], "-D", rule["chain"], *rule["rule"]]


def add_argv(rule: dict[str, Any]) -> list[str]:
    # Inserted first in the chain: a host's own ACCEPT rules must not let them pass by.
    return [rule["tool"], "-w", "-t", rule["table"], "-I", rule["chain"], "1", *rule["rule"]]
