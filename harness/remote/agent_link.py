"""The agent's link operations (a part of `remote.agent.Agent`): linkem on this host, fed
by NFQUEUE rules for its traffic with the primary (remote/hostlink.py builds both on the
controller; this only runs them).

Everything is recorded before it exists, so that teardown.yml (files/xfrbench_clean.py)
removes it after a killed agent: the rules in RUN_DIR/link-rules.json before they are
added, linkem's pid file (RUN_DIR/pids/linkem.json) as soon as it runs. Stopping removes
the rules first: a rule left without its linkem would drop every packet it queues.

A linkem configured with a control socket (a group with faults) takes commands through
op_link_control, relayed as they come and answered as linkem answered (its times this
host's): which command, to which direction, is decided on the controller.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

from harness.core.stopping import stop_process
from harness.link import linkem
from harness.remote.agent_measures import proc_start
from harness.remote.hostlink import RULES_FILE, add_argv, delete_argv
from harness.xfr import XfrError

READY_TIMEOUT = 15.0
STOP_WAIT = 5.0


class LinkOps:
    """linkem and its rules on this host; the pid files (_pidfile) are the Agent's."""

    run_dir: Path
    link: subprocess.Popen[Any] | None = None
    link_stats: Path | None = None
    link_control: Path | None = None  # its control socket, when its config has one

    def _pidfile(self, name: str, record: dict[str, Any]) -> None: ...

    def op_link_start(self, config: dict[str, Any], rules: list[dict[str, Any]]) -> dict[str, Any]:
        """linkem with `config` (its files in its stats file's folder), then `rules`;
        answers once linkem is ready (its queues bound) and the rules are in."""
        self.op_link_stop()  # a visit's link replaces the last one's
        binary = self.run_dir / "linkem"  # shipped by deploy.yml
        stats = Path(config["stats_path"])
        folder = stats.parent
        if not folder.resolve().is_relative_to(self.run_dir.resolve()):
            raise XfrError(f"{folder} is not in this run's folder")
        folder.mkdir(parents=True, exist_ok=True)
        if control := config.get("control_path"):  # beside the servers' (the run's ctl/)
            if not Path(control).parent.resolve().is_relative_to(self.run_dir.resolve()):
                raise XfrError(f"{control} is not in this run's folder")
            Path(control).parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        config_path = folder / "linkem.json"
        config_path.write_text(json.dumps(config, indent=2) + "\n")
        out_path, err_path = folder / "linkem.stdout", folder / "linkem.stderr"
        with out_path.open("wb") as out, err_path.open("wb") as err:
            proc = subprocess.Popen(
                [str(binary), "--config", str(config_path)], stdout=out, stderr=err,
                stdin=subprocess.DEVNULL, start_new_session=True,
            )  # fmt: skip
        self.link, self.link_stats = proc, stats
        self.link_control = Path(control) if control else None
        self._pidfile("linkem", {"name": "linkem", "pid": proc.pid,
                                 "start": proc_start(proc.pid), "cgroup": []})  # fmt: skip
        self._wait_ready(proc, out_path, err_path)
        self._write_rules(rules)  # recorded first: an agent killed now still has them listed
        for rule in rules:
            result = subprocess.run(add_argv(rule), capture_output=True, text=True, timeout=30)
            if result.returncode != 0:
                raise XfrError(f"{' '.join(add_argv(rule))}: {result.stderr.strip()}")
        return {"pid": proc.pid, "config": str(config_path)}

    def _wait_ready(self, proc: subprocess.Popen[Any], out: Path, err: Path) -> None:
        deadline = time.monotonic() + READY_TIMEOUT
        while linkem.READY_LINE not in out.read_text(errors="replace"):
            if proc.poll() is not None:
                tail = " | ".join(err.read_text(errors="replace").strip().splitlines()[-5:])
                raise XfrError(f"linkem exited with status {proc.returncode}: {tail}")
            if time.monotonic() > deadline:
                raise XfrError(f"linkem was not ready within {READY_TIMEOUT:g} s (see {out})")
            time.sleep(0.02)

    def _write_rules(self, rules: list[dict[str, Any]]) -> None:
        path = self.run_dir / RULES_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(rules))
        os.replace(tmp, path)

    def op_link_stats(self) -> dict[str, Any]:
        """linkem's last stats snapshot ({} without a link)."""
        return linkem.read_stats(self.link_stats) if self.link_stats else {}

    def op_link_control(self, command: dict[str, Any]) -> dict[str, Any]:
        """linkem's answer to `command` on its control socket, refusals included."""
        if self.link is None or self.link_control is None:
            raise XfrError("no linkem with a control socket runs on this host")
        return linkem.LinkemControl(self.link_control).ask(command)

    def op_link_stop(self) -> list[str]:
        """The rules out (each while it is there), then linkem stopped; what was done."""
        done = []
        path = self.run_dir / RULES_FILE
        with contextlib.suppress(FileNotFoundError):
            for rule in json.loads(path.read_text()):
                argv = delete_argv(rule)
                if subprocess.run(argv, capture_output=True, timeout=30).returncode == 0:
                    done.append(" ".join(argv))
            path.unlink()
        if self.link is not None:
            stop_process(self.link, STOP_WAIT)
            done.append(f"linkem pid {self.link.pid} stopped")
            self.link, self.link_control = None, None
        with contextlib.suppress(FileNotFoundError):
            (self.run_dir / "pids" / "linkem.json").unlink()
        return done
