"""The registry: everything a testbed creates, written down before or as it is created.

One JSON file per testbed under /run/xfrbench/testbeds/<id>.json (tmpfs: a reboot clears
both the file and what it lists). Items are appended in creation order and saved atomically
each time, so a driver killed at any point leaves a file that lists what to remove. Teardown
(normal exit, exception, Ctrl-C, SIGTERM) and `xfrbench clean` both run the same plan: the
items in reverse order. Nothing is ever found by pattern: only recorded ids are touched, and
a process is signalled only while its start time still matches the recorded one, so a pid the
kernel recycled for somebody else's process is left alone.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.core.errors import XfrbenchError
from harness.core.filelock import exclusive
from harness.observe import cgroup as cgroups

FORMAT = 1
DEFAULT_DIR = Path("/run/xfrbench/testbeds")


def registry_dir() -> Path:
    # Tests point this elsewhere; production always uses /run (cleared on reboot).
    return Path(os.environ.get("XFRBENCH_REGISTRY_DIR", DEFAULT_DIR))


def proc_start_time(pid: int) -> int | None:
    """Start time of `pid` in clock ticks since boot (field 22 of /proc/PID/stat), None if gone.

    The pair (pid, start time) names a process uniquely until reboot.
    """
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # The command name (field 2) may hold spaces and parentheses: split after the last ')'.
    fields = text[text.rindex(")") + 2 :].split()
    if fields[0] == "Z":  # a zombie has exited; only its parent's wait() is missing
        return None
    return int(fields[19])


def alive(pid: int, start: int | None) -> bool:
    return start is not None and proc_start_time(pid) == start


# --- pure helpers -----------------------------------------------------------------------


def add_names(current: str, names: list[str]) -> str:
    words = current.split()
    return " ".join(words + [name for name in names if name not in words])


def remove_names(current: str, names: list[str], keep: set[str]) -> str:
    return " ".join(word for word in current.split() if word not in names or word in keep)


def normalize_sysctl(value: str) -> str:
    """The kernel prints vectors tab-separated; compare them word by word."""
    return " ".join(value.split())


@dataclass(frozen=True)
class Action:
    kind: str  # a registered undo kind (UNDO), or "kill" for a recorded process
    target: str
    detail: dict[str, Any] = field(default_factory=dict)
    item: dict[str, Any] | None = field(default=None, compare=False, repr=False)

    def describe(self) -> str:
        return f"{self.kind} {self.target}"


@dataclass(frozen=True)
class UndoKind:
    """How to undo one kind of registry item.

    `target(item)` names it in messages; `undo(action)` carries it out (the item is its
    `detail`) and returns what it did,
    "" when there was nothing left to do, "~note" for something worth saying that needs no
    retry, or "!problem" when it failed (the item stays listed for `xfrbench clean`).
    """

    target: Callable[[dict[str, Any]], str]
    undo: Callable[[Action], str]


# Kinds every testbed uses are registered below; a host provider registers its own (the
# compose provider: compose_project, netns_attached) when it is imported.
UNDO: dict[str, UndoKind] = {}


def register_undo(
    kind: str, target: Callable[[dict[str, Any]], str], undo: Callable[[Action], str]
) -> None:
    UNDO[kind] = UndoKind(target, undo)


def plan_cleanup(
    items: list[dict[str, Any]],
    start_time_of: Callable[[int], int | None],
    still_needed_cc: set[str] | None = None,
    still_needed_dirs: set[str] | None = None,
) -> tuple[list[Action], list[str]]:
    """What to undo, newest first, and notes on what is left alone (and why).

    Pure: the caller passes the process table lookup, and the congestion controls and shared
    folders other live testbeds still rely on.
    """
    actions: list[Action] = []
    notes: list[str] = []
    for item in reversed(items):
        kind = str(item.get("kind"))
        if kind == "process":
            pid, start = int(item["pid"]), item.get("start")
            now = start_time_of(pid)
            if now is None:
                continue  # already exited
            if start is None or now != start:
                notes.append(f"pid {pid} is a different process now (recycled); left alone")
                continue
            detail = {"pid": pid, "start": start, "argv": item.get("argv", [])}
            actions.append(Action("kill", str(pid), detail, item))
        elif kind == "cc_allowed":
            added = [
                name for name in item.get("added", []) if name not in (still_needed_cc or set())
            ]
            kept = sorted(set(item.get("added", [])) - set(added))
            if kept:
                notes.append(
                    f"congestion control {', '.join(kept)} stays allowed: "
                    "another live testbed relies on it"
                )
            if added:
                actions.append(Action("cc_allowed", " ".join(added), {"added": added}, item))
        elif kind == "file" and item.get("keep"):
            continue  # a run record kept with the run
        elif kind == "shared_dir" and item.get("path") in (still_needed_dirs or set()):
            notes.append(f"folder {item['path']} stays: another live testbed relies on it")
        elif kind in UNDO:
            actions.append(Action(kind, UNDO[kind].target(item), dict(item), item))
        else:
            notes.append(f"unknown registry item {item!r}; left alone")
    return actions, notes


# --- the file ---------------------------------------------------------------------------


@contextlib.contextmanager
def locked(directory: Path | None = None) -> Iterator[None]:
    """Serialise registry changes that read other testbeds' files (slices, allowed cc)."""
    directory = directory or registry_dir()
    ensure_dir(directory)
    with exclusive(directory / ".lock"):
        yield


def ensure_dir(directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(directory, 0o700)


class Registry:
    def __init__(self, path: Path, data: dict[str, Any]) -> None:
        self.path = path
        self.data = data

    @classmethod
    def create(cls, directory: Path, testbed_id: str, **meta: Any) -> Registry:
        pid = os.getpid()
        data = {
            "format": FORMAT,
            "id": testbed_id,
            "driver": {"pid": pid, "start": proc_start_time(pid)},
            "created_at": time.time(),
            **meta,
            "items": [],
        }
        registry = cls(directory / f"{testbed_id}.json", data)
        # O_EXCL: two drivers can never share an id (and so never share names).
        fd = os.open(registry.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        os.close(fd)
        registry.save()
        return registry

    @classmethod
    def load(cls, path: Path) -> Registry:
        data = json.loads(path.read_text())
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(f"{path}: not an xfrbench testbed registry (format {FORMAT})")
        return cls(path, data)

    @property
    def testbed_id(self) -> str:
        return str(self.data["id"])

    @property
    def items(self) -> list[dict[str, Any]]:
        return list(self.data["items"])

    def driver_alive(self) -> bool:
        driver = self.data.get("driver", {})
        return alive(int(driver.get("pid", 0)), driver.get("start"))

    def add(self, kind: str, **data: Any) -> dict[str, Any]:
        item = {"kind": kind, **data}
        self.data["items"].append(item)
        self.save()
        return item

    def discard(self, item: dict[str, Any]) -> None:
        with contextlib.suppress(ValueError):
            self.data["items"].remove(item)
        self.save()

    def save(self) -> None:
        tmp = self.path.with_suffix(".json.tmp")
        fd = os.open(tmp, os.O_CREAT | os.O_TRUNC | os.O_WRONLY, 0o600)
        with os.fdopen(fd, "w") as handle:
            json.dump(self.data, handle, indent=1, sort_keys=True)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, self.path)

    def delete(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


def load_all(directory: Path | None = None) -> tuple[list[Registry], list[str]]:
    directory = directory or registry_dir()
    registries: list[Registry] = []
    problems: list[str] = []
    if not directory.is_dir():
        return registries, problems
    for path in sorted(directory.glob("*.json")):
        try:
            registries.append(Registry.load(path))
        except (OSError, ValueError) as exc:
            problems.append(f"{path}: unreadable registry ({exc}); left alone")
    return registries, problems


def _items_of_live_others(
    registries: list[Registry], own_id: str, kind: str
) -> Iterator[dict[str, Any]]:
    for registry in registries:
        if registry.testbed_id != own_id and registry.driver_alive():
            yield from (item for item in registry.items if item.get("kind") == kind)


def cc_needed_by_others(registries: list[Registry], own_id: str) -> set[str]:
    needed: set[str] = set()
    for item in _items_of_live_others(registries, own_id, "cc_allowed"):
        needed.update(item.get("added", []))
    return needed


def shared_dirs_of_others(registries: list[Registry], own_id: str) -> set[str]:
    """Folders that several testbeds rely on at once (the one privilege-separation folder
    every lab sshd needs): the last live one to go removes them."""
    return {str(item["path"]) for item in _items_of_live_others(registries, own_id, "shared_dir")}


# --- doing it ---------------------------------------------------------------------------

CC_ALLOWED = "net.ipv4.tcp_allowed_congestion_control"


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, check=False, timeout=30)


def read_sysctl(key: str) -> str:
    return Path("/proc/sys", *key.split(".")).read_text().strip()


def write_sysctl(key: str, value: str) -> None:
    Path("/proc/sys", *key.split(".")).write_text(value + "\n")


def terminate(pid: int, start: int, timeout: float = 5.0) -> str:
    """SIGTERM, then SIGKILL after `timeout`; each signal only while the start time matches."""
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 2.0)):
        if not alive(pid, start):
            return "exited"
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            # Reap it if it is our own child; a stranger's child is reaped by its parent/init.
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, os.WNOHANG)
            if not alive(pid, start):
                return "terminated" if sig == signal.SIGTERM else "killed"
            time.sleep(0.02)
    return "still running"


def execute(actions: list[Action]) -> tuple[list[str], list[str], list[Action]]:
    """Carry out a cleanup plan; returns (done, notes, failed). Carries on past failures."""
    done: list[str] = []
    notes: list[str] = []
    failed: list[Action] = []
    for action in actions:
        try:
            result = _execute_one(action)
        except (OSError, subprocess.SubprocessError, XfrbenchError) as exc:
            result = f"!{exc}"
        if result.startswith("!"):
            notes.append(f"{action.describe()}: {result[1:]}")
            failed.append(action)
        elif result.startswith("~"):  # nothing to retry, but worth saying
            notes.append(f"{action.describe()}: {result[1:]}")
        elif result:
            done.append(result)
    return done, notes, failed


def _netns_exists(name: str) -> bool:
    return Path("/run/netns", name).exists()


def _execute_one(action: Action) -> str:
    if action.kind == "kill":
        detail = action.detail
        outcome = terminate(detail["pid"], detail["start"])
        argv = " ".join(detail.get("argv", [])[:3])
        if outcome == "still running":
            return f"!pid {detail['pid']} ({argv}) survived SIGKILL"
        return f"process {detail['pid']} ({argv}) {outcome}"
    kind = UNDO.get(action.kind)
    if kind is None:
        return f"!unknown action {action.kind}"
    return kind.undo(action)


def _undo_iptables(action: Action) -> str:
    detail = action.detail
    netns = detail["netns"]
    if not _netns_exists(netns):
        return ""  # the rule lived in the namespace and went with it
    table = detail.get("table", "filter")
    argv = ["ip", "netns", "exec", netns, "iptables", "-w", "-t", table, "-D", detail["chain"]]
    result = _run([*argv, *detail["rule"]])
    if result.returncode != 0:
        return f"!could not delete rule: {result.stderr.strip()}"
    return f"iptables rule in {netns}: -t {table} -A {detail['chain']} {' '.join(detail['rule'])}"


def _undo_netns(action: Action) -> str:
    name = action.target
    if not _netns_exists(name):
        return ""
    # Deleting a namespace kills nothing: anything still inside would keep it (and its
    # sockets) alive. Processes inside our own recorded namespace are ours by construction.
    pids = _run(["ip", "netns", "pids", name]).stdout.split()
    stray: list[str] = []
    for text in pids:
        start = proc_start_time(int(text))
        if start is not None:
            terminate(int(text), start, timeout=2.0)
            stray.append(text)
    result = _run(["ip", "netns", "delete", name])
    if result.returncode != 0:
        return f"!ip netns delete failed: {result.stderr.strip()}"
    suffix = f" (stopped stray pids {', '.join(stray)})" if stray else ""
    return f"namespace {name}{suffix}"


def _undo_sysctl(action: Action) -> str:
    detail = action.detail
    key, old, new = action.target, str(detail["old"]), str(detail["new"])
    current = read_sysctl(key)
    if normalize_sysctl(current) != normalize_sysctl(new):
        return f"~{key} is {current!r} now, not the {new!r} we set; left as is (was {old!r})"
    write_sysctl(key, old)
    return f"sysctl {key} restored to {old!r}"


def _undo_cc_allowed(action: Action) -> str:
    detail = action.detail
    current = read_sysctl(CC_ALLOWED)
    restored = remove_names(current, detail["added"], keep=set())
    if restored != normalize_sysctl(current):
        write_sysctl(CC_ALLOWED, restored)
    return f"sysctl {CC_ALLOWED} restored to {restored!r}"


def _undo_cgroup(action: Action) -> str:
    detail = action.detail
    left = cgroups.remove(detail["paths"])
    if left:
        return f"!cgroup not removed: {', '.join(left)}"
    return f"cgroup {action.target}"


def _undo_file(action: Action) -> str:
    try:
        Path(action.target).unlink()
    except FileNotFoundError:
        return ""
    return f"file {action.target}"


def _undo_qdisc(action: Action) -> str:
    detail = action.detail
    # Hosts that outlive the testbed (a static compose project's link): its root qdisc goes.
    netns, dev = detail["netns"], detail["dev"]
    if not _netns_exists(netns):
        return ""
    result = _run(["ip", "netns", "exec", netns, "tc", "qdisc", "del", "dev", dev, "root"])
    if result.returncode != 0 and "No such file" not in result.stderr:
        return f"!tc qdisc del failed: {result.stderr.strip()}"
    return f"root qdisc on {dev} in {netns}"


def _undo_netns_sysctl(action: Action) -> str:
    detail = action.detail
    netns, key, old = detail["netns"], detail["key"], str(detail["old"])
    if not _netns_exists(netns):
        return ""
    result = _run(["ip", "netns", "exec", netns, "sysctl", "-qw", f"{key}={old}"])
    if result.returncode != 0:
        return f"!sysctl {key} not restored: {result.stderr.strip()}"
    return f"sysctl {key} in {netns} restored to {old!r}"


def _undo_shared_dir(action: Action) -> str:
    """Remove a folder made for several testbeds, once the last is gone, if still empty."""
    path = Path(action.target)
    try:
        path.rmdir()
    except FileNotFoundError:
        return ""
    except OSError:
        return f"~{path} is not empty any more; left"
    return f"folder {path}"


register_undo("iptables", lambda item: " ".join(item["rule"]), _undo_iptables)
register_undo("netns", lambda item: str(item["name"]), _undo_netns)
register_undo("sysctl", lambda item: str(item["key"]), _undo_sysctl)
register_undo("cc_allowed", lambda item: " ".join(item.get("added", [])), _undo_cc_allowed)
register_undo("cgroup", lambda item: " ".join(item["paths"]), _undo_cgroup)
register_undo("file", lambda item: str(item["path"]), _undo_file)
register_undo("qdisc", lambda item: f"{item['netns']} {item['dev']}", _undo_qdisc)
register_undo("netns_sysctl", lambda item: f"{item['netns']} {item['key']}", _undo_netns_sysctl)
register_undo("shared_dir", lambda item: str(item["path"]), _undo_shared_dir)
# (records written before "shared_dir" name the lab's /run/sshd "empty_dir")
register_undo("empty_dir", lambda item: str(item["path"]), _undo_shared_dir)


def undo(
    registry: Registry, registries: list[Registry] | None = None
) -> tuple[list[str], list[str], list[str]]:
    """Undo everything `registry` lists, then delete the registry file itself.

    Returns (done, notes, problems): problems are what could not be undone (kept listed).
    """
    with locked(registry.path.parent):
        others = registries if registries is not None else load_all(registry.path.parent)[0]
        actions, notes = plan_cleanup(
            registry.items,
            proc_start_time,
            cc_needed_by_others(others, registry.testbed_id),
            shared_dirs_of_others(others, registry.testbed_id),
        )
        done, more_notes, failed = execute(actions)
        notes += more_notes
        problems: list[str] = []
        if not failed:
            registry.delete()
            done.append(f"registry {registry.path}")
        else:
            # Keep only what could not be undone, so `xfrbench clean` retries just that.
            keep = [action.item for action in failed if action.item is not None]
            registry.data["items"] = [
                item for item in registry.items if any(item is k for k in keep)
            ]
            registry.save()
            problems = [action.describe() for action in failed]
            problems.append(f"registry {registry.path} kept: run `xfrbench clean` again")
    return done, notes, problems
