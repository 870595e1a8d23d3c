"""The Docker daemon and the two CLIs the compose backend drives (docker, and compose v2 or 1.29).

CI machines run no daemon: `ensure_dockerd()` starts Debian's `dockerd` in the background when
none answers, and records it (its own `--pidfile`) so `stop_dockerd()` stops exactly that
process and never a daemon somebody else runs. The daemon it starts touches the host as little
as possible: no iptables rules, no NAT, no ip_forward change and no default `docker0` bridge
(the testbed's networks are the project's own; image builds use the host network).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from harness.core.errors import EnvironmentProblem, ToolFailed
from harness.core.filelock import exclusive

STATE_DIR = Path("/run/xfrbench")
DOCKERD_PID = STATE_DIR / "dockerd.pid"
DOCKERD_LOG = STATE_DIR / "dockerd.log"
DOCKERD_FLAGS = ("--iptables=false", "--ip-forward=false", "--ip-masq=false", "--bridge=none")
START_TIMEOUT = 60.0


def docker(
    *args: str, check: bool = True, timeout: float = 120, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the docker CLI (text mode, output captured); raises ToolFailed when `check`."""
    argv = ["docker", *args]
    try:
        result = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout, input=input, check=False
        )
    except FileNotFoundError:
        raise EnvironmentProblem(
            "the docker CLI is missing; install it with `apt-get install docker.io`"
        ) from None
    if check and result.returncode != 0:
        raise ToolFailed(argv, result.returncode, result.stderr)
    return result


def daemon_answers() -> bool:
    if shutil.which("docker") is None:
        return False
    result = docker("version", "--format", "{{.Server.Version}}", check=False, timeout=20)
    return result.returncode == 0 and bool(result.stdout.strip())


@functools.cache
def compose_cli() -> tuple[str, ...]:
    """`docker compose` (v2) when the plugin is there, else Debian 12's `docker-compose` 1.29."""
    if shutil.which("docker"):
        probe = docker("compose", "version", check=False, timeout=20)
        if probe.returncode == 0:
            return ("docker", "compose")
    if shutil.which("docker-compose"):
        return ("docker-compose",)
    raise EnvironmentProblem(
        "neither `docker compose` (v2) nor `docker-compose` is installed; "
        "install one with `apt-get install docker-compose`"
    )


def compose(
    project: str,
    file: Path,
    *args: str,
    check: bool = True,
    timeout: float = 300,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run a compose subcommand for exactly one project and file (never the environment's
    COMPOSE_* settings); `env` adds variables for the file's interpolation."""
    argv = [*compose_cli(), "--project-name", project, "--file", str(file), *args]
    env = {k: v for k, v in os.environ.items() if not k.startswith("COMPOSE_")} | (env or {})
    result = subprocess.run(
        argv, capture_output=True, text=True, timeout=timeout, check=False, env=env
    )
    if check and result.returncode != 0:
        raise ToolFailed(argv, result.returncode, result.stderr)
    return result


@contextlib.contextmanager
def _locked() -> Iterator[None]:
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    with exclusive(STATE_DIR / "dockerd.lock"):
        yield


def dockerd_argv(binary: str) -> list[str]:
    return [binary, *DOCKERD_FLAGS, f"--pidfile={DOCKERD_PID}"]


def ensure_dockerd(timeout: float = START_TIMEOUT) -> int | None:
    """Start dockerd unless a daemon answers; returns the pid started, or None."""
    with _locked():
        if daemon_answers():
            return None
        if os.geteuid() != 0:
            raise EnvironmentProblem("no Docker daemon answers, and starting one needs root")
        binary = shutil.which("dockerd") or shutil.which("dockerd", path="/usr/sbin:/usr/bin")
        if binary is None or shutil.which("docker") is None:
            raise EnvironmentProblem(
                "no Docker daemon answers and Docker is not installed; "
                "install it with `apt-get install docker.io docker-compose`"
            )
        if DOCKERD_PID.exists() and started_dockerd() is None:
            # Left by a daemon that died: dockerd refuses to start while its pid is in use.
            DOCKERD_PID.unlink()
        with DOCKERD_LOG.open("ab") as log:
            # A new session: the daemon outlives this process (images stay cached) and a
            # terminal's Ctrl-C does not reach it. stop_dockerd() ends it by its pid file.
            proc = subprocess.Popen(
                dockerd_argv(binary),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise EnvironmentProblem(
                    f"dockerd exited with status {proc.returncode} while starting: "
                    + " | ".join(_tail(DOCKERD_LOG))
                )
            if daemon_answers():
                return proc.pid
            time.sleep(0.25)
        proc.terminate()
        raise EnvironmentProblem(
            f"dockerd did not answer within {timeout:.0f} s (log: {DOCKERD_LOG}): "
            + " | ".join(_tail(DOCKERD_LOG))
        )


def _tail(path: Path, lines: int = 5) -> list[str]:
    try:
        return path.read_text(errors="replace").strip().splitlines()[-lines:]
    except FileNotFoundError:
        return []


def started_dockerd() -> int | None:
    """The pid of a dockerd that ensure_dockerd() started and that still runs, else None."""
    try:
        pid = int(DOCKERD_PID.read_text().split()[0])
    except (FileNotFoundError, ValueError, IndexError):
        return None
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (FileNotFoundError, ProcessLookupError):
        return None
    # Ours only if it was started with our pid file: a recycled pid is somebody else.
    return pid if f"--pidfile={DOCKERD_PID}".encode() in cmdline else None


def stop_dockerd(timeout: float = 30.0) -> str | None:
    """SIGTERM the dockerd ensure_dockerd() started (it stops its containerd); None if none."""
    with _locked():
        pid = started_dockerd()
        if pid is None:
            return None
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, os.WNOHANG)
            if not Path(f"/proc/{pid}").exists() or _zombie(pid):
                return f"dockerd {pid} stopped"
            time.sleep(0.1)
        os.kill(pid, signal.SIGKILL)
        return f"dockerd {pid} killed after {timeout:.0f} s"


def _zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return True
    return stat[stat.rindex(")") + 2 :].startswith("Z")


def inspect(*names: str, kind: str = "container") -> list[dict[str, Any]]:
    """`docker <kind> inspect` as parsed JSON (an empty list for no names)."""
    if not names:
        return []
    result = docker(kind, "inspect", *names)
    data = json.loads(result.stdout or "[]")
    return list(data) if isinstance(data, list) else []
