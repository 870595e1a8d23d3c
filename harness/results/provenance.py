"""Host facts for run.json: what ran where, so that runs are only compared like with like.

The parsers are pure functions over the text of /proc files (tested on captured text);
``collect()`` reads the live host. Git is only read (rev-parse, status without taking the
index lock), never changed.
"""

from __future__ import annotations

import datetime
import importlib.metadata
import os
import platform
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

PACKAGES = ("xfrbench", "dnspython", "pydantic", "cryptography")


def parse_cpuinfo(text: str) -> dict[str, Any]:
    """CPU model and logical CPU count from /proc/cpuinfo (x86 "model name", ARM
    "CPU part"/"Hardware" fallbacks)."""
    model = None
    count = 0
    fallback = None
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key = key.strip()
        value = value.strip()
        if key == "processor":
            count += 1
        elif key == "model name" and model is None:
            model = value
        elif key in ("Hardware", "cpu model", "Processor") and fallback is None:
            fallback = value
    return {"cpu_model": model or fallback, "cpu_count": count or None}


def parse_meminfo(text: str) -> dict[str, int | None]:
    """Total and available memory in bytes from /proc/meminfo."""
    wanted = {"MemTotal": "mem_total_bytes", "MemAvailable": "mem_available_bytes"}
    out: dict[str, int | None] = dict.fromkeys(wanted.values())
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key in wanted:
            parts = value.split()
            number = int(parts[0])
            unit = parts[1].lower() if len(parts) > 1 else ""
            out[wanted[key]] = number * 1024 if unit == "kb" else number
    return out


def parse_os_release(text: str) -> str | None:
    """PRETTY_NAME from /etc/os-release."""
    for line in text.splitlines():
        if line.startswith("PRETTY_NAME="):
            return line.split("=", 1)[1].strip().strip('"')
    return None


def parse_git_status(porcelain: str) -> bool:
    """Dirty when ``git status --porcelain`` lists any tracked change (untracked files
    count: a new module changes what runs)."""
    return any(line.strip() for line in porcelain.splitlines())


def _read(path: str) -> str:
    try:
        return Path(path).read_text(errors="replace")
    except OSError:
        return ""


def git_facts(repo: Path) -> dict[str, Any]:
    def git(*args: str) -> str | None:
        try:
            proc = subprocess.run(
                ["git", "--no-optional-locks", "-C", str(repo), *args],
                capture_output=True,
                text=True,
                timeout=10,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        return proc.stdout if proc.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=normal")
    return {
        "git_commit": commit.strip() if commit else None,
        "git_dirty": parse_git_status(status) if status is not None else None,
    }


def package_versions(names: tuple[str, ...] = PACKAGES) -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for name in names:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def collect(repo: Path | None = None) -> dict[str, Any]:
    """Facts about this host and checkout, for run.json's "host" entry."""
    repo = repo or Path(__file__).resolve().parents[2]
    uname = os.uname()
    facts: dict[str, Any] = {
        "hostname": socket.gethostname(),
        "kernel": uname.release,
        "kernel_version": uname.version,
        "machine": uname.machine,
        "os": parse_os_release(_read("/etc/os-release")),
        **parse_cpuinfo(_read("/proc/cpuinfo")),
        **parse_meminfo(_read("/proc/meminfo")),
        **git_facts(repo),
        "python": platform.python_version(),
        "python_executable": sys.executable,
        "packages": package_versions(),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }
    if facts["cpu_count"] is None:
        facts["cpu_count"] = os.cpu_count()
    return facts
