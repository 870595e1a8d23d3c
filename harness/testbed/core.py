"""The netns testbed: primary <-> router <-> secondary, with the link emulated in the router.

Build order and teardown are driven by the registry (harness.testbed.registry): each thing is
written down before (or, for a process, right after) it is created, so whatever happens to the
driver, `xfrbench clean` can remove exactly that and nothing else.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import IO, TYPE_CHECKING, Any

from harness.errors import EnvironmentProblem, ToolFailed, UserInputError, XfrbenchError
from harness.link import linkem
from harness.link.netem import netem_argv, parse_tc_stats, rate_argv
from harness.metrics import cgroup as cgroups
from harness.spec import PER_HOST_SYSCTLS, DirectionSpec, HostsSpec, LinkSpec
from harness.testbed import plan as planning
from harness.testbed import registry as reg

if TYPE_CHECKING:
    from harness.compose.testbed import ComposeSetup

DEFAULT_BLOCK = "198.18.0.0/15"
READY_TIMEOUT = 15.0


class TestbedTerminated(KeyboardInterrupt):
    """SIGTERM arrived: unwinds like Ctrl-C so every `with Testbed` tears down."""

    __test__ = False  # not a pytest test class


def _run(
    argv: list[str], *, check: bool = True, timeout: float = 60, **kw: Any
) -> subprocess.CompletedProcess[str]:
    if "stdout" not in kw and "stderr" not in kw:
        kw["capture_output"] = True
    kw.setdefault("text", True)
    result = subprocess.run(argv, check=False, timeout=timeout, **kw)
    if check and result.returncode != 0:
        raise ToolFailed(argv, result.returncode, result.stderr or "")
    return result


@dataclass
class Host:
    role: str  # "primary" | "secondary" | "router"
    netns: str
    address: str
    interfaces: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Compose backend: the container's PID 1. Its file system holds this host's tools.
    container_pid: int | None = None

    def argv(self, argv: list[str]) -> list[str]:
        """`argv` from the driver's file system, in this host's network namespace."""
        return ["ip", "netns", "exec", self.netns, *argv]

    def tool_argv(
        self, argv: list[str], cwd: Path | None = None, *, die_with_parent: bool = False
    ) -> list[str]:
        """`argv` from this host's own file system: a container's (servers, their control
        tools, version probes) with the compose backend, the driver's otherwise."""
        if self.container_pid is None:
            return self.argv(argv)
        from harness.compose.project import nsenter_argv

        return nsenter_argv(self.container_pid, argv, cwd, die_with_parent=die_with_parent)

    def run_tool(
        self, argv: list[str], check: bool = True, **kw: Any
    ) -> subprocess.CompletedProcess[str]:
        """Like run(), with the host's own tools (see tool_argv)."""
        return _run(self.tool_argv(argv), check=check, **kw)

    def run(
        self, argv: list[str], check: bool = True, **kw: Any
    ) -> subprocess.CompletedProcess[str]:
        """Run `argv` inside this host's namespace (text mode, output captured by default)."""
        return _run(self.argv(argv), check=check, **kw)

    def sysctl(self, key: str) -> str:
        return self.run(["sysctl", "-n", key]).stdout.strip()

    def sysctls(self, keys: list[str]) -> dict[str, str]:
        """Several keys in one process; keys this kernel lacks are left out."""
        result = self.run(["sysctl", *keys], check=False)
        values: dict[str, str] = {}
        for line in result.stdout.splitlines():
            key, sep, value = line.partition(" = ")
            if sep:
                values[key.strip()] = reg.normalize_sysctl(value)
        return values


def _features() -> Any:
    # Probing builds a namespace; do it once per process and only when a backend must be chosen.
    global _FEATURES
    if _FEATURES is None:
        from harness.link.probe import probe_kernel

        _FEATURES = probe_kernel()
    return _FEATURES


_FEATURES: Any = None


def choose_backend(link: LinkSpec, netem_available: bool | None, emulate: bool = False) -> str:
    """'none' for an unimpaired link (unless `emulate`); else netem or linkem as asked."""
    if not link.impaired and not emulate:
        return "none"
    if link.backend == "linkem":
        return "linkem"
    if netem_available is None:
        netem_available = bool(_features().netem)
    if link.backend == "netem":
        if not netem_available:
            raise EnvironmentProblem(
                "link.backend is 'netem' but this kernel has no netem qdisc (sch_netem is "
                "not built in and modules cannot be loaded here); use backend = 'auto' or "
                "'linkem' to emulate the link in user space"
            )
        return "netem"
    return "netem" if netem_available else "linkem"


class Testbed:
    """Three namespaces and an emulated link; a context manager that leaves nothing behind."""

    __test__ = False

    primary: Host
    secondary: Host
    router: Host

    def __init__(
        self,
        link: LinkSpec,
        hosts: HostsSpec,
        run_dir: Path,
        *,
        block: str = DEFAULT_BLOCK,
        label: str | None = None,
        netem_available: bool | None = None,
        emulate: bool = False,
        compose: ComposeSetup | None = None,
    ) -> None:
        """`netem_available` skips the kernel probe (tests); `emulate` runs the emulator even
        for an unimpaired link, to measure its own cost (benchmarks). `compose`: the hosts
        are the containers of a compose project (harness.compose.testbed) instead of
        namespaces of the testbed's own."""
        self.link = link
        self.hosts_spec = hosts
        self.run_dir = Path(run_dir)
        self.block = block
        self.label = label
        self._netem_available = netem_available
        self._emulate = emulate
        self.backend = "none"
        self.testbed_id = ""
        self.plan: planning.TopologyPlan | None = None
        self._registry: reg.Registry | None = None
        self._procs: dict[int, tuple[subprocess.Popen[Any], dict[str, Any]]] = {}
        self._tc_applied: list[list[str]] = []
        self._iptables: list[list[str]] = []
        self._applied: dict[str, dict[str, str]] = {}
        self._effective: dict[str, dict[str, str]] = {}
        self._cgroups: dict[int, tuple[cgroups.Cgroup, dict[str, Any]]] = {}
        self._init_sysctls: list[dict[str, str]] = []
        self._linkem_config: dict[str, Any] | None = None
        self._linkem_proc: subprocess.Popen[Any] | None = None
        self._stats_path: Path | None = None
        self._offloads_off = False
        self._old_handlers: dict[int, Any] = {}
        self.teardown_report: list[str] = []
        self.compose = compose
        self._compose_info: dict[str, Any] | None = None
        self._qdisc_devs: set[str] = set()

    # --- context manager ------------------------------------------------------------------

    def __enter__(self) -> Testbed:
        self._install_sigterm()
        try:
            self._build()
        except BaseException:
            self._teardown(failing=True)
            self._restore_signals()
            raise
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            self._teardown(failing=exc_type is not None)
        finally:
            self._restore_signals()

    def _install_sigterm(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # signals go to the main thread; its own handler is in charge there

        def on_sigterm(signum: int, frame: FrameType | None) -> None:
            raise TestbedTerminated(f"signal {signum}")

        self._old_handlers[signal.SIGTERM] = signal.signal(signal.SIGTERM, on_sigterm)

    def _restore_signals(self) -> None:
        for signum, handler in self._old_handlers.items():
            signal.signal(signum, handler)
        self._old_handlers.clear()

    @contextlib.contextmanager
    def _signals_deferred(self) -> Iterator[None]:
        """Hold SIGINT/SIGTERM while tearing down; deliver them once everything is removed."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        pending: list[int] = []
        saved = {
            sig: signal.signal(sig, lambda s, f: pending.append(s))
            for sig in (signal.SIGINT, signal.SIGTERM)
        }
        try:
            yield
        finally:
            for sig, handler in saved.items():
                signal.signal(sig, handler)
            for sig in dict.fromkeys(pending):
                signal.raise_signal(sig)

    # --- build ------------------------------------------------------------------------------

    def _build(self) -> None:
        if os.geteuid() != 0:
            raise EnvironmentProblem("the netns testbed needs root (namespaces, iptables, sysctl)")
        try:
            planning.parse_block(self.block)
        except ValueError as exc:
            raise UserInputError(str(exc), key="block", fix="e.g. 198.18.0.0/15") from None
        self.backend = choose_backend(self.link, self._netem_available, self._emulate)
        binary = linkem.find_binary() if self.backend == "linkem" else None
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._create_registry()
        assert self.plan is not None and self._registry is not None
        if self.compose is not None:
            self._build_compose_topology(self.compose)
        else:
            self._build_topology(self.plan)
        self._apply_host_sysctls()
        if self.backend != "none" or self.link.forward.rate or self.link.reverse.rate:
            self._offloads()
        self._apply_link(binary)
        self._check_reachable()

    def _create_registry(self) -> None:
        directory = reg.registry_dir()
        with reg.locked(directory):
            registries, _ = reg.load_all(directory)
            used = {str(r.data.get("slice")) for r in registries if r.data.get("slice")}
            static_slice = None
            if self.compose is not None:
                from harness.compose import testbed as compose_testbed

                used |= compose_testbed.used_subnets(self.compose)
                if self.compose.static:
                    static_slice = compose_testbed.static_slice(self.compose)
            for _ in range(100):
                testbed_id = secrets.token_hex(3)
                names = [planning.netns_name(testbed_id, role) for role in planning.ROLES]
                if not (directory / f"{testbed_id}.json").exists() and not any(
                    Path("/run/netns", name).exists() for name in names
                ):
                    break
            else:  # pragma: no cover - 16M ids
                raise EnvironmentProblem("could not find a free testbed id")
            try:
                slice_ = static_slice or planning.choose_slice(self.block, testbed_id, used)
            except LookupError as exc:
                raise EnvironmentProblem(str(exc)) from None
            self.testbed_id = testbed_id
            self.plan = planning.plan_topology(testbed_id, self.block, slice_)
            self._registry = reg.Registry.create(
                directory,
                testbed_id,
                label=self.label,
                block=self.block,
                slice=slice_,
                run_dir=str(self.run_dir),
            )

    def _add(self, kind: str, **data: Any) -> dict[str, Any]:
        assert self._registry is not None
        return self._registry.add(kind, **data)

    def _make_hosts(self, plan: planning.TopologyPlan) -> None:
        ns = plan.namespaces
        self.primary = Host("primary", ns["primary"], plan.address("primary"))
        self.secondary = Host("secondary", ns["secondary"], plan.address("secondary"))
        self.router = Host("router", ns["router"], plan.address("router"))

    def _segment_mtus(self) -> dict[str, int]:
        """forward (primary -> secondary) is delivered on the secondary's segment; its MTU is
        link.forward.mtu, and the primary's segment carries link.reverse.mtu."""
        return {"secondary": self.link.forward.mtu, "primary": self.link.reverse.mtu}

    def _record_interfaces(self, plan: planning.TopologyPlan, mtus: dict[str, int]) -> None:
        for endpoint, seg in plan.segments.items():
            host = self.primary if endpoint == "primary" else self.secondary
            host.interfaces[seg.host_if] = {
                "address": seg.host_address,
                "subnet": seg.subnet,
                "mtu": mtus[endpoint],
                "peer": f"{seg.router_if}@router",
            }
            self.router.interfaces[seg.router_if] = {
                "address": seg.router_address,
                "subnet": seg.subnet,
                "mtu": mtus[endpoint],
                "peer": f"{seg.host_if}@{endpoint}",
            }

    def _build_topology(self, plan: planning.TopologyPlan) -> None:
        ns = plan.namespaces
        for role in planning.ROLES:
            self._add("netns", name=ns[role])
            _run(["ip", "netns", "add", ns[role]])
            _run(["ip", "-n", ns[role], "link", "set", "lo", "up"])
            # No IPv6 inside: no DAD or router solicitations, so counters hold only test traffic.
            for key in ("net.ipv6.conf.all.disable_ipv6", "net.ipv6.conf.default.disable_ipv6"):
                _run(["ip", "netns", "exec", ns[role], "sysctl", "-qw", f"{key}=1"], check=False)
        self._make_hosts(plan)
        mtus = self._segment_mtus()
        for endpoint, seg in plan.segments.items():
            # Created straight inside the namespaces: no name ever appears in the init netns.
            _run(
                [
                    "ip",
                    "-n",
                    ns[endpoint],
                    "link",
                    "add",
                    seg.host_if,
                    "type",
                    "veth",
                    "peer",
                    "name",
                    seg.router_if,
                    "netns",
                    ns["router"],
                ]
            )
            for netns, ifname, address in (
                (ns[endpoint], seg.host_if, seg.host_address),
                (ns["router"], seg.router_if, seg.router_address),
            ):
                _run(
                    [
                        "ip",
                        "-n",
                        netns,
                        "link",
                        "set",
                        "dev",
                        ifname,
                        "mtu",
                        str(mtus[endpoint]),
                        "up",
                    ]
                )
                _run(
                    ["ip", "-n", netns, "addr", "add", f"{address}/{seg.prefixlen}", "dev", ifname]
                )
            _run(["ip", "-n", ns[endpoint], "route", "add", "default", "via", seg.router_address])
        self._record_interfaces(plan, mtus)
        self.router.run(["sysctl", "-qw", "net.ipv4.ip_forward=1"])
        self._applied["router"] = {"net.ipv4.ip_forward": "1"}

    def _build_compose_topology(self, setup: ComposeSetup) -> None:
        """The hosts are containers: their namespaces are named like ours (see
        harness.compose.testbed); addresses and interfaces are what compose gave them."""
        from harness.compose import testbed as compose_testbed

        assert self.plan is not None
        built = compose_testbed.build_topology(
            setup,
            self.testbed_id,
            self.block,
            self.plan.slice,
            self.run_dir / "compose",
            self._segment_mtus(),
            self._add,
        )
        self.plan = built.plan
        self._compose_info = built.describe(setup)
        self._make_hosts(built.plan)
        for host in (self.primary, self.secondary, self.router):
            host.container_pid = built.pids[host.role]
        self._record_interfaces(built.plan, built.mtus)
        # The link container forwards already (its compose sysctls); checked, not assumed.
        if self.router.sysctl("net.ipv4.ip_forward") != "1":
            raise EnvironmentProblem(
                f"the link container of {built.deployment.project} does not forward "
                "(net.ipv4.ip_forward is not 1; see docker-compose.yml)"
            )
        self._applied["router"] = {"net.ipv4.ip_forward": "1"}

    def _offloads(self) -> None:
        """TSO/GSO/GRO off on every veth: loss and delay then act on single packets."""
        assert self.plan is not None
        for seg in self.plan.segments.values():
            host = self.primary if seg.endpoint == "primary" else self.secondary
            for who, ifname in ((host, seg.host_if), (self.router, seg.router_if)):
                who.run(["ethtool", "-K", ifname, "tso", "off", "gso", "off", "gro", "off"])
        self._offloads_off = True

    # --- per-host TCP settings ---------------------------------------------------------------

    def _apply_host_sysctls(self) -> None:
        for role in ("primary", "secondary"):
            host = self.primary if role == "primary" else self.secondary
            wanted = getattr(self.hosts_spec, role).sysctls()
            cc = wanted.get("net.ipv4.tcp_congestion_control")
            if cc:
                self._allow_cc(cc)
            applied: dict[str, str] = {}
            # Congestion control first: tcp_* values never depend on it, but a refused cc is
            # the most likely failure and should be reported before anything else.
            for key in sorted(wanted, key=lambda k: k != "net.ipv4.tcp_congestion_control"):
                value = wanted[key]
                where = f"hosts.{role}.sysctl.{key}"
                if self.compose is not None and self.compose.static:
                    # The container outlives this case: the next one must find it as it was.
                    self._add("netns_sysctl", netns=host.netns, key=key, old=host.sysctl(key))
                result = host.run(["sysctl", "-w", f"{key}={value}"], check=False)
                if result.returncode != 0:
                    raise UserInputError(
                        f"the kernel refused {value!r}: {result.stderr.strip()}",
                        key=where,
                        fix="check the value's format (e.g. tcp_rmem = '4096 131072 6291456')",
                    )
                got = host.sysctl(key)
                if reg.normalize_sysctl(got) != reg.normalize_sysctl(value):
                    raise UserInputError(
                        f"set to {value!r} but reads back as {got!r} (the kernel adjusted it)",
                        key=where,
                        fix="use a value the kernel keeps as written",
                    )
                applied[key] = reg.normalize_sysctl(value)
            self._applied[role] = applied
            self._effective[role] = host.sysctls(list(PER_HOST_SYSCTLS))

    def _allow_cc(self, name: str) -> None:
        """A child netns may only pick what the init netns allows: add `name` there if needed."""
        key = reg.CC_ALLOWED
        directory = reg.registry_dir()
        with reg.locked(directory):
            allowed = reg.read_sysctl(key).split()
            if name in allowed:
                return
            available = reg.read_sysctl("net.ipv4.tcp_available_congestion_control").split()
            if name not in available:
                raise EnvironmentProblem(
                    f"congestion control {name!r} is not available in this kernel "
                    f"(available: {', '.join(available)}); pick one of those"
                )
            old = " ".join(allowed)
            self._add("cc_allowed", key=key, old=old, added=[name])
            new = reg.add_names(old, [name])
            reg.write_sysctl(key, new)
            self._init_sysctls.append({"key": key, "old": old, "new": new})

    def set_global_sysctl(self, key: str, value: str) -> None:
        """Change an init-netns sysctl for the testbed's lifetime (restored at teardown)."""
        old = reg.read_sysctl(key)
        if reg.normalize_sysctl(old) == reg.normalize_sysctl(value):
            return
        self._add("sysctl", key=key, old=old, new=value)
        reg.write_sysctl(key, value)
        got = reg.read_sysctl(key)
        if reg.normalize_sysctl(got) != reg.normalize_sysctl(value):
            raise EnvironmentProblem(f"{key}: set to {value!r} but reads back as {got!r}")
        self._init_sysctls.append({"key": key, "old": old, "new": value})

    # --- the link -------------------------------------------------------------------------

    def _egress(self, direction: str) -> str:
        """The router's interface towards the host receiving `direction`."""
        assert self.plan is not None
        receiver = "secondary" if direction == "forward" else "primary"
        return self.plan.segments[receiver].router_if

    def _ingress(self, direction: str) -> str:
        assert self.plan is not None
        sender = "primary" if direction == "forward" else "secondary"
        return self.plan.segments[sender].router_if

    def _directions(self) -> tuple[tuple[str, DirectionSpec], ...]:
        return (("forward", self.link.forward), ("reverse", self.link.reverse))

    def _tc(self, argv: list[str]) -> None:
        if self.compose is not None and self.compose.static and "root" in argv:
            dev = argv[argv.index("dev") + 1]
            if dev not in self._qdisc_devs:  # the link container outlives this case
                self._qdisc_devs.add(dev)
                self._add("qdisc", netns=self.router.netns, dev=dev)
        self.router.run(argv)
        self._tc_applied.append(argv)

    def _iptables_rule(self, table: str, chain: str, rule: list[str]) -> None:
        # Recorded first: a driver killed right after the rule went in still has it listed.
        self._add("iptables", netns=self.router.netns, table=table, chain=chain, rule=rule)
        self.router.run(["iptables", "-w", "-t", table, "-A", chain, *rule])
        self._iptables.append(["-t", table, "-A", chain, *rule])

    def _apply_link(self, binary: Path | None) -> None:
        rtt = linkem.link_rtt(self.link)
        for name, spec in self._directions():
            dev = self._egress(name)
            if self.backend == "netem":
                for argv in netem_argv(spec, dev, rtt=rtt):
                    self._tc(argv)
            elif spec.rate:
                for argv in rate_argv(spec, dev, rtt=rtt):
                    self._tc(argv)
        if self.link.mss_clamp:
            self._iptables_rule(
                "mangle",
                "FORWARD",
                [
                    "-p",
                    "tcp",
                    "--tcp-flags",
                    "SYN,RST",
                    "SYN",
                    "-j",
                    "TCPMSS",
                    "--clamp-mss-to-pmtu",
                ],
            )
        if self.backend == "linkem":
            assert binary is not None
            self._start_linkem(binary)

    def _start_linkem(self, binary: Path) -> None:
        self._stats_path = self.run_dir / "linkem-stats.json"
        config = linkem.config(
            self.link, stats_path=self._stats_path, every_direction=self._emulate
        )
        self._linkem_config = config
        config_path = self.run_dir / "linkem.json"
        config_path.write_text(json.dumps(config, indent=2) + "\n")
        for direction in config["directions"]:
            self._iptables_rule(
                "filter",
                "FORWARD",
                [
                    "-i",
                    self._ingress(direction["name"]),
                    "-j",
                    "NFQUEUE",
                    "--queue-num",
                    str(direction["queue"]),
                ],
            )
        out_path = self.run_dir / "linkem.stdout"
        err_path = self.run_dir / "linkem.stderr"
        for path in (config_path, out_path, err_path, self._stats_path):
            self._add("file", path=str(path), keep=True)  # run records, kept with the run
        with out_path.open("wb") as out, err_path.open("wb") as err:
            proc = self.spawn(
                self.router, [str(binary), "--config", str(config_path)], stdout=out, stderr=err
            )
        self._linkem_proc = proc
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

    def _check_reachable(self) -> None:
        """One reply primary -> secondary, unless the link is meant to lose most packets."""
        for _, spec in self._directions():
            if spec.loss.active and not (spec.loss.model == "random" and spec.loss.p < 50):
                return
        wait = max(5.0, 4 * linkem.link_rtt(self.link) + 2)
        result = self.primary.run(
            [
                "ping",
                "-n",
                "-q",
                "-c",
                "1",
                "-i",
                "0.05",
                "-w",
                str(round(wait)),
                self.secondary.address,
            ],
            check=False,
            timeout=wait + 10,
        )
        if result.returncode != 0:
            raise EnvironmentProblem(
                f"the testbed is up but the primary cannot reach the secondary "
                f"({self.secondary.address}) within {wait:.0f} s: {result.stdout.strip()}"
            )

    # --- processes ------------------------------------------------------------------------------

    def spawn(
        self,
        host: Host,
        argv: list[str],
        *,
        stdout: int | IO[Any] | None,
        stderr: int | IO[Any] | None,
        cwd: Path | None = None,
        env: dict[str, str] | None = None,
        text: bool = False,
        cgroup: str | None = None,
        tool: bool = False,
    ) -> subprocess.Popen[Any]:
        """Start `argv` inside `host`'s namespace and register it for teardown.

        `ip netns exec` execs the command in place, so the pid is the command's own. A new
        session keeps a terminal's Ctrl-C from reaching it: the testbed stops it, in order.
        With `cgroup` (a short name, e.g. the server's role) the process runs in a cgroup of
        its own, entered before exec so that forked children are counted too; the cgroup is
        recorded before the process so that teardown stops the process, then removes it.
        With `tool` the command comes from the host's own file system (Host.tool_argv: a
        container's with the compose backend; it dies with the driver there, since it lives
        outside the container's pid namespace and would keep the container's alive).
        """
        full_argv = host.tool_argv(argv, cwd, die_with_parent=True) if tool else host.argv(argv)
        group = None
        layout = cgroups.detect() if cgroup is not None else None
        if layout is not None and layout.kind != "proc":  # else: sampled from /proc instead
            name = f"xfb-{self.testbed_id}-{cgroup}"
            listed = self._add("cgroup", paths=cgroups.cgroup_dirs(name, layout))  # before made
            group = cgroups.Cgroup.create(name, layout)
            full_argv = cgroups.attach_argv(group.procs_files, full_argv)
        proc = subprocess.Popen(
            full_argv,
            stdout=stdout,
            stderr=stderr,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            text=text,
        )
        item = self._add(
            "process",
            pid=proc.pid,
            start=reg.proc_start_time(proc.pid),
            netns=host.netns,
            argv=argv,
        )
        self._procs[proc.pid] = (proc, item)
        if group is not None:
            self._cgroups[proc.pid] = (group, listed)
        return proc

    def cgroup_of(self, proc: subprocess.Popen[Any]) -> cgroups.Cgroup | None:
        """The cgroup `proc` was spawned in (None: not asked for, or none can be made here)."""
        entry = self._cgroups.get(proc.pid)
        return entry[0] if entry else None

    def stop(self, proc: subprocess.Popen[Any], timeout: float = 10.0) -> int:
        """SIGTERM, wait up to `timeout`, then SIGKILL; returns the exit status."""
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.terminate()
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        entry = self._procs.pop(proc.pid, None)
        if entry is not None and self._registry is not None:
            self._registry.discard(entry[1])
        grouped = self._cgroups.pop(proc.pid, None)
        if grouped is not None:
            group, listed = grouped
            cgroups.remove(group.paths)
            if self._registry is not None:
                self._registry.discard(listed)
        return int(proc.returncode)

    # --- between repetitions, and observations --------------------------------------------------

    def flush_route_metrics(self) -> None:
        """Forget cached ssthresh/RTT per destination so repetitions start alike."""
        for host in (self.primary, self.secondary):
            host.run(["ip", "tcp_metrics", "flush"], check=False)

    def link_counters(self) -> dict[str, Any]:
        if self.backend == "none":
            return {}
        counters: dict[str, Any] = {}
        if self.backend == "linkem":
            stats = linkem.read_stats(self._stats_path) if self._stats_path else {}
            per = stats.get("directions", {})
            for name, _ in self._directions():
                counters[name] = dict(per.get(name, {}))
                if counters[name] and "updated_at_unix" in stats:
                    counters[name]["updated_at_unix"] = stats["updated_at_unix"]
        else:
            for name, _ in self._directions():
                counters[name] = self._qdisc_counters(self._egress(name), "netem")
        for name, counts in self.rate_counters().items():  # one tc call per rated direction
            counters[name]["htb"] = counts
        return counters

    def _qdisc_counters(self, dev: str, kind: str) -> dict[str, Any]:
        result = self.router.run(["tc", "-s", "qdisc", "show", "dev", dev])
        for qdisc in parse_tc_stats(result.stdout):
            if qdisc["kind"] == kind:
                return qdisc
        return {}

    def rate_counters(self) -> dict[str, dict[str, Any]]:
        """htb class 1:1 counters per direction with a rate (bytes, packets, drops)."""
        out: dict[str, dict[str, Any]] = {}
        for name, spec in self._directions():
            if not spec.rate:
                continue
            result = self.router.run(["tc", "-s", "class", "show", "dev", self._egress(name)])
            for cls in parse_tc_stats(result.stdout):
                if cls["handle"] == "1:1":
                    out[name] = cls
        return out

    def describe(self) -> dict[str, Any]:
        assert self.plan is not None
        hosts: dict[str, Any] = {}
        for host in (self.primary, self.router, self.secondary):
            hosts[host.role] = {
                "netns": host.netns,
                "address": host.address,
                "interfaces": host.interfaces,
                "sysctls_applied": self._applied.get(host.role, {}),
                "sysctls": self._effective.get(host.role, {}),
            }
        return {
            "testbed_id": self.testbed_id,
            "label": self.label,
            "topology": "compose" if self.compose is not None else "netns",
            "compose": self._compose_info,
            "backend": self.backend,
            "block": self.block,
            "slice": self.plan.slice,
            "registry": str(self._registry.path) if self._registry else None,
            "hosts": hosts,
            "link": self.link.model_dump(mode="json"),
            "emulation": {
                "router_egress": {name: self._egress(name) for name, _ in self._directions()},
                "offloads_off": self._offloads_off,
                "tc": self._tc_applied,
                "iptables": self._iptables,
                "linkem_config": self._linkem_config,
            },
            "init_netns_sysctls": self._init_sysctls,
        }

    # --- teardown ---------------------------------------------------------------------------

    def _teardown(self, *, failing: bool) -> None:
        if self._registry is None:
            return
        with self._signals_deferred():
            # Our own children first, gracefully (linkem writes its final stats on SIGTERM).
            stopped: list[str] = []
            for proc, item in reversed(list(self._procs.values())):
                with contextlib.suppress(OSError, subprocess.SubprocessError):
                    status = self.stop(proc, timeout=5.0)
                    stopped.append(
                        f"process {proc.pid} ({Path(item['argv'][0]).name}) exited {status}"
                    )
            done, notes, problems = reg.undo(self._registry)
            # Inside the deferral: a signal held back is delivered only after this is recorded.
            self.teardown_report = stopped + done + notes
            self._registry = None
        if problems:
            text = "testbed teardown: " + "; ".join(notes + problems)
            if failing:  # do not hide the error that got us here
                print(f"xfrbench: warning: {text}", file=sys.stderr)
            else:
                raise XfrbenchError(text)
