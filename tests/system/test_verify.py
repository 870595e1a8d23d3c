"""verify_copy against a real BIND: one pull of a generated TLD zone, summed as it is read
by the compiled digest (and by the Python reference's worker processes), equals the zone
file's RRSUM; after a change set the primary's
reference is updated from the diff alone; kdig's printed copy gives the same sum.

Each test starts its own `named` on 127.0.0.1 with a free port in its own temp dir and
kills exactly that pid at the end; readiness is an SOA answer, never a sleep.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from harness.xfr.kdig import kdig_pull
from harness.xfr.rrsum import ZoneSum
from harness.xfr.rrsum_native import ENV
from harness.xfr.soa_query import query_soa_serial
from harness.xfr.verify import check_copy, verify_copy
from harness.xfr.zonefile_sum import apply_diff_file, zone_file_sum
from harness.zonegen import ZoneSpec, change_set, generate

pytestmark = [
    pytest.mark.root,
    pytest.mark.servers,
    pytest.mark.xdist_group("verify"),  # its zones generated once (module fixture)
]

ADDRESS = "127.0.0.1"
ORIGIN = "tld."
# About 4.5 MB on the wire: over INLINE_BYTES, so the Python reference spills the stream
# and cuts it into chunks that worker processes digest during the read.
SPEC = ZoneSpec("tld", 150_000, ORIGIN, seed=5)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((ADDRESS, 0))
        return int(sock.getsockname()[1])


@contextmanager
def named(folder: Path, zone: Path, serial: int) -> Iterator[int]:
    """`named` serving ``zone`` as ORIGIN; yields its port."""
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    conf = folder / "named.conf"
    conf.write_text(
        "options {\n"
        f'  directory "{folder}"; pid-file "{folder}/named.pid";\n'
        f'  session-keyfile "{folder}/session.key"; managed-keys-directory "{folder}";\n'
        f"  listen-on port {port} {{ {ADDRESS}; }}; listen-on-v6 {{ none; }};\n"
        "  recursion no; notify no; allow-transfer { any; };\n"
        "};\ncontrols { };\n"
        f'zone "{ORIGIN}" {{ type primary; file "{zone}"; }};\n'
    )
    log_path = folder / "named.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            ["named", "-g", "-u", "root", "-n", "2", "-c", str(conf)],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 120
        while query_soa_serial(ADDRESS, ORIGIN, port=port, timeout=0.5) != serial:
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"named did not serve {ORIGIN}: {log_path.read_text()[-2000:]}")
            time.sleep(0.05)  # between readiness queries, not instead of them
        yield port
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture(scope="module")
def zones(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if os.geteuid() != 0 or shutil.which("named") is None:
        pytest.skip("needs root and named")
    return tmp_path_factory.mktemp("zones")


def test_verify_copy_equals_zone_file_and_follows_a_change_set(
    zones: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = generate(SPEC, cache_dir=zones).files[0]
    reference = zone_file_sum(base.path, ORIGIN, cache=False)
    assert reference.records == SPEC.records
    with named(tmp_path / "base", base.path, base.serial) as port:
        copy = verify_copy(ADDRESS, ORIGIN, port=port, timeout=120)  # compiled, inline
        kd = kdig_pull(ADDRESS, ORIGIN, port=port, timeout=120, digest="rrsum")
        monkeypatch.setenv(ENV, "python")  # the reference, its workers during the read,
        workers = verify_copy(ADDRESS, ORIGIN, port=port, timeout=120)
        after = verify_copy(ADDRESS, ORIGIN, port=port, timeout=120, concurrent=False)
        inline = verify_copy(ADDRESS, ORIGIN, port=port, timeout=120, workers=0)  # or none
        monkeypatch.delenv(ENV)
    assert copy.ok, copy.error
    assert copy.extra["digest_implementation"] == "rust"
    assert copy.extra["digest_workers"] == copy.extra["spilled_bytes"] == 0
    assert copy.extra["zone_records"] == copy.records - 1 == SPEC.records
    assert check_copy(reference, copy, serial=base.serial) is None
    assert workers.extra["digest_implementation"] == "python"
    assert workers.extra["digest_workers"] >= 1
    assert workers.extra["spilled_bytes"] == workers.bytes
    for other in (workers, after, inline, kd):
        assert other.ok, other.error
        assert other.digest == copy.digest == reference.text

    # The primary moves to serial 2 with a change set: the reference follows from the diff
    # alone, and the old reference no longer matches the new copy.
    changed = change_set(SPEC, base.serial + 1, 11, cache_dir=zones)  # 5 replaced, 1 added
    updated = apply_diff_file(reference, changed.diff_path, ORIGIN)
    assert updated == zone_file_sum(changed.zone_path, ORIGIN, cache=False)
    with named(tmp_path / "changed", changed.zone_path, changed.serial_to) as port:
        new_copy = verify_copy(ADDRESS, ORIGIN, port=port, timeout=120)
    assert check_copy(updated, new_copy, serial=changed.serial_to) is None
    problem = check_copy(reference, new_copy) or ""
    assert problem.startswith("RRSUM differs")
    assert ZoneSum.from_text(new_copy.digest or "").records == reference.records + 1
    assert (changed.deleted, changed.added) == (5, 6)
