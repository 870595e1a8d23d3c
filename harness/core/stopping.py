"""Stopping a child process: SIGTERM, a grace period for its own shutdown, then SIGKILL.

One helper for every place the harness stops a process it started (servers, Prometheus,
iperf3, an agent's ssh): the order of the signals, the grace and the wait after the kill are
written once. A process started with ``start_new_session=True`` leads a process group of its
own; ``group=True`` signals that whole group, so its children (a shell's, a daemon's
workers) do not outlive it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from typing import Any


def _signal(proc: subprocess.Popen[Any], sig: signal.Signals, group: bool) -> None:
    # A process that exited between the check and the signal is no error: it is stopped.
    with contextlib.suppress(ProcessLookupError):
        if group:
            os.killpg(proc.pid, sig)
        else:
            proc.send_signal(sig)


def stop_process(
    proc: subprocess.Popen[Any],
    grace: float,
    *,
    signalled: bool = False,
    kill_wait: float = 5.0,
    group: bool = False,
) -> int:
    """SIGTERM ``proc`` (unless ``signalled``: the caller asked it to stop already), wait
    up to ``grace`` seconds, then SIGKILL and wait up to ``kill_wait``. Returns the exit
    status (negative: the signal that ended it); a process that has exited already is only
    reaped. One that outlives even SIGKILL's wait (uninterruptible sleep) raises
    ``subprocess.TimeoutExpired``: nothing after it may assume the process gone.
    """
    if proc.poll() is not None:
        return proc.returncode
    if not signalled:
        _signal(proc, signal.SIGTERM, group)
    try:
        return proc.wait(grace)
    except subprocess.TimeoutExpired:
        pass
    _signal(proc, signal.SIGKILL, group)
    return proc.wait(kill_wait)
