"""One cgroup per server process, for its CPU seconds and memory, on cgroup v2 or v1.

Layouts, chosen by `detect()` from /proc/self/mountinfo:
- "v2": a cgroup2 hierarchy offering the memory controller (users' hosts, systemd). The
  groups go under <mount>/xfrbench/ with `+memory` in both subtree_controls. The cpu
  controller is not needed: cpu.stat's usage/user/system are there without it (and enabling
  it fails while realtime threads exist).
- "v1": separate cpuacct and memory hierarchies (hybrid hosts such as the build VM, where the
  cgroup2 tree at /sys/fs/cgroup/unified has no controllers). One group in each.
- "proc": neither can be used; the caller samples the process tree in /proc instead.

Memory, two figures that mean different things:
- anonymous memory now (`anon_bytes`): the server's own heap and stacks, what grows with the
  zones it holds. v2 memory.stat `anon`; v1 `total_rss` (`rss` on kernels without the
  hierarchical figures): anonymous and swap cache memory, transparent huge pages included
  (v1's `rss_huge` is a part of `rss`, not added to it). A sampler takes its peak per case.
- charged memory (`charged_bytes`, and `charged_peak_bytes` the kernel's peak since the
  group was made, i.e. since the server started): everything the group is charged for,
  page cache included (the zone files it read and wrote). v2 memory.current / memory.peak
  (Linux 5.19+), v1 memory.usage_in_bytes / memory.max_usage_in_bytes. Servers shared by
  the cases of a group show the same peak for all of them.
- the charged peak of one transfer (`peak_since_reset_bytes`): `reset_peak()` at its start
  mark starts a new peak where the kernel allows it, read at its end mark. v2: a write to
  memory.peak resets it for reads through that open file only (Linux 6.12+; before, the
  file is read-only and there is no such figure), so the global peak stays. v1: writing 0
  to memory.max_usage_in_bytes resets the group's one peak to its usage now; the peak
  before each reset is kept here, so `charged_peak_bytes` still means since the start.

CPU seconds are exact on both: the kernel counts a group's run time in nanoseconds but its
user/system split only per tick. v2's cpu.stat scales the tick split to the exact total;
on v1 `adjust_cputime` does the same with cpuacct.usage (cpuacct.stat alone moves in 10 ms
steps).

CPU sets (harness.observe.cpuset decides them): where the host has cores enough, a server's
group is also a cpuset group holding it to the servers' CPUs (v2: the cpuset controller
enabled in both subtree_controls; v1: the cpuset hierarchy, whose groups need cpuset.cpus
and cpuset.mems written, parents first, before a process may join).

A server joins its groups before it execs (`attach_argv`), so the children it forks (NSD)
are counted too. Groups are created at the hierarchy's root, beside the host's own, not
inside the driver's group: v2 forbids processes in a group whose controllers are delegated
to children, and the driver's group holds the driver.
"""

from __future__ import annotations

import contextlib
import errno
import os
import time
from dataclasses import dataclass
from pathlib import Path

from harness.core.errors import EnvironmentProblem

PARENT = "xfrbench"
CGROUP_CPU_RESOLUTION_S = 1e-6
_RMDIR_WAIT = 5.0


@dataclass(frozen=True)
class CgroupUsage:
    """CPU and memory of one server; `source` says where they came from."""

    cpu_user_s: float
    cpu_system_s: float
    anon_bytes: int | None  # anonymous memory: v2 anon, v1 total_rss, /proc RssAnon summed
    charged_bytes: int | None  # charged to the group, page cache included; None from /proc
    charged_peak_bytes: int | None  # its peak since the server started (None: not kept)
    source: str  # "cgroup-v1" | "cgroup-v2" | "proc"
    # The charged peak since reset_peak() (a transfer's start), while one is kept.
    peak_since_reset_bytes: int | None = None
    # The step CPU seconds move in: a cgroup's usage is counted in µs (v2 usage_usec; v1
    # cpuacct.usage in ns); /proc's in clock ticks (procfs.TreeUsage.tick_s, 10 ms).
    cpu_resolution_s: float = CGROUP_CPU_RESOLUTION_S


@dataclass(frozen=True)
class Mount:
    mountpoint: str
    fstype: str
    options: frozenset[str]  # super options: v1 controller names live here


@dataclass(frozen=True)
class Layout:
    kind: str  # "v2" | "v1" | "proc"
    cpu_root: str | None  # hierarchy root holding cpu figures (v2: the only root)
    memory_root: str | None
    reason: str  # one line for doctor / run.json
    cpuset_root: str | None = None  # where cpuset groups go (None: no cpuset controller)

    @property
    def roots(self) -> list[str]:
        return list(dict.fromkeys(r for r in (self.cpu_root, self.memory_root) if r))


# --- pure parsers -----------------------------------------------------------------------


def _unescape(field: str) -> str:
    # mountinfo escapes space, tab, newline and backslash as \ooo.
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and field[i + 1 : i + 4].isdigit():
            out.append(chr(int(field[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def parse_mountinfo(text: str) -> list[Mount]:
    mounts = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or len(tail) < 3:
            continue
        mounts.append(Mount(_unescape(fields[4]), tail[0], frozenset(tail[2].split(","))))
    return mounts


def choose_layout(mounts: list[Mount], v2_controllers: dict[str, str]) -> Layout:
    """The layout for these mounts; `v2_controllers` maps each cgroup2 mountpoint to the text
    of its cgroup.controllers."""
    for mount in mounts:
        if mount.fstype == "cgroup2":
            offered = v2_controllers.get(mount.mountpoint, "").split()
            if "memory" in offered:
                root = mount.mountpoint
                cpuset = root if "cpuset" in offered else None
                return Layout("v2", root, root, f"cgroup v2 at {root} offers memory", cpuset)
    cpu = next((m for m in mounts if m.fstype == "cgroup" and "cpuacct" in m.options), None)
    memory = next((m for m in mounts if m.fstype == "cgroup" and "memory" in m.options), None)
    cpuset = next((m for m in mounts if m.fstype == "cgroup" and "cpuset" in m.options), None)
    if cpu and memory:
        return Layout(
            "v1",
            cpu.mountpoint,
            memory.mountpoint,
            f"cgroup v1 cpuacct at {cpu.mountpoint}, memory at {memory.mountpoint}",
            cpuset.mountpoint if cpuset else None,
        )
    return Layout("proc", None, None, "no cgroup hierarchy offers both cpu and memory figures")


def parse_flat_keyed(text: str) -> dict[str, int]:
    """`key value` lines (cpu.stat, cpuacct.stat, memory.stat)."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        words = line.split()
        if len(words) == 2 and words[1].lstrip("-").isdigit():
            out[words[0]] = int(words[1])
    return out


def parse_cpu_stat_v2(text: str) -> tuple[float, float]:
    """cpu.stat (microseconds) -> (user s, system s)."""
    stat = parse_flat_keyed(text)
    return stat["user_usec"] / 1e6, stat["system_usec"] / 1e6


def parse_cpuacct_stat_v1(text: str, user_hz: int = 100) -> tuple[float, float]:
    """cpuacct.stat (USER_HZ ticks, 10 ms) -> (user s, system s)."""
    stat = parse_flat_keyed(text)
    return stat["user"] / user_hz, stat["system"] / user_hz


def parse_ns(text: str) -> int:
    """A one-number file in nanoseconds (cpuacct.usage, usage_user, usage_sys)."""
    return int(text.split()[0])


def adjust_cputime(
    runtime_s: float, user_ticks: float, system_ticks: float, prev: tuple[float, float]
) -> tuple[float, float]:
    """The exact CPU time split into (user s, system s) by the tick counts' ratio.

    The kernel counts user and system time by sampling at each tick (4 ms at HZ=250), but
    the total run time exactly: cgroup v2's cpu.stat already splits the exact total this way
    (cputime_adjust in kernel/sched/cputime.c); this does the same for v1, whose
    usage_user/usage_sys are tick counts. `prev` is the split returned last time, so that
    neither part ever goes down (a counter a sampler subtracts must not) while the two still
    add up to `runtime_s`.
    """
    prev_user, prev_system = prev
    if prev_user + prev_system >= runtime_s:
        return prev
    if system_ticks <= 0:
        system = 0.0
    elif user_ticks <= 0:
        system = runtime_s
    else:
        system = min(runtime_s, system_ticks * runtime_s / (system_ticks + user_ticks))
    system = max(system, prev_system)
    user = runtime_s - system
    if user < prev_user:
        user = prev_user
        system = runtime_s - user
    return user, system


parse_memory_stat = parse_flat_keyed


def anon_bytes(memory_stat: dict[str, int]) -> int:
    """Resident anonymous memory: v2 `anon`, v1 `total_rss` (hierarchical) or `rss` (both
    count transparent huge pages already: `rss_huge` is a part of them)."""
    for key in ("anon", "total_rss", "rss"):
        if key in memory_stat:
            return memory_stat[key]
    raise ValueError("memory.stat has none of anon, total_rss, rss")


def _roots(layout: Layout, cpuset: bool) -> list[str]:
    """The hierarchies a group is made in: cpu and memory, and cpuset when asked for."""
    extra = [layout.cpuset_root] if cpuset and layout.cpuset_root else []
    return list(dict.fromkeys([*layout.roots, *extra]))


def cgroup_dirs(name: str, layout: Layout, cpuset: bool = False) -> list[str]:
    """Every directory `Cgroup.create(name, layout, cpus)` makes (`cpuset`: cpus given),
    parents first (for a registry entry written before they exist)."""
    _check_name(name)
    out = []
    for root in _roots(layout, cpuset):
        out += [os.path.join(root, PARENT), os.path.join(root, PARENT, name)]
    return out


def attach_argv(procs_files: list[str], argv: list[str]) -> list[str]:
    """`argv` wrapped so that the process joins the cgroups first and then execs in place.

    `sh` writes its own pid ($$) to each procs file and execs `argv`, so the server keeps
    the pid sh had (the one Popen returned) and everything it forks starts inside. The
    count comes first, so any argv (even one holding "--") is passed on untouched.
    """
    script = (
        'n=$1; shift; while [ "$n" -gt 0 ]; do '
        'echo $$ > "$1" || { echo "xfrbench: cannot join cgroup $1" >&2; exit 126; }; '
        "shift; n=$((n - 1)); done; "
        'exec "$@"'
    )
    return ["sh", "-c", script, "xfrbench-attach", str(len(procs_files)), *procs_files, *argv]


def _check_name(name: str) -> None:
    if not name or "/" in name or name in (".", "..") or "\n" in name:
        raise ValueError(f"{name!r} is not a plain cgroup name")


# --- thin I/O ---------------------------------------------------------------------------


def detect() -> Layout:
    """The layout this host offers to the driver (root needed to write to it)."""
    mounts = parse_mountinfo(Path("/proc/self/mountinfo").read_text())
    controllers = {}
    for mount in mounts:
        if mount.fstype == "cgroup2":
            with contextlib.suppress(OSError):
                path = os.path.join(mount.mountpoint, "cgroup.controllers")
                controllers[mount.mountpoint] = Path(path).read_text()
    layout = choose_layout(mounts, controllers)
    if layout.kind != "proc" and not all(os.access(r, os.W_OK) for r in layout.roots):
        return Layout("proc", None, None, f"{layout.reason}, but not writable (needs root)")
    return layout


def _enable(directory: str, controller: str) -> None:
    control = os.path.join(directory, "cgroup.subtree_control")
    if controller not in Path(control).read_text().split():
        Path(control).write_text(f"+{controller}")


def _inherited(directory: str, name: str) -> str:
    """A cpuset file's value, or its nearest ancestor's where it is empty (a v1 group is
    made with empty cpuset.cpus and cpuset.mems)."""
    while True:
        text = (_read_optional(directory, name) or "").strip()
        parent = os.path.dirname(directory)
        if text or parent == directory:
            return text
        directory = parent


def configure_cpuset(kind: str, parent: str, child: str, cpus: str) -> None:
    """Hold the group `child` (under `parent`, both made) to `cpus`. v1: a group may take a
    process only once its cpuset.cpus and cpuset.mems are set, its parent's first (the
    parent gets its own parent's, so that it holds every child's CPUs); v2: the controller
    is enabled above the group and only its cpuset.cpus is written (mems are inherited)."""
    if kind == "v2":
        _enable(os.path.dirname(parent), "cpuset")
        _enable(parent, "cpuset")
        Path(child, "cpuset.cpus").write_text(cpus)
        return
    for directory in (parent, child):
        for name in ("cpuset.cpus", "cpuset.mems"):
            if not (_read_optional(directory, name) or "").strip():
                value = _inherited(os.path.dirname(directory), name)
                Path(directory, name).write_text(value)
    Path(child, "cpuset.cpus").write_text(cpus)


class Cgroup:
    """One server's groups (one per hierarchy the layout uses)."""

    def __init__(
        self, name: str, layout: Layout, paths: list[str], cpus: str | None = None
    ) -> None:
        self.name = name
        self.layout = layout
        self.paths = paths  # every directory created (parents included), for teardown
        self.cpus = cpus  # the CPUs its cpuset group holds it to (None: not held)
        self._split: tuple[float, float] = (0.0, 0.0)  # v1: the last (user, system) read
        self._resetting = False  # a peak since reset_peak() is kept (until stop_peak())
        self._peak_fd: int | None = None  # v2: memory.peak, open since its reset
        self._peak_before_reset = 0  # v1: the highest peak read just before a reset

    @classmethod
    def create(cls, name: str, layout: Layout | None = None, cpus: str | None = None) -> Cgroup:
        """Make <root>/xfrbench/<name> in each hierarchy; an existing group is reused.
        `cpus` (a cpuset list, "1-3"): also hold it to those CPUs (the layout must offer a
        cpuset controller)."""
        layout = layout or detect()
        if layout.kind == "proc":
            raise EnvironmentProblem(f"no cgroup to create {name!r} in: {layout.reason}")
        if cpus is not None and layout.cpuset_root is None:
            raise EnvironmentProblem(f"no cpuset controller to hold {name!r} to CPUs {cpus}")
        dirs = cgroup_dirs(name, layout, cpuset=cpus is not None)
        made: list[str] = []
        try:
            for parent, child in zip(dirs[::2], dirs[1::2], strict=True):
                # Another testbed may remove the shared parent between our two mkdirs.
                for attempt in range(5):
                    try:
                        os.makedirs(parent, exist_ok=True)
                        if layout.kind == "v2":
                            _enable(os.path.dirname(parent), "memory")
                            _enable(parent, "memory")
                        os.makedirs(child, exist_ok=True)
                        break
                    except FileNotFoundError:
                        if attempt == 4:
                            raise
                made += [parent, child]
                if cpus is not None and os.path.dirname(parent) == layout.cpuset_root:
                    configure_cpuset(layout.kind, parent, child, cpus)
        except OSError as exc:
            remove(made)
            raise EnvironmentProblem(
                f"cannot create cgroup {name!r} ({layout.reason}): {exc}; run as root, "
                "or on a host whose cgroups the driver may write"
            ) from exc
        return cls(name, layout, made, cpus)

    def _dir(self, root: str | None) -> str:
        assert root is not None
        return os.path.join(root, PARENT, self.name)

    @property
    def procs_files(self) -> list[str]:
        roots = _roots(self.layout, self.cpus is not None)
        return [os.path.join(self._dir(root), "cgroup.procs") for root in roots]

    def pids(self) -> list[int]:
        pids: set[int] = set()
        for path in self.procs_files:
            with contextlib.suppress(FileNotFoundError):
                pids.update(map(int, Path(path).read_text().split()))
        return sorted(pids)

    def read(self) -> CgroupUsage:
        cpu = self._dir(self.layout.cpu_root)
        memory = self._dir(self.layout.memory_root)
        since_reset = None
        if self.layout.kind == "v2":
            user, system = parse_cpu_stat_v2(_read(cpu, "cpu.stat"))
            peak_text = _read_optional(memory, "memory.peak")  # Linux 5.19+
            peak = int(peak_text) if peak_text is not None else None
            current = int(_read(memory, "memory.current"))
            if self._peak_fd is not None:
                since_reset = int(os.pread(self._peak_fd, 64, 0))
        else:
            user, system = self._cpu_v1(cpu)
            peak_text = _read_optional(memory, "memory.max_usage_in_bytes")
            peak = int(peak_text) if peak_text is not None else None
            current = int(_read(memory, "memory.usage_in_bytes"))
            if peak is not None and self._resetting:
                since_reset = peak
            if peak is not None:
                peak = max(peak, self._peak_before_reset)
        return CgroupUsage(
            cpu_user_s=user,
            cpu_system_s=system,
            anon_bytes=anon_bytes(parse_memory_stat(_read(memory, "memory.stat"))),
            charged_bytes=current,
            charged_peak_bytes=peak,
            source=f"cgroup-{self.layout.kind}",
            peak_since_reset_bytes=since_reset,
        )

    def reset_peak(self) -> bool:
        """Start a new charged peak now (a transfer's start); False where the kernel keeps
        none that can be reset (v2 before Linux 6.12). The next reads carry it as
        `peak_since_reset_bytes` until stop_peak()."""
        self.stop_peak()
        memory = self._dir(self.layout.memory_root)
        if self.layout.kind == "v2":
            try:
                fd = os.open(os.path.join(memory, "memory.peak"), os.O_RDWR | os.O_CLOEXEC)
            except OSError:  # absent (before 5.19) or read-only (before 6.12)
                return False
            try:
                os.write(fd, b"reset\n")
            except OSError:
                os.close(fd)
                return False
            self._peak_fd = fd
        else:
            name = "memory.max_usage_in_bytes"
            before = _read_optional(memory, name)
            if before is None:
                return False
            self._peak_before_reset = max(self._peak_before_reset, int(before))
            Path(memory, name).write_text("0")
        self._resetting = True
        return True

    def stop_peak(self) -> None:
        """Keep no peak since a reset any longer (a transfer's end mark was read)."""
        self._resetting = False
        if self._peak_fd is not None:
            os.close(self._peak_fd)
            self._peak_fd = None

    def _cpu_v1(self, directory: str) -> tuple[float, float]:
        # cpuacct.stat alone moves in 10 ms steps: a small transfer would cost 0 or 0.01 s.
        runtime = parse_ns(_read(directory, "cpuacct.usage")) / 1e9
        user_text = _read_optional(directory, "cpuacct.usage_user")  # Linux 4.7+
        system_text = _read_optional(directory, "cpuacct.usage_sys")
        if user_text is not None and system_text is not None:
            ticks = (parse_ns(user_text), parse_ns(system_text))
        else:
            ticks = parse_cpuacct_stat_v1(_read(directory, "cpuacct.stat"), _user_hz())
        self._split = adjust_cputime(runtime, *ticks, self._split)
        return self._split


def _user_hz() -> int:
    return os.sysconf("SC_CLK_TCK")  # the USER_HZ that cpuacct.stat counts in


def _read(directory: str, name: str) -> str:
    with open(os.path.join(directory, name)) as f:
        return f.read()


def _read_optional(directory: str, name: str) -> str | None:
    try:
        return _read(directory, name)
    except FileNotFoundError:
        return None


def _has_child_groups(path: str) -> bool:
    try:
        return any(entry.is_dir() for entry in os.scandir(path))
    except FileNotFoundError:
        return False


def remove(paths: list[str], wait: float = _RMDIR_WAIT) -> list[str]:
    """Remove the groups in `paths`, deepest first; returns what could not be removed.

    A group still holding a dying process answers EBUSY for a moment: retried up to `wait`
    seconds. A parent that still has child groups (another testbed's) is left alone; one
    already gone is fine.
    """
    problems = []
    for path in sorted(dict.fromkeys(paths), key=lambda p: p.count("/"), reverse=True):
        if _has_child_groups(path):
            if os.path.basename(path) != PARENT:
                problems.append(f"{path}: still has child groups")
            continue
        deadline = time.monotonic() + wait
        while True:
            try:
                os.rmdir(path)
                break
            except FileNotFoundError:
                break
            except OSError as exc:
                if exc.errno == errno.EBUSY and os.path.basename(path) == PARENT:
                    break  # another testbed's group appeared meanwhile: it is theirs now
                if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                    problems.append(f"{path}: {exc.strerror}")
                    break
                time.sleep(0.05)
    return problems
