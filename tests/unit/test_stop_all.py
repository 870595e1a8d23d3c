"""Servers stopped together: every one is told to stop before any is waited for."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from harness.measure.processes import stop_all

# Exits 0.3 s after SIGTERM (as a server freeing a large zone does), writing when it got it.
SLOW_EXIT = 'trap "date +%s.%N > {mark}; sleep 0.3; exit 0" TERM; while :; do sleep 0.05; done'


class _Bed:
    def __init__(self) -> None:
        self.stopped: list[tuple[int, bool, float]] = []
        self.removed: list[int] = []  # whose control socket was removed

    def remove(self, path: Path) -> None:
        self.removed.append(int(path.name))

    def stop(self, proc: subprocess.Popen[Any], *, signalled: bool) -> int:
        proc.wait(10.0)
        self.stopped.append((proc.pid, signalled, time.time()))
        return int(proc.returncode)


def test_every_server_gets_its_signal_before_any_is_waited_for(tmp_path: Path) -> None:
    servers: list[Any] = []
    bed = _Bed()  # the place every server runs on
    for n in range(3):
        mark = tmp_path / f"term-{n}"
        proc = subprocess.Popen(["sh", "-c", SLOW_EXIT.format(mark=mark)])
        server = SimpleNamespace(control_path=tmp_path / str(n))
        servers.append(SimpleNamespace(proc=proc, server=server, place=bed))
    time.sleep(0.2)  # the traps are set
    stop_all(servers)
    signalled = [float((tmp_path / f"term-{n}").read_text()) for n in range(3)]
    first_exit = min(at for _, _, at in bed.stopped)
    assert all(flag for _, flag, _ in bed.stopped) and len(bed.stopped) == 3
    assert max(signalled) < first_exit  # all three were stopping at once
    assert all(s.proc is None for s in servers)
    assert sorted(bed.removed) == [0, 1, 2]
