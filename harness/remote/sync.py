"""Files for a host sent by rsync over the inventory's ssh connection: a new zone version
goes as a delta against the version the host already serves.

    sync_files(host, {"diff": path, "lab.zone": path}, "/var/tmp/x/run/changes/3",
               basis=["/var/tmp/x/run/cases/000/ns0/zones"], control_dir=...)

A change set of a large zone is a whole new zone file for Knot and NSD (they read the file
and diff it themselves); sent whole it costs the zone's size each time (~50 MB at 1 M
records), while rsync's delta against the served file (--copy-dest: the same name in the
basis folder) sends little more than the changes. The ssh connection is shared between
calls (ControlMaster in the run's control folder, closed with Ansible's at teardown).
"""

from __future__ import annotations

import hashlib
import shlex
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from harness.core.errors import EnvironmentProblem
from harness.inventory import InventoryHost

SYNC_TIMEOUT = 1800.0
UNIX_PATH_MAX = 107  # a unix socket's path, in bytes (sun_path without its NUL)
SSH_TEMP_SUFFIX = 17  # ssh makes a master's socket as its ControlPath + "." + 16 characters


def rsync_argv(
    host: InventoryHost, source: Path, dest: str, basis: list[str], control: Path
) -> list[str]:
    """rsync of the folder `source` (its symlinks followed) into `dest` on the host, with
    the inventory's ssh (pure)."""
    ssh = host.ssh
    shell = [*ssh.ssh(), *_shared(control, f"{ssh.user}@{ssh.host}:{ssh.port}")]
    argv = ["rsync", "--recursive", "--copy-links", "--times", "--chmod=D700,F644", "--mkpath",
            "--stats", "-e", shlex.join(shell)]  # fmt: skip
    argv += [f"--copy-dest={folder}" for folder in basis]
    if ssh.become:
        argv.append(f"--rsync-path=sudo -n -u {ssh.become_user} rsync")
    address = f"[{ssh.host}]" if ":" in ssh.host else ssh.host
    return [*argv, f"{source}/", f"{address}:{dest}/"]


def _shared(control: Path, destination: str) -> list[str]:
    """ssh options that share one connection per host between calls, named by a short hash
    of the destination (ssh's %C is 40 characters: a run id of 19 made the socket's path
    too long); none where even that does not fit: a connection per call still works."""
    socket = f"{control}/r-{hashlib.sha256(destination.encode()).hexdigest()[:12]}"
    if len(socket) + SSH_TEMP_SUFFIX > UNIX_PATH_MAX:
        return ["-o", "ControlMaster=no"]
    return ["-o", "ControlMaster=auto", "-o", f"ControlPath={socket}", "-o", "ControlPersist=120"]


def sent_bytes(stats: str) -> int | None:
    """What rsync --stats says it sent, in bytes (pure)."""
    for line in stats.splitlines():
        if line.startswith("Total bytes sent:"):
            return int(line.split(":", 1)[1].strip().replace(",", "").replace(".", ""))
    return None


def sync_files(
    host: InventoryHost, files: dict[str, Path], dest: str, basis: list[str], control: Path
) -> tuple[float, int | None]:
    """Put `files` ({name on the host: local path}) in the host's folder `dest`; returns
    (wall seconds, bytes sent)."""
    with tempfile.TemporaryDirectory(dir=control.parent, prefix="sync-") as staging:
        for name, path in files.items():
            Path(staging, name).symlink_to(Path(path).resolve())
        argv = rsync_argv(host, Path(staging), dest, basis, control)
        began = time.monotonic()
        result = subprocess.run(argv, capture_output=True, text=True, timeout=SYNC_TIMEOUT)
        spent = time.monotonic() - began
    if result.returncode != 0:
        problem = " | ".join(result.stderr.strip().splitlines()[-3:])
        if shutil.which("rsync") is None:
            problem = "rsync is not installed on this machine (make setup installs it)"
        raise EnvironmentProblem(
            f"host {host.name}: rsync to {dest} exited {result.returncode}: {problem}"
        )
    return spent, sent_bytes(result.stdout)
