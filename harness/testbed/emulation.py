"""The emulated links, applied in the router: one pair of directions per secondary.

Each secondary's link has a forward direction (primary -> it: packets the router forwards
from the primary's segment to the secondary's) and a reverse one (back). A direction is
impaired where it leaves the router (tc on the egress interface) or, with linkem, where it
is forwarded (an NFQUEUE rule on ingress and egress interface). With one secondary every
direction has an egress of its own; with several, the reverse directions share the egress
towards the primary, and tc there classifies packets by their source segment.

    emulation = LinkEmulation(router, plan, endpoints, backend="linkem", run_dir=..., ...)
    emulation.apply(binary)          # tc, iptables, linkem; all recorded before it exists
    emulation.counters()             # per direction: linkem / netem / htb counters
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.core.errors import EnvironmentProblem
from harness.link import linkem
from harness.link.netem import classified_argv, netem_argv, parse_tc_stats, rate_argv
from harness.link.path import longest_rtt, through
from harness.spec import DirectionSpec, LinkSpec
from harness.testbed.hosts import Host, Record
from harness.testbed.topology import ROUTER, Endpoint, TopologyPlan

READY_TIMEOUT = 15.0
Spawn = Callable[..., subprocess.Popen[Any]]


@dataclass(frozen=True)
class Direction:
    """One way of one link: a secondary's, or the primary's uplink."""

    name: str  # "forward" / "reverse" with one secondary, else "<endpoint> forward"
    endpoint: str  # the host whose link this is
    spec: DirectionSpec
    ingress: str  # router interface the packets arrive on ("" for any)
    egress: str  # interface they leave by (on `place`)
    source: str  # the subnet they come from (to classify at a shared egress)
    place: str = "router"  # where `egress` is: the router, or the primary's own host
    hook: str = "FORWARD"  # where linkem takes them: FORWARD, PREROUTING or POSTROUTING
    aggregate: bool = False  # every packet leaving by `egress` (the uplink towards the primary)


def directions(
    plan: TopologyPlan, endpoints: list[Endpoint] | tuple[Endpoint, ...]
) -> list[Direction]:
    """Both directions of every secondary's link, then of the primary's uplink (pure).

    The uplink is shared by every transfer: its forward direction is shaped where packets
    leave the primary (its own interface: one queue for every site) and delayed where they
    enter the router; its reverse direction is shaped and delayed on the router's egress
    towards the primary, above the per-site classes there.
    """
    primary = next(e for e in endpoints if e.role == "primary")
    secondaries = [e for e in endpoints if e.role == "secondary"]
    p_seg = plan.segments[primary.name]
    out: list[Direction] = []
    for e in secondaries:
        seg = plan.segments[e.name]
        prefix = "" if len(secondaries) == 1 else f"{e.name} "
        out.append(
            Direction(f"{prefix}forward", e.name, e.link.forward, p_seg.router_if,
                      seg.router_if, p_seg.subnet)
        )  # fmt: skip
        out.append(
            Direction(f"{prefix}reverse", e.name, e.link.reverse, seg.router_if,
                      p_seg.router_if, seg.subnet)
        )  # fmt: skip
    uplink = primary.link
    if uplink.forward.impaired or uplink.forward.rate:
        out.append(
            Direction("uplink forward", primary.name, uplink.forward, p_seg.router_if,
                      p_seg.host_if, p_seg.subnet, place="primary", hook="PREROUTING")
        )  # fmt: skip
    if uplink.reverse.impaired or uplink.reverse.rate:
        out.append(
            Direction("uplink reverse", primary.name, uplink.reverse, "", p_seg.router_if,
                      "", hook="POSTROUTING", aggregate=True)
        )  # fmt: skip
    return out


def link_rtt(endpoints: list[Endpoint] | tuple[Endpoint, ...]) -> float:
    """The longest round trip any secondary's queues must cover (its link and the uplink)."""
    uplink = next((e.link for e in endpoints if e.role == "primary"), None)
    sites = (e.link for e in endpoints if e.role == "secondary")
    return max(
        (longest_rtt(through(site, uplink) if uplink else site) for site in sites), default=0.0
    )


def tc_commands(found: list[Direction], backend: str, rtt: float) -> list[tuple[str, list[str]]]:
    """(place, tc argv) for every egress (pure): netem and/or htb for the directions leaving
    by it; where several share it, one class per source under the shared (uplink) one."""
    by_egress: dict[tuple[str, str], list[Direction]] = {}
    for direction in found:
        by_egress.setdefault((direction.place, direction.egress), []).append(direction)
    netem = backend == "netem"
    commands: list[tuple[str, list[str]]] = []
    for (place, dev), group in by_egress.items():
        shared = next((d for d in group if d.aggregate), None)
        members = [d for d in group if not d.aggregate]
        if shared is not None and netem and shared.spec.impaired:
            raise EnvironmentProblem(
                "the uplink's reverse direction (towards the primary) can be delayed or lossy "
                "with linkem only: netem there would hide the per-site classes; set "
                "link.backend = 'linkem', or impair only uplink.forward"
            )
        wanted = [d for d in group if d.spec.rate or (netem and d.spec.impaired)]
        if not wanted:
            continue
        if len(members) == 1 and shared is None:
            spec = members[0].spec
            argvs = netem_argv(spec, dev, rtt=rtt) if netem else rate_argv(spec, dev, rtt=rtt)
        else:
            parts = [(d.source, d.spec) for d in members]
            ceiling = shared.spec.rate if shared is not None else None
            argvs = classified_argv(dev, parts, rtt=rtt, netem=netem, ceiling_bps=ceiling)
        commands += [(place, argv) for argv in argvs]
    return commands


def queue_numbers(found: list[Direction], every_direction: bool) -> list[tuple[Direction, int]]:
    """The directions linkem queues (the impaired ones, or all), each with its NFQUEUE."""
    chosen = [d for d in found if d.spec.impaired or every_direction]
    return [(d, linkem.FIRST_QUEUE + index) for index, d in enumerate(chosen)]


def nfqueue_rule(direction: Direction, queue: int) -> tuple[str, str, list[str]]:
    """(table, chain, rule) that hands `direction`'s packets to linkem's queue `queue`."""
    match = []
    if direction.ingress:
        match += ["-i", direction.ingress]
    if direction.hook in ("FORWARD", "POSTROUTING"):
        match += ["-o", direction.egress]
    table = "filter" if direction.hook == "FORWARD" else "mangle"
    return table, direction.hook, [*match, "-j", "NFQUEUE", "--queue-num", str(queue)]


def impaired(endpoints: list[Endpoint] | tuple[Endpoint, ...]) -> bool:
    return any(e.link.impaired for e in endpoints)


def rated(endpoints: list[Endpoint] | tuple[Endpoint, ...]) -> bool:
    return any(e.link.forward.rate or e.link.reverse.rate for e in endpoints)


class LinkEmulation:
    """The link emulation of one testbed, in its router namespace."""

    def __init__(
        self,
        hosts: dict[str, Host],
        plan: TopologyPlan,
        endpoints: list[Endpoint] | tuple[Endpoint, ...],
        *,
        backend: str,
        run_dir: Path,
        record: Record,
        spawn: Spawn,
        persistent: bool = False,
        every_direction: bool = False,
        label: str = "",
        control: Path | None = None,
    ) -> None:
        """`persistent`: the router outlives the testbed, so its root qdiscs are recorded for
        removal. `every_direction`: queue unimpaired directions too (the emulator's own
        cost). `label`: the case, which seeds linkem's random streams. `control`: linkem's
        control socket (faults), its directions then reading headers (bytes, TCP)."""
        self.hosts = hosts
        self.router = hosts[ROUTER]
        self.plan = plan
        self.endpoints = list(endpoints)
        self.backend = backend
        self.run_dir = run_dir
        self._record = record
        self._spawn = spawn
        self._persistent = persistent
        self._every_direction = every_direction
        self._label = label
        self._control_path = control
        self.control: linkem.LinkemControl | None = None
        self.directions = directions(plan, endpoints)
        self.rtt = link_rtt(endpoints)
        self.tc_applied: list[list[str]] = []
        self.iptables: list[list[str]] = []
        self.linkem_config: dict[str, Any] | None = None
        self.stats_path: Path | None = None
        self._qdisc_devs: set[tuple[str, str]] = set()
        self._primary = next(e.name for e in self.endpoints if e.role == "primary")

    def _place(self, place: str) -> Host:
        return self.router if place == "router" else self.hosts[self._primary]

    def apply(self, binary: Path | None) -> None:
        for place, argv in tc_commands(self.directions, self.backend, self.rtt):
            self._tc(self._place(place), argv)
        if any(e.link.mss_clamp for e in self.endpoints):
            clamp = ["-p", "tcp", "--tcp-flags", "SYN,RST", "SYN", "-j", "TCPMSS",
                     "--clamp-mss-to-pmtu"]  # fmt: skip
            self._iptables_rule("mangle", "FORWARD", clamp)
        if self.backend == "linkem":
            assert binary is not None
            self._start_linkem(binary)

    def _tc(self, host: Host, argv: list[str]) -> None:
        if self._persistent and "root" in argv:
            dev = argv[argv.index("dev") + 1]
            if (host.netns, dev) not in self._qdisc_devs:
                self._qdisc_devs.add((host.netns, dev))
                self._record("qdisc", netns=host.netns, dev=dev)
        host.run(argv)
        self.tc_applied.append([f"@{host.name}", *argv])

    def _iptables_rule(self, table: str, chain: str, rule: list[str]) -> None:
        # Recorded first: a driver killed right after the rule went in still has it listed.
        self._record("iptables", netns=self.router.netns, table=table, chain=chain, rule=rule)
        self.router.run(["iptables", "-w", "-t", table, "-A", chain, *rule])
        self.iptables.append(["-t", table, "-A", chain, *rule])

    def _start_linkem(self, binary: Path) -> None:
        self.stats_path = self.run_dir / "linkem-stats.json"
        queued = queue_numbers(self.directions, self._every_direction)
        config = linkem.config(
            [(d.name, d.spec, queue) for d, queue in queued],
            rtt=self.rtt,
            seed=linkem.instance_seed(self._first_link(), self._label or None),
            stats_path=self.stats_path,
            control_path=self._control_path,
            inspect=self._control_path is not None,
            # With faults the file carries linkem's events too: not rewritten so often.
            stats_interval_ms=linkem.STATS_INTERVAL_MS
            if self._control_path is not None
            else linkem.FAST_STATS_INTERVAL_MS,
        )
        self.linkem_config = config
        config_path = self.run_dir / "linkem.json"
        config_path.write_text(json.dumps(config, indent=2) + "\n")
        for direction, queue in queued:
            self._iptables_rule(*nfqueue_rule(direction, queue))
        out_path = self.run_dir / "linkem.stdout"
        err_path = self.run_dir / "linkem.stderr"
        for path in (config_path, out_path, err_path, self.stats_path):
            self._record("file", path=str(path), keep=True)  # run records, kept with the run
        with out_path.open("wb") as out, err_path.open("wb") as err:
            proc = self._spawn(
                self.router, [str(binary), "--config", str(config_path)], stdout=out, stderr=err
            )
        _wait_ready(proc, out_path, err_path, config_path)
        if self._control_path is not None:
            self.control = linkem.LinkemControl(self._control_path)

    def _first_link(self) -> LinkSpec:
        return next(e.link for e in self.endpoints if e.role == "secondary")

    # --- observations ----------------------------------------------------------------------

    def queued(self) -> tuple[int, float] | None:
        """Packets the emulator holds now, over all its directions, and when its snapshot
        was taken (unix time): linkem's `queued_now`. None where nothing tells (no linkem,
        or no snapshot yet)."""
        if self.backend != "linkem" or self.stats_path is None:
            return None
        stats = linkem.read_stats(self.stats_path)
        if "updated_at_unix" not in stats:
            return None
        per = stats.get("directions", {})
        held = sum(int(d.get("queued_now", 0)) for d in per.values() if isinstance(d, dict))
        return held, float(stats["updated_at_unix"])

    def counters(self) -> dict[str, Any]:
        """Cumulative packet counters per direction (the emulator's and the rate limiter's)."""
        if self.backend == "none" and not self.tc_applied:
            return {}
        counters: dict[str, Any] = {d.name: {} for d in self.directions}
        if self.backend == "linkem":
            stats = linkem.read_stats(self.stats_path) if self.stats_path else {}
            per = stats.get("directions", {})
            for name in counters:
                counters[name] = dict(per.get(name, {}))
                if counters[name] and "updated_at_unix" in stats:
                    counters[name]["updated_at_unix"] = stats["updated_at_unix"]
        tc = self._tc_counters()
        for direction in self.directions:
            entries = tc.get((direction.place, direction.egress), {})
            handle = entries.get("handles", {}).get(direction.source, "1:1")
            if self.backend == "netem":
                by_parent = entries.get("netem", {})
                netem = by_parent.get(handle) or by_parent.get("root")
                if netem:
                    counters[direction.name] |= netem
            if direction.spec.rate and handle in entries.get("htb", {}):
                counters[direction.name]["htb"] = entries["htb"][handle]
        if self.backend == "none":  # a rate limit alone: only the directions it shapes
            return {name: value for name, value in counters.items() if value}
        return counters

    def _tc_counters(self) -> dict[tuple[str, str], dict[str, Any]]:
        """Per (place, egress device) with a qdisc of ours: htb classes and netem qdiscs by
        the class they hang from (1:1 for a single direction), and source -> class."""
        out: dict[tuple[str, str], dict[str, Any]] = {}
        applied: dict[tuple[str, str], list[list[str]]] = {}
        for tagged in self.tc_applied:
            host, argv = tagged[0][1:], tagged[1:]
            place = "router" if host == ROUTER else "primary"
            applied.setdefault((place, argv[argv.index("dev") + 1]), []).append(argv)
        for (place, dev), argvs in applied.items():
            host = self._place(place)
            classes = parse_tc_stats(host.run(["tc", "-s", "class", "show", "dev", dev]).stdout)
            qdiscs = parse_tc_stats(host.run(["tc", "-s", "qdisc", "show", "dev", dev]).stdout)
            handles = {
                argv[argv.index("src") + 1]: argv[argv.index("flowid") + 1]
                for argv in argvs
                if argv[:3] == ["tc", "filter", "add"] and "src" in argv
            }
            out[(place, dev)] = {
                "htb": {c["handle"]: c for c in classes if c["kind"] == "htb"},
                "netem": {q.get("parent", "root"): q for q in qdiscs if q["kind"] == "netem"},
                "handles": handles,
            }
        return out

    def describe(self) -> dict[str, Any]:
        return {
            "router_egress": {d.name: d.egress for d in self.directions},
            "tc": self.tc_applied,
            "iptables": self.iptables,
            "linkem_config": self.linkem_config,
        }


def _wait_ready(
    proc: subprocess.Popen[Any], out_path: Path, err_path: Path, config_path: Path
) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        if linkem.READY_LINE in out_path.read_text(errors="replace"):
            return
        if proc.poll() is not None:
            tail = err_path.read_text(errors="replace").strip().splitlines()[-5:]
            raise EnvironmentProblem(
                f"linkem exited with status {proc.returncode} before it was ready: "
                + (" | ".join(tail) or "(no stderr)")
                + f" (config {config_path})"
            )
        time.sleep(0.02)
    raise EnvironmentProblem(
        f"linkem did not print {linkem.READY_LINE!r} within {READY_TIMEOUT:.0f} s "
        f"(see {out_path} and {err_path})"
    )
