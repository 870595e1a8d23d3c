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

from harness.errors import EnvironmentProblem
from harness.link import linkem
from harness.link.netem import classified_argv, netem_argv, parse_tc_stats, rate_argv
from harness.spec import DirectionSpec, LinkSpec
from harness.testbed.hosts import Host, Record
from harness.testbed.topology import Endpoint, TopologyPlan

READY_TIMEOUT = 15.0
Spawn = Callable[..., subprocess.Popen[Any]]


@dataclass(frozen=True)
class Direction:
    """One way of one secondary's link, as the router sees it."""

    name: str  # "forward" / "reverse" with one secondary, else "<endpoint> forward"
    endpoint: str  # the secondary whose link this is
    spec: DirectionSpec
    ingress: str  # router interface the packets arrive on
    egress: str  # router interface they leave by
    source: str  # the subnet they come from (to classify at a shared egress)


def directions(
    plan: TopologyPlan, endpoints: list[Endpoint] | tuple[Endpoint, ...]
) -> list[Direction]:
    """Both directions of every secondary's link (pure)."""
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
    return out


def link_rtt(endpoints: list[Endpoint] | tuple[Endpoint, ...]) -> float:
    """The longest round trip any secondary's queues must cover."""
    return max((linkem.link_rtt(e.link) for e in endpoints if e.role == "secondary"), default=0.0)


def tc_commands(found: list[Direction], backend: str, rtt: float) -> list[list[str]]:
    """The tc argv for every egress (pure): netem and/or htb for the directions leaving
    by it, one class per source where several directions share it."""
    by_egress: dict[str, list[Direction]] = {}
    for direction in found:
        by_egress.setdefault(direction.egress, []).append(direction)
    commands: list[list[str]] = []
    for dev, group in by_egress.items():
        netem = backend == "netem"
        wanted = [d for d in group if d.spec.rate or (netem and d.spec.impaired)]
        if not wanted:
            continue
        if len(group) == 1:
            spec = group[0].spec
            commands += netem_argv(spec, dev, rtt=rtt) if netem else rate_argv(spec, dev, rtt=rtt)
        else:
            members = [(d.source, d.spec) for d in group]
            commands += classified_argv(dev, members, rtt=rtt, netem=netem)
    return commands


def queue_numbers(found: list[Direction], every_direction: bool) -> list[tuple[Direction, int]]:
    """The directions linkem queues (the impaired ones, or all), each with its NFQUEUE."""
    chosen = [d for d in found if d.spec.impaired or every_direction]
    return [(d, linkem.FIRST_QUEUE + index) for index, d in enumerate(chosen)]


def impaired(endpoints: list[Endpoint] | tuple[Endpoint, ...]) -> bool:
    return any(e.link.impaired for e in endpoints)


def rated(endpoints: list[Endpoint] | tuple[Endpoint, ...]) -> bool:
    return any(e.link.forward.rate or e.link.reverse.rate for e in endpoints)


class LinkEmulation:
    """The link emulation of one testbed, in its router namespace."""

    def __init__(
        self,
        router: Host,
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
    ) -> None:
        """`persistent`: the router outlives the testbed, so its root qdiscs are recorded for
        removal. `every_direction`: queue unimpaired directions too (the emulator's own
        cost). `label`: the case, which seeds linkem's random streams."""
        self.router = router
        self.plan = plan
        self.endpoints = list(endpoints)
        self.backend = backend
        self.run_dir = run_dir
        self._record = record
        self._spawn = spawn
        self._persistent = persistent
        self._every_direction = every_direction
        self._label = label
        self.directions = directions(plan, endpoints)
        self.rtt = link_rtt(endpoints)
        self.tc_applied: list[list[str]] = []
        self.iptables: list[list[str]] = []
        self.linkem_config: dict[str, Any] | None = None
        self.stats_path: Path | None = None
        self._qdisc_devs: set[str] = set()

    def apply(self, binary: Path | None) -> None:
        for argv in tc_commands(self.directions, self.backend, self.rtt):
            self._tc(argv)
        if any(e.link.mss_clamp for e in self.endpoints):
            clamp = ["-p", "tcp", "--tcp-flags", "SYN,RST", "SYN", "-j", "TCPMSS",
                     "--clamp-mss-to-pmtu"]  # fmt: skip
            self._iptables_rule("mangle", "FORWARD", clamp)
        if self.backend == "linkem":
            assert binary is not None
            self._start_linkem(binary)

    def _tc(self, argv: list[str]) -> None:
        if self._persistent and "root" in argv:
            dev = argv[argv.index("dev") + 1]
            if dev not in self._qdisc_devs:
                self._qdisc_devs.add(dev)
                self._record("qdisc", netns=self.router.netns, dev=dev)
        self.router.run(argv)
        self.tc_applied.append(argv)

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
        )
        self.linkem_config = config
        config_path = self.run_dir / "linkem.json"
        config_path.write_text(json.dumps(config, indent=2) + "\n")
        for direction, queue in queued:
            rule = ["-i", direction.ingress, "-o", direction.egress, "-j", "NFQUEUE",
                    "--queue-num", str(queue)]  # fmt: skip
            self._iptables_rule("filter", "FORWARD", rule)
        out_path = self.run_dir / "linkem.stdout"
        err_path = self.run_dir / "linkem.stderr"
        for path in (config_path, out_path, err_path, self.stats_path):
            self._record("file", path=str(path), keep=True)  # run records, kept with the run
        with out_path.open("wb") as out, err_path.open("wb") as err:
            proc = self._spawn(
                self.router, [str(binary), "--config", str(config_path)], stdout=out, stderr=err
            )
        _wait_ready(proc, out_path, err_path, config_path)

    def _first_link(self) -> LinkSpec:
        return next(e.link for e in self.endpoints if e.role == "secondary")

    # --- observations ----------------------------------------------------------------------

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
            entries = tc.get(direction.egress, {})
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

    def _tc_counters(self) -> dict[str, dict[str, Any]]:
        """Per egress device with a qdisc of ours: htb classes and netem qdiscs by the class
        they hang from (1:1 for a single direction), and source subnet -> class."""
        out: dict[str, dict[str, Any]] = {}
        for dev in {argv[argv.index("dev") + 1] for argv in self.tc_applied}:
            classes = parse_tc_stats(
                self.router.run(["tc", "-s", "class", "show", "dev", dev]).stdout
            )
            qdiscs = parse_tc_stats(
                self.router.run(["tc", "-s", "qdisc", "show", "dev", dev]).stdout
            )
            htb = {c["handle"]: c for c in classes if c["kind"] == "htb"}
            netem = {q.get("parent", "root"): q for q in qdiscs if q["kind"] == "netem"}
            handles = {}
            for argv in self.tc_applied:
                if argv[:3] == ["tc", "filter", "add"] and dev in argv and "src" in argv:
                    handles[argv[argv.index("src") + 1]] = argv[argv.index("flowid") + 1]
            out[dev] = {"htb": htb, "netem": netem, "handles": handles}
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
