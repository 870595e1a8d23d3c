"""Run the `xfrbench` CLI as a real normal user (runuser), for what root-made files and
root-only commands look like to the user who ran sudo. Root only."""

from __future__ import annotations

import os
import pwd
import subprocess
import sys
import sysconfig
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
USER = "xfbuser"
CLI = "import sys; from harness.cli import main; sys.exit(main(sys.argv[1:]))"


def ensure_user() -> pwd.struct_passwd:
    """The test user, created (with a home) when absent; left for the next run."""
    try:
        return pwd.getpwnam(USER)
    except KeyError:
        subprocess.run(["useradd", "-m", USER], check=True)
        return pwd.getpwnam(USER)


@cache
def _python_for(name: str) -> str | None:
    """An interpreter the user may run: ours, or the system's of the same minor version
    (ours may live under /root, which a normal user cannot enter)."""
    minor = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for candidate in (os.path.realpath(sys.executable), f"/usr/bin/{minor}"):
        probe = subprocess.run(
            ["runuser", "-u", name, "--", candidate, "-c", "pass"],
            capture_output=True,
            check=False,
        )
        if probe.returncode == 0:
            return candidate
    return None


def as_user(user: pwd.struct_passwd, *argv: str) -> subprocess.CompletedProcess[str]:
    """`xfrbench ARGV` run by `user` in the repository, with this worktree's package and
    dependencies and a clean environment (no SUDO_* variables)."""
    python = _python_for(user.pw_name)
    if python is None:
        pytest.skip(
            f"no Python {sys.version_info.major}.{sys.version_info.minor} that "
            f"{user.pw_name} may run"
        )
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": user.pw_dir,
        "PYTHONPATH": os.pathsep.join([str(REPO), sysconfig.get_paths()["purelib"]]),
        "COLUMNS": "400",  # one line per message: asserts need not follow rich's wrapping
    }
    switch = ["runuser", "-u", user.pw_name, "--", "env", "-i"]
    return subprocess.run(
        [*switch, *(f"{k}={v}" for k, v in env.items()), python, "-c", CLI, *argv],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=REPO,
    )
