"""DNSSEC signing with BIND's dnssec-keygen and dnssec-signzone (ECDSAP256SHA256, NSEC3).

Signing is not reproducible byte for byte (fresh keys, randomized ECDSA signatures): a signed
spec is deterministic only through the cache. Signatures are valid from one hour ago for 90
days; the generator regenerates a signed cache entry older than SIGNED_MAX_AGE_S.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from harness.core.errors import EnvironmentProblem, ToolFailed

ALGORITHM = "ECDSAP256SHA256"
VALIDITY = "now+7776000"  # 90 days
SIGNED_MAX_AGE_S = 30 * 86400


def _run(argv: list[str], cwd: Path) -> str:
    if shutil.which(argv[0]) is None:
        raise EnvironmentProblem(f"{argv[0]} is not installed; signed zones need bind9-utils/bind9")
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise ToolFailed(argv, proc.returncode, proc.stderr + proc.stdout)
    return proc.stdout


def sign_zone(unsigned: Path, signed: Path, origin: str, keys: Path, *, opt_out: bool) -> None:
    """Make a KSK and a ZSK for ``origin`` in ``keys`` (mode 0600) and sign into ``signed``.

    ``opt_out`` (for delegation-heavy zones) skips NSEC3 records for insecure delegations,
    as TLD registries do.
    """
    keys.mkdir(mode=0o700, exist_ok=True)
    for extra in (["-f", "KSK"], []):
        _run(["dnssec-keygen", "-q", "-K", str(keys), "-a", ALGORITHM, *extra, origin], keys)
    for key in keys.iterdir():
        os.chmod(key, 0o600)
    argv = [
        "dnssec-signzone",
        "-q",
        "-S",
        "-K",
        str(keys),
        "-d",
        str(keys),
        "-o",
        origin,
        "-O",
        "full",
        "-3",
        "-",
        "-H",
        "0",
        "-s",
        "now-3600",
        "-e",
        VALIDITY,
        "-f",
        str(signed),
    ]
    if opt_out:
        argv.append("-A")
    argv.append(str(unsigned))
    _run(argv, keys)
    for key in keys.iterdir():
        os.chmod(key, 0o600)


def count_records(path: Path) -> int:
    """Records in a one-RR-per-line file (dnssec-signzone -O full writes that)."""
    count = 0
    with open(path, "rb") as f:
        for line in f:
            if line.strip() and not line.startswith((b";", b"$")):
                count += 1
    return count
