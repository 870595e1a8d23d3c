"""The testbed: a router and one host per endpoint, the links emulated in the router.

    with Testbed(link, hosts, run_dir) as bed:                 # a primary and a secondary
    with Testbed.of(endpoints, run_dir, provider=...) as bed:  # a primary and N secondaries

Hosts come from a provider (hosts.py: namespaces of the testbed's own, or the containers of
a compose project); everything after that is the same: per-host sysctls, offloads, the link
emulation (emulation.py), a reachability check, processes (in cgroups of their own) and
teardown. Build order and teardown are driven by the registry (registry.py): each thing is
written down before (or, for a process, right after) it is created, so whatever happens to
the driver, `xfrbench clean` can remove exactly that and nothing else.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import secrets
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import FrameType
from typing import IO, Any

from harness.core.errors import EnvironmentProblem, UserInputError, XfrbenchError
from harness.core.stopping import stop_process
from harness.link import linkem
from harness.link.probe import probe_kernel
from harness.observe import cgroup as cgroups
from harness.spec import PER_HOST_SYSCTLS, HostsSpec, LinkSpec
from harness.testbed import emulation, topology
from harness.testbed import registry as reg
from harness.testbed.hosts import Host, HostProvider, NetnsProvider
from harness.testbed.topology import ROUTER, Endpoint, TopologyPlan

DEFAULT_BLOCK = "198.18.0.0/15"


class TestbedTerminated(KeyboardInterrupt):
    """SIGTERM arrived: unwinds like Ctrl-C so every `with Testbed` tears down."""

    __test__ = False  # not a pytest test class


_FEATURES: Any = None


def _netem_available() -> bool:
    # Probing builds a namespace; do it once per process and only when a backend must be chosen.
    global _FEATURES
    if _FEATURES is None:
        _FEATURES = probe_kernel()
    return bool(_FEATURES.netem)


def choose_backend(
    links: Sequence[LinkSpec],
    netem_available: bool | None,
    emulate: bool = False,
    faults: bool = False,
) -> str:
    """'none' for unimpaired links (unless `emulate`); else netem or linkem as asked. Faults
    need linkem's runtime control and byte counters, whatever the kernel has."""
    if not any(link.impaired for link in links) and not emulate and not faults:
        return "none"
    asked = {link.backend for link in links} - {"auto"}
    if len(asked) > 1:
        raise UserInputError(
            f"the links ask for different backends ({', '.join(sorted(asked))})",
            key="link.backend",
            fix="use one backend for every link of a testbed",
        )
    if faults:
        if asked == {"netem"}:
            raise UserInputError(
                "faults need linkem (its runtime control and byte counters), not netem",
                key="link.backend",
                fix="set link.backend = 'linkem' or 'auto'",
            )
        return "linkem"
    if asked == {"linkem"}:
        return "linkem"
    if netem_available is None:
        netem_available = _netem_available()
    if asked == {"netem"}:
        if not netem_available:
            raise EnvironmentProblem(
                "link.backend is 'netem' but this kernel has no netem qdisc (sch_netem is "
                "not built in and modules cannot be loaded here); use backend = 'auto' or "
                "'linkem' to emulate the link in user space"
            )
        return "netem"
    return "netem" if netem_available else "linkem"


class Testbed:
    """A router, N+1 hosts and emulated links; a context manager that leaves nothing behind."""

    __test__ = False

    hosts: dict[str, Host]

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
        provider: HostProvider | None = None,
        endpoints: Sequence[Endpoint] | None = None,
        server_cpus: str | None = None,
        faults: bool = False,
    ) -> None:
        """`netem_available` skips the kernel probe (tests); `emulate` runs the emulator even
        for an unimpaired link, to measure its own cost (benchmarks). `provider`: where the
        hosts come from (default: namespaces of the testbed's own). `endpoints` replaces
        `link` and `hosts` with any number of secondaries (see `Testbed.of`). `server_cpus`
        (a cpuset list): processes spawned in a cgroup (the servers) are held to those CPUs
        (harness.observe.cpuset decides; None: they share the driver's). `faults`: linkem on
        every direction, reading headers (bytes), with its control socket, so that faults
        can be set while it runs (`Testbed.link_control`)."""
        self.server_cpus = server_cpus
        self.endpoints = tuple(endpoints or topology.two_hosts(link, hosts))
        topology.netns_suffixes(self.endpoints)  # one primary, unique names
        self.run_dir = Path(run_dir)
        self.block = block
        self.label = label
        self.provider: HostProvider = provider or NetnsProvider()
        self._netem_available = netem_available
        self._emulate = emulate
        self._faults = faults
        self.backend = "none"
        self.testbed_id = ""
        self.plan: TopologyPlan | None = None
        self.emulation: emulation.LinkEmulation | None = None
        self._registry: reg.Registry | None = None
        self._procs: dict[int, tuple[subprocess.Popen[Any], dict[str, Any]]] = {}
        self._applied: dict[str, dict[str, str]] = {}
        self._effective: dict[str, dict[str, str]] = {}
        self._cgroups: dict[int, tuple[cgroups.Cgroup, dict[str, Any]]] = {}
        self.cgroup_cpu_s = 0.0  # CPU seconds of the processes stopped in cgroups (servers)
        self._init_sysctls: list[dict[str, str]] = []
        self._provider_info: dict[str, Any] | None = None
        self._offloads_off = False
        self._old_handlers: dict[int, Any] = {}
        self.teardown_report: list[str] = []

    @classmethod
    def of(cls, endpoints: Sequence[Endpoint], run_dir: Path, **options: Any) -> Testbed:
        """A testbed of these endpoints (one primary, any number of secondaries)."""
        return cls(LinkSpec(), HostsSpec(), run_dir, endpoints=endpoints, **options)

    # --- the hosts ------------------------------------------------------------------------

    @property
    def primary(self) -> Host:
        return next(h for h in self.hosts.values() if h.role == "primary")

    @property
    def secondaries(self) -> list[Host]:
        return [h for h in self.hosts.values() if h.role == "secondary"]

    @property
    def secondary(self) -> Host:
        """The secondary of a testbed that has one."""
        (only,) = self.secondaries
        return only

    @property
    def router(self) -> Host:
        return self.hosts[ROUTER]

    @property
    def link(self) -> LinkSpec:
        """The link of a testbed with one secondary."""
        (only,) = [e for e in self.endpoints if e.role == "secondary"]
        return only.link

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
            topology.parse_block(self.block)
        except ValueError as exc:
            raise UserInputError(str(exc), key="block", fix="e.g. 198.18.0.0/15") from None
        links = [e.link for e in self.endpoints]
        self.backend = choose_backend(links, self._netem_available, self._emulate, self._faults)
        binary = linkem.find_binary() if self.backend == "linkem" else None
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._create_registry()
        assert self.plan is not None and self._registry is not None
        built = self.provider.build(
            self.plan, self.endpoints, self._segment_mtus(), self.run_dir, self._add
        )
        self.plan, self.hosts, self._provider_info = built.plan, built.hosts, built.info
        # Forwarding is the router's job whoever built it; checked, not assumed.
        if self.router.sysctl("net.ipv4.ip_forward") != "1":
            raise EnvironmentProblem(f"the router ({self.router.netns}) does not forward")
        self._applied[ROUTER] = {"net.ipv4.ip_forward": "1"}
        self._apply_host_sysctls()
        if self.backend != "none" or emulation.rated(self.endpoints):
            self._offloads()
        self.emulation = emulation.LinkEmulation(
            self.hosts,
            self.plan,
            self.endpoints,
            backend=self.backend,
            run_dir=self.run_dir,
            record=self._add,
            spawn=self.spawn,
            persistent=self.provider.persistent,
            every_direction=self._emulate or self._faults,
            label=self.label or "",
            control=self._control_path() if self._faults else None,
        )
        self.emulation.apply(binary)
        self._check_reachable()

    def _control_path(self) -> Path:
        """linkem's control socket, recorded before linkem makes it."""
        linkem.CONTROL_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = linkem.CONTROL_DIR / f"{self.testbed_id}.sock"
        self._add("file", path=str(path))
        return path

    def _create_registry(self) -> None:
        directory = reg.registry_dir()
        network = topology.parse_block(self.block)
        try:
            prefixlen = topology.slice_prefixlen(
                network, len(self.endpoints), self.provider.segment_prefixlen
            )
        except ValueError as exc:
            raise UserInputError(str(exc), key="block", fix="give a larger block") from None
        with reg.locked(directory):
            registries, _ = reg.load_all(directory)
            used = {str(r.data.get("slice")) for r in registries if r.data.get("slice")}
            used |= self.provider.reserved_subnets()
            suffixes = topology.netns_suffixes(self.endpoints)
            for _ in range(100):
                testbed_id = secrets.token_hex(3)
                names = [topology.netns_name(testbed_id, s) for s in [*suffixes.values(), "r"]]
                if not (directory / f"{testbed_id}.json").exists() and not any(
                    Path("/run/netns", name).exists() for name in names
                ):
                    break
            else:  # pragma: no cover - 16M ids
                raise EnvironmentProblem("could not find a free testbed id")
            try:
                slice_ = self.provider.fixed_slice() or topology.choose_slice(
                    self.block, testbed_id, used, prefixlen
                )
            except LookupError as exc:
                raise EnvironmentProblem(str(exc)) from None
            self.testbed_id = testbed_id
            self.plan = topology.plan_topology(testbed_id, self.block, slice_, self.endpoints)
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

    def _segment_mtus(self) -> dict[str, int]:
        """A secondary's segment delivers its forward direction (link.forward.mtu); the
        primary's carries every reverse direction (the smallest of their MTUs)."""
        mtus = {e.name: e.link.forward.mtu for e in self.endpoints if e.role == "secondary"}
        primary = next(e for e in self.endpoints if e.role == "primary")
        reverse = [e.link.reverse.mtu for e in self.endpoints if e.role == "secondary"]
        mtus[primary.name] = min(reverse, default=primary.link.forward.mtu)
        return mtus

    def _offloads(self) -> None:
        """TSO/GSO/GRO off on every veth: loss and delay then act on single packets."""
        assert self.plan is not None
        for name, seg in self.plan.segments.items():
            for who, ifname in ((self.hosts[name], seg.host_if), (self.router, seg.router_if)):
                who.run(["ethtool", "-K", ifname, "tso", "off", "gso", "off", "gro", "off"])
        self._offloads_off = True

    # --- per-host TCP settings ---------------------------------------------------------------

    def _apply_host_sysctls(self) -> None:
        for endpoint in self.endpoints:
            host = self.hosts[endpoint.name]
            wanted = endpoint.settings.sysctls()
            cc = wanted.get("net.ipv4.tcp_congestion_control")
            if cc:
                self._allow_cc(cc)
            applied: dict[str, str] = {}
            # Congestion control first: tcp_* values never depend on it, but a refused cc is
            # the most likely failure and should be reported before anything else.
            for key in sorted(wanted, key=lambda k: k != "net.ipv4.tcp_congestion_control"):
                value = wanted[key]
                where = f"hosts.{endpoint.role}.sysctl.{key}"
                if self.provider.persistent:
                    # The host outlives this testbed: the next one must find it as it was.
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
            self._applied[endpoint.name] = applied
            self._effective[endpoint.name] = host.sysctls(list(PER_HOST_SYSCTLS))

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

    def _check_reachable(self) -> None:
        """One reply primary -> each secondary, unless a link is meant to lose most packets."""
        for endpoint in self.endpoints:
            for spec in (endpoint.link.forward, endpoint.link.reverse):
                if spec.loss.active and not (spec.loss.model == "random" and spec.loss.p < 50):
                    return
        wait = max(5.0, 4 * emulation.link_rtt(self.endpoints) + 2)
        for secondary in self.secondaries:
            argv = ["ping", "-n", "-q", "-c", "1", "-i", "0.05", "-w", str(round(wait)),
                    secondary.address]  # fmt: skip
            result = self.primary.run(argv, check=False, timeout=wait + 10)
            if result.returncode != 0:
                raise EnvironmentProblem(
                    f"the testbed is up but the primary cannot reach {secondary.name} "
                    f"({secondary.address}) within {wait:.0f} s: {result.stdout.strip()}"
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
        With `cgroup` (a short name, e.g. the server's host) the process runs in a cgroup of
        its own, entered before exec so that forked children are counted too; the cgroup is
        recorded before the process so that teardown stops the process, then removes it.
        With `tool` the command comes from the host's own file system (Host.tool_argv).
        """
        full_argv = host.tool_argv(argv, cwd, die_with_parent=True) if tool else host.argv(argv)
        group = None
        layout = cgroups.detect() if cgroup is not None else None
        if layout is not None and layout.kind != "proc":  # else: sampled from /proc instead
            name = f"xfb-{self.testbed_id}-{cgroup}"
            cpus = self.server_cpus
            paths = cgroups.cgroup_dirs(name, layout, cpuset=cpus is not None)
            listed = self._add("cgroup", paths=paths)  # before made
            group = cgroups.Cgroup.create(name, layout, cpus)
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

    def stop(
        self, proc: subprocess.Popen[Any], timeout: float = 10.0, *, signalled: bool = False
    ) -> int:
        """SIGTERM (unless `signalled`: sent already), wait up to `timeout`, then SIGKILL;
        returns the exit status."""
        stop_process(proc, timeout, signalled=signalled, kill_wait=10)
        entry = self._procs.pop(proc.pid, None)
        if entry is not None and self._registry is not None:
            self._registry.discard(entry[1])
        grouped = self._cgroups.pop(proc.pid, None)
        if grouped is not None:
            group, listed = grouped
            with contextlib.suppress(OSError, ValueError, KeyError):  # its last figure
                usage = group.read()
                self.cgroup_cpu_s += usage.cpu_user_s + usage.cpu_system_s
            cgroups.remove(group.paths)
            if self._registry is not None:
                self._registry.discard(listed)
        return int(proc.returncode)

    # --- between repetitions, and observations --------------------------------------------------

    def flush_route_metrics(self) -> None:
        """Forget cached ssthresh/RTT per destination so repetitions start alike (every
        host at once: a flush is a process each, milliseconds that add up per repeat)."""
        hosts = (self.primary, *self.secondaries)
        with concurrent.futures.ThreadPoolExecutor(max_workers=min(len(hosts), 16)) as pool:
            list(pool.map(lambda h: h.run(["ip", "tcp_metrics", "flush"], check=False), hosts))

    def link_counters(self) -> dict[str, Any]:
        return self.emulation.counters() if self.emulation is not None else {}

    def link_queued(self) -> tuple[int, float] | None:
        """Packets the link emulator holds, read when (unix time); Emulation.queued."""
        return self.emulation.queued() if self.emulation is not None else None

    def link_control(self) -> linkem.LinkemControl | None:
        """linkem's runtime control (a testbed built with `faults`), else None."""
        return self.emulation.control if self.emulation is not None else None

    def describe(self) -> dict[str, Any]:
        assert self.plan is not None
        hosts: dict[str, Any] = {}
        for name, host in self.hosts.items():
            hosts[name] = {
                "role": host.role,
                "netns": host.netns,
                "address": host.address,
                "interfaces": host.interfaces,
                "sysctls_applied": self._applied.get(name, {}),
                "sysctls": self._effective.get(name, {}),
            }
        link = self.link.model_dump(mode="json") if len(self.secondaries) == 1 else None
        return {
            "testbed_id": self.testbed_id,
            "label": self.label,
            "topology": self.provider.name,
            "compose": self._provider_info,
            "backend": self.backend,
            "block": self.block,
            "slice": self.plan.slice,
            "registry": str(self._registry.path) if self._registry else None,
            "hosts": hosts,
            "link": link,
            "links": {
                e.name: e.link.model_dump(mode="json")
                for e in self.endpoints
                if e.role == "secondary"
            },
            "emulation": {
                "offloads_off": self._offloads_off,
                **(self.emulation.describe() if self.emulation else {}),
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
