"""The one process-stopping helper, on real child processes: one that ends on SIGTERM, one
that ignores it and must be killed, one asked to stop already, and a process group."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

from harness.core.stopping import stop_process

# A child that says it is ready once its SIGTERM handling is in place.
OBEYS = "import sys, time; print('ready', flush=True); time.sleep(60)"
IGNORES = (
    "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "print('ready', flush=True); time.sleep(60)"
)


def child(code: str, **options: object) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, **options
    )
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    return proc


def test_a_process_that_ends_on_term_is_not_killed() -> None:
    proc = child(OBEYS)
    started = time.monotonic()
    assert stop_process(proc, grace=10) == -signal.SIGTERM
    assert time.monotonic() - started < 5  # not the grace period: it ended at once


def test_a_process_that_ignores_term_is_killed_after_the_grace() -> None:
    proc = child(IGNORES)
    started = time.monotonic()
    assert stop_process(proc, grace=0.5) == -signal.SIGKILL
    assert 0.5 <= time.monotonic() - started < 5


def test_signalled_sends_no_term_and_kills_after_the_grace() -> None:
    proc = child(OBEYS)  # it would end on TERM: it gets none, so only the KILL ends it
    assert stop_process(proc, grace=0.3, signalled=True) == -signal.SIGKILL


def test_an_exited_process_is_only_reaped() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    proc.wait()
    assert stop_process(proc, grace=1) == 3


def test_group_stops_the_children_too() -> None:
    # A shell that ignores TERM, with a grandchild that ignores it too: only a group-wide
    # KILL ends both.
    code = (
        "import signal, subprocess, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "c = subprocess.Popen([sys.executable, '-c', 'import signal, time; "
        "signal.signal(signal.SIGTERM, signal.SIG_IGN); print(\\'ready\\', flush=True); "
        "time.sleep(60)']); print(c.pid, flush=True); time.sleep(60)"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    assert proc.stdout is not None
    lines = {proc.stdout.readline().strip() for _ in range(2)}  # its pid, and its "ready"
    lines.discard("ready")
    grandchild = int(lines.pop())
    assert stop_process(proc, grace=0.3, group=True) == -signal.SIGKILL
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and _alive(grandchild):
        time.sleep(0.02)
    assert not _alive(grandchild)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
