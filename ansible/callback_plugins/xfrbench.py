"""xfrbench's stdout callback: one line per task and host on stdout, and at the end a JSON
file (path in XFRBENCH_ANSIBLE_RESULT) with each host's failures, unreachability (in
Ansible's own words) and the seconds its tasks took: what the harness reports per host.
"""

from __future__ import annotations

import json
import os
import time

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
    name: xfrbench
    type: stdout
    short_description: per-host results and task times for xfrbench
    description: writes XFRBENCH_ANSIBLE_RESULT at the end of the playbook
"""


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "stdout"
    CALLBACK_NAME = "xfrbench"

    def __init__(self) -> None:
        super().__init__()
        self.began = time.time()
        self.started: dict[tuple[str, str], float] = {}
        self.hosts: dict[str, dict] = {}

    def _host(self, name: str) -> dict:
        return self.hosts.setdefault(
            name, {"tasks_s": 0.0, "tasks": {}, "failed": [], "unreachable": None}
        )

    def v2_runner_on_start(self, host, task) -> None:
        self.started[(host.get_name(), task._uuid)] = time.time()

    def _done(self, result, status: str) -> None:
        name = result._host.get_name()
        task = result._task
        began = self.started.pop((name, task._uuid), None)
        spent = time.time() - began if began is not None else 0.0
        entry = self._host(name)
        entry["tasks_s"] += spent
        label = task.get_name()
        entry["tasks"][label] = round(entry["tasks"].get(label, 0.0) + spent, 3)
        message = str(result._result.get("msg") or "")
        # A script's own words are in its output; "non-zero return code" alone says little.
        output = result._result.get("stderr") or result._result.get("stdout") or ""
        if output and str(output).strip() not in message:
            message = f"{message}: {str(output).strip()}" if message else str(output)
        if status == "unreachable":
            entry["unreachable"] = str(message).strip()
        elif status == "failed" and not result._task.ignore_errors:
            entry["failed"].append({"task": label, "msg": str(message).strip()[-2000:]})
        self._display.display(f"{status:11} {name}: {label} ({spent:.2f} s)")

    def v2_runner_on_ok(self, result) -> None:
        self._done(result, "ok")

    def v2_runner_on_failed(self, result, ignore_errors=False) -> None:
        self._done(result, "failed")

    def v2_runner_on_skipped(self, result) -> None:
        self._done(result, "skipped")

    def v2_runner_on_unreachable(self, result) -> None:
        self._done(result, "unreachable")

    def v2_playbook_on_stats(self, stats) -> None:
        path = os.environ.get("XFRBENCH_ANSIBLE_RESULT")
        if not path:
            return
        for name in self.hosts:
            self.hosts[name]["tasks_s"] = round(self.hosts[name]["tasks_s"], 3)
        with open(path, "w", encoding="utf-8") as handle:
            json.dump({"wall_s": round(time.time() - self.began, 3), "hosts": self.hosts}, handle)
