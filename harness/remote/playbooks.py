"""Running the repository's playbooks (ansible/) with ansible-playbook, and reading back per
host what happened: failures and unreachable hosts in Ansible's own words, and the seconds
each host's tasks took (the deployment's cost per host).

The playbook's output goes to a log in the run's folder; results come from the repository's
callback plugin (ansible/callback_plugins/xfrbench.py) as JSON. Every ssh connection of a
run shares one folder of control sockets, closed at the end (`close_masters`), so that no
multiplexed session outlives the run on any host.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.core.errors import EnvironmentProblem
from harness.inventory import Inventory

ANSIBLE_DIR = Path(__file__).resolve().parents[2] / "ansible"
PLAYBOOK_TIMEOUT = 3600.0


@dataclass
class PlaybookResult:
    playbook: str
    wall_s: float
    hosts: dict[str, dict[str, Any]] = field(default_factory=dict)  # from the callback

    def problems(self) -> list[tuple[str, str, str]]:
        """(host, "unreachable" | task name, Ansible's message) for every host that failed."""
        out = []
        for host, entry in sorted(self.hosts.items()):
            if entry.get("unreachable") is not None:
                out.append((host, "unreachable", str(entry["unreachable"])))
            out += [(host, str(f["task"]), str(f["msg"])) for f in entry.get("failed", [])]
        return out

    def seconds(self) -> dict[str, float]:
        return {host: float(entry.get("tasks_s", 0.0)) for host, entry in self.hosts.items()}


def ansible_playbook() -> str:
    beside = Path(sys.executable).with_name("ansible-playbook")
    return str(beside) if beside.exists() else "ansible-playbook"


def run_playbook(
    name: str,
    inventory: Inventory,
    variables: dict[str, Any],
    work: Path,
    *,
    control_dir: Path,
    forks: int = 20,
    check: bool = True,
) -> PlaybookResult:
    """ansible-playbook ansible/<name>.yml on every host of `inventory`, with each host's
    folder and interpreter as the harness resolved them (Inventory.playbook_vars). `work`: a
    folder of the controller for the log, the variables file and the result. With `check`,
    a host that failed or could not be reached raises EnvironmentProblem (exit 3) naming
    it."""
    work.mkdir(parents=True, exist_ok=True)
    control_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    stamp = f"{name}-{time.strftime('%H%M%S')}-{os.getpid()}"
    extra = work / f"{stamp}.vars.json"
    extra.write_text(json.dumps({**inventory.playbook_vars(), **variables}))
    result_file = work / f"{stamp}.result.json"
    env = dict(os.environ)
    env.update(
        {
            "ANSIBLE_STDOUT_CALLBACK": "xfrbench",
            "ANSIBLE_CALLBACK_PLUGINS": str(ANSIBLE_DIR / "callback_plugins"),
            "ANSIBLE_PIPELINING": "True",
            "ANSIBLE_SSH_CONTROL_PATH_DIR": str(control_dir),
            "ANSIBLE_RETRY_FILES_ENABLED": "False",
            "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_LOCAL_TEMP": str(control_dir / "local"),
            "ANSIBLE_FORKS": str(forks),
            "XFRBENCH_ANSIBLE_RESULT": str(result_file),
        }
    )
    argv = [
        ansible_playbook(), "-i", str(inventory.path), "-e", f"@{extra}",
        "-e", "ansible_remote_tmp={{ xfrbench_root }}/.ansible-tmp",
        str(ANSIBLE_DIR / f"{name}.yml"),
    ]  # fmt: skip
    began = time.monotonic()
    with (work / f"{stamp}.log").open("w") as log:
        proc = subprocess.run(
            argv, stdout=log, stderr=subprocess.STDOUT, env=env, timeout=PLAYBOOK_TIMEOUT,
            check=False, start_new_session=True,
        )  # fmt: skip
    wall = time.monotonic() - began
    try:
        data = json.loads(result_file.read_text())
    except (OSError, ValueError):
        tail = (work / f"{stamp}.log").read_text(errors="replace").strip().splitlines()[-5:]
        raise EnvironmentProblem(
            f"ansible-playbook {name}.yml exited {proc.returncode} without results: "
            + " | ".join(tail)
        ) from None
    result = PlaybookResult(name, wall, data.get("hosts", {}))
    if check:
        raise_problems(result)
    return result


def raise_problems(result: PlaybookResult) -> None:
    problems = result.problems()
    if not problems:
        return
    lines = [
        f"host {host}: {what}: {' '.join(message.split())}" for host, what, message in problems
    ]
    raise EnvironmentProblem(f"ansible-playbook {result.playbook}.yml: " + "; ".join(lines))


def close_masters(control_dir: Path) -> list[str]:
    """Close every multiplexed ssh master of a run (its sessions on the hosts end too)."""
    closed = []
    if not control_dir.is_dir():
        return closed
    for socket in sorted(control_dir.iterdir()):
        if socket.is_socket():
            result = subprocess.run(
                ["ssh", "-o", f"ControlPath={socket}", "-O", "exit", "xfrbench-master"],
                capture_output=True, text=True, timeout=15, check=False,
            )  # fmt: skip
            if result.returncode == 0:
                closed.append(socket.name)
    return closed
