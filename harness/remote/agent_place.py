"""The agent's primitives (a part of `remote.agent.Agent`): what an agent-backed place
(remote/place.py) asks of its host, with no decision of the agent's own. The controller
renders a server's files and `put`s them; the agent spawns the argv it is given in a
cgroup, signals, stops or kills it, removes files, runs tools, and asks its own server
what it serves (SOA, sampled names, the primary's check) next to it.

Every file it writes or removes is in its run's folder; every process it spawns has a pid
file there (teardown.yml stops what the controller could not). Times it reports are this
host's clock (unix seconds).
"""

from __future__ import annotations

import base64
import contextlib
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import dns.name
import dns.rdata
import dns.rdataclass

from harness.core.stopping import stop_process
from harness.observe import cgroup as cgroups
from harness.observe.procfs import descendants
from harness.remote.agent_measures import proc_start
from harness.xfr.name_sample import served
from harness.xfr.primary_check import check_primary_serves
from harness.xfr.rrsum import ZoneSum
from harness.xfr.update import exchange_wire, query_soa

STOP_WAIT = 10.0
KILL_SETTLE = 5.0  # seconds a killed cgroup's children may take to die after their parent


def record_text(record: tuple[Any, int, Any]) -> list[Any]:
    """A (name, ttl, rdata) record as JSON (its rdata as text, with its type)."""
    name, ttl, rdata = record
    return [name.to_text(), ttl, int(rdata.rdtype), rdata.to_text()]


def record_from(data: list[Any]) -> tuple[Any, int, Any]:
    name, ttl, rdtype, text = data
    return dns.name.from_text(name), int(ttl), dns.rdata.from_text(dns.rdataclass.IN, rdtype, text)


class Spawned:
    """A process the agent spawned for the controller: its cgroup (None: not made here)."""

    def __init__(self, name: str, proc: subprocess.Popen[Any], group: Any) -> None:
        self.name = name
        self.proc = proc
        self.group = group


class Primitives:
    """The executing half of the agent: its state, and the pid files it records for
    teardown (_pidfile), are the Agent's."""

    run_dir: Path
    tag: str
    spawned: dict[int, Spawned]

    def _pidfile(self, name: str, record: dict[str, Any]) -> None: ...

    def _inside(self, path: str) -> Path:
        """`path` when it lies in this run's folder (nothing else is the agent's to touch)."""
        resolved = Path(path).resolve()
        if not resolved.is_relative_to(self.run_dir.resolve()):
            raise PermissionError(f"{path} is not in this run's folder")
        return resolved

    # --- processes ---------------------------------------------------------------------------

    def _spawn(self, name: str, argv: list[str], workdir: Path) -> Spawned:
        """`argv` in a cgroup of its own (when this host lets it make one), its output
        appended to workdir's stdout.log and stderr.log, its pid file written first."""
        group = None
        layout = cgroups.detect()
        record: dict[str, Any] = {"name": name, "argv": argv, "cgroup": []}
        full = argv
        if layout.kind != "proc":
            cg_name = f"xfb-{self.tag}-{name}"
            record["cgroup"] = cgroups.cgroup_dirs(cg_name, layout)
            self._pidfile(name, record)  # written before the groups exist
            group = cgroups.Cgroup.create(cg_name, layout)
            full = cgroups.attach_argv(group.procs_files, argv)
        workdir.mkdir(parents=True, exist_ok=True)
        with (workdir / "stdout.log").open("ab") as out, (workdir / "stderr.log").open("ab") as err:
            proc = subprocess.Popen(
                full, stdout=out, stderr=err, cwd=workdir, stdin=subprocess.DEVNULL,
                start_new_session=True,
            )  # fmt: skip
        record |= {"pid": proc.pid, "start": proc_start(proc.pid)}
        self._pidfile(name, record)
        return Spawned(name, proc, group)

    def _forget(self, spawned: Spawned) -> None:
        if spawned.group is not None:
            cgroups.remove(spawned.group.paths)
        with contextlib.suppress(FileNotFoundError):
            (self.run_dir / "pids" / f"{spawned.name}.json").unlink()

    def op_spawn(self, name: str, argv: list[str], workdir: str) -> dict[str, Any]:
        """Start `argv` as the process `name` (its pid file's and cgroup's name)."""
        spawned = self._spawn(name, argv, self._inside(workdir))
        self.spawned[spawned.proc.pid] = spawned
        return {"pid": spawned.proc.pid, "started_at": time.time(),
                "cgroup": spawned.group is not None}  # fmt: skip

    def op_poll(self, pid: int) -> int | None:
        """Its exit status, None while it runs."""
        return self.spawned[pid].proc.poll()

    def op_signal(self, pid: int, signum: int) -> None:
        spawned = self.spawned[pid]
        if spawned.proc.poll() is None:
            spawned.proc.send_signal(signum)

    def op_halt(self, pid: int, signalled: bool = False) -> int:
        """SIGTERM (unless sent already), wait, SIGKILL; its cgroup and pid file removed."""
        spawned = self.spawned.pop(pid)
        try:
            return stop_process(spawned.proc, STOP_WAIT, signalled=signalled)
        finally:
            self._forget(spawned)

    def op_kill(self, pid: int) -> list[int]:
        """A crash: SIGKILL to every process of its cgroup (else its tree), until the
        cgroup is empty; then op_halt's bookkeeping. The pids killed."""
        spawned = self.spawned[pid]
        group = spawned.group
        pids = group.pids() if group is not None else descendants(pid)
        for each in dict.fromkeys([pid, *pids]):
            with contextlib.suppress(ProcessLookupError):
                os.kill(each, signal.SIGKILL)
        spawned.proc.wait(10)
        deadline = time.monotonic() + KILL_SETTLE
        while group is not None and group.pids() and time.monotonic() < deadline:
            time.sleep(0.01)
        self.op_halt(pid)
        return sorted({pid, *pids})

    def halt_spawned(self) -> None:
        for pid in list(self.spawned):
            with contextlib.suppress(Exception):
                self.op_halt(pid)

    # --- files -------------------------------------------------------------------------------

    def op_put(self, path: str, data: str, mode: int = 0o644) -> None:
        """A file the controller wrote (base64), in this run's folder, replaced whole."""
        target = self._inside(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(target.name + ".put")
        tmp.write_bytes(base64.b64decode(data))
        tmp.chmod(mode)
        os.replace(tmp, target)

    def op_mkdir(self, path: str, mode: int = 0o755) -> None:
        self._inside(path).mkdir(mode=mode, parents=True, exist_ok=True)

    def op_remove(self, path: str) -> None:
        """A file or a folder of this run's, gone (nothing when it is not there)."""
        target = self._inside(path)
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                target.unlink()

    def op_exec(
        self, argv: list[str], timeout: float = 60.0, output: str | None = None
    ) -> dict[str, Any]:
        """A tool of this host: its status, stdout and stderr (stdout into the run's file
        `output` instead, when given: a copy a tool prints)."""
        if output is None:
            result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
            return {"status": result.returncode, "stdout": result.stdout, "stderr": result.stderr}
        with open(self._inside(output), "wb") as out:
            done = subprocess.run(argv, stdout=out, stderr=subprocess.PIPE, timeout=timeout)
        return {
            "status": done.returncode,
            "stdout": "",
            "stderr": done.stderr.decode(errors="replace"),
        }

    # --- probes next to the server -----------------------------------------------------------

    def op_exchange(self, address: str, data: str, timeout: float) -> str:
        """A DNS message (base64 wire) sent to this host's server over TCP; the answer's
        wire back (the controller checks it and its TSIG)."""
        return base64.b64encode(exchange_wire(address, base64.b64decode(data), timeout)).decode()

    def op_soa(self, address: str, zone: str, timeout: float) -> list[Any]:
        """Its server's SOA of `zone`: [owner, ttl, rdata text]."""
        rrset = query_soa(address, zone, netns=None, timeout=timeout)
        return [rrset.name.to_text(), rrset.ttl, rrset[0].to_text()]

    def op_served(self, keys: list[list[Any]], timeout: float) -> list[Any]:
        """What this host's server answers on loopback for each (name, type): [ttl, rdata
        texts] or None, in the order asked."""
        wanted = [(dns.name.from_text(name), int(rdtype)) for name, rdtype in keys]
        found = served("127.0.0.1", wanted, netns=None, timeout=timeout)
        out: list[Any] = []
        for key in wanted:
            held = found.get(key)
            out.append(None if held is None else [held[0], sorted(r.to_text() for r in held[1])])
        return out

    def op_check_serves(
        self,
        address: str,
        zone: str,
        reference: list[int],
        serial: int,
        changed: list[list[list[Any]]] | None,
        timeout: float,
    ) -> str | None:
        """xfr/primary_check.py on this host: None when its primary serves `reference`."""
        change = None
        if changed is not None:
            deleted, added = changed
            change = ([record_from(r) for r in deleted], [record_from(r) for r in added])
        total, records = reference
        return check_primary_serves(address, zone, ZoneSum(total, records), serial, change,
                                    netns=None, timeout=timeout)  # fmt: skip
