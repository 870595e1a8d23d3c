"""The agent's bundle: the harness's source, the servers' config templates and the
libraries its modules import, from the controller's own environment, in one archive the
deploy playbook unpacks on each host (PYTHONPATH points at it; nothing is installed).

Pure-Python libraries run anywhere; numpy, cryptography and pydantic carry compiled modules
built for the controller's CPython and machine, so the playbook checks the host's python3
against `python_tag()` first (Debian 12 hosts: 3.11 on x86_64, as the controller).
"""

from __future__ import annotations

import hashlib
import os
import platform
import shlex
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import dns

import harness
from harness.core.errors import EnvironmentProblem
from harness.inventory import InventoryHost

REPOSITORY = Path(harness.__file__).resolve().parents[1]
SITE_PACKAGES = Path(dns.__file__).resolve().parents[1]
# What the agent's imports reach (harness.servers, .xfr, .observe, .zonegen, .metrics),
# top-level names.
LIBRARIES = (
    "dns", "jinja2", "markupsafe", "numpy", "numpy.libs", "cryptography", "cffi",
    "pycparser", "_cffi_backend", "prometheus_client", "pydantic", "pydantic_core",
    "annotated_types", "typing_extensions", "typing_inspection",
)  # fmt: skip
SKIP_PARTS = {"__pycache__", "tests", "testing", "f2py", "_pyinstaller", "docker"}
CACHE = REPOSITORY / "zones" / "cache"
SHIP_TIMEOUT = 600.0


def python_tag() -> str:
    """ "3.11 x86_64": what the host's python3 must print in the deploy playbook."""
    return f"{sys.version_info[0]}.{sys.version_info[1]} {platform.machine()}"


def _members() -> list[tuple[Path, str]]:
    """(file, its name in the archive), sorted."""
    out: list[tuple[Path, str]] = []
    roots = [(REPOSITORY / "harness", "harness"), (REPOSITORY / "servers", "servers")]
    for name in LIBRARIES:
        if (SITE_PACKAGES / name).is_dir():
            roots.append((SITE_PACKAGES / name, name))
        else:  # a module of one file: typing_extensions.py, _cffi_backend.cpython-*.so
            out += [(path, path.name) for path in sorted(SITE_PACKAGES.glob(f"{name}.*"))]
    for root, prefix in roots:
        for path in sorted(root.rglob("*")):
            relative = path.relative_to(root)
            if path.is_file() and not SKIP_PARTS & set(relative.parts) and path.suffix != ".pyc":
                out.append((path, f"{prefix}/{relative.as_posix()}"))
    return out


def build_bundle(cache: Path = CACHE) -> Path:
    """The archive for this source tree and environment (cached by their content key)."""
    members = _members()
    key = hashlib.sha256(python_tag().encode())
    for path, name in members:
        stat = path.stat()
        key.update(f"{name}\0{stat.st_size}\0{stat.st_mtime_ns}\0".encode())
    target = cache / f"agent-{key.hexdigest()[:16]}.tar.gz"
    if target.exists():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    # A partial file of this process's own: runs started together (the lab tests on four
    # workers of a fresh clone) build the same archive at once, and a shared partial name
    # had one run's rename take the file another was still writing.
    fd, partial_name = tempfile.mkstemp(prefix=f"{target.name}.", suffix=".partial", dir=cache)
    partial = Path(partial_name)
    try:
        with os.fdopen(fd, "wb") as out, tarfile.open(fileobj=out, mode="w:gz",
                                                      compresslevel=1) as archive:  # fmt: skip
            for path, name in members:
                archive.add(path, arcname=name, recursive=False)
        partial.chmod(0o644)
        partial.replace(target)  # atomic: the same content whichever run is last
    finally:
        partial.unlink(missing_ok=True)
    return target


def unpack_argv(host: InventoryHost, folder: str) -> list[str]:
    """ssh to `host` running tar, which unpacks the archive it reads on stdin into `folder`
    (made by deploy.yml): owner-only, whatever the archive's modes (pure)."""
    unpack = (
        f"umask 077 && tar -xzf - -C {shlex.quote(folder)} --no-same-owner --no-same-permissions"
    )
    return host.ssh.argv(["sh", "-c", unpack])


def ship_bundle(host: InventoryHost, bundle: Path, folder: str) -> float:
    """The bundle streamed over ssh into the host's `folder` and unpacked as it arrives: one
    ssh command and no Python on the host (Ansible's copy and a tar task took 2.7-16 s a
    host under load, most of it its modules starting). Returns the wall seconds."""
    began = time.monotonic()
    with bundle.open("rb") as archive:
        done = subprocess.run(unpack_argv(host, folder), stdin=archive, capture_output=True,
                              timeout=SHIP_TIMEOUT, check=False)  # fmt: skip
    if done.returncode != 0:
        said = " | ".join(done.stderr.decode(errors="replace").strip().splitlines()[-3:])
        raise EnvironmentProblem(
            f"host {host.name}: unpacking the agent into {folder} exited {done.returncode}: {said}"
        )
    return time.monotonic() - began
