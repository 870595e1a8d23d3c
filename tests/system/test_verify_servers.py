"""A real copy from each server (BIND, Knot, NSD), read with verify_copy, has the same RRSUM
with the compiled digest and with the Python reference, and both equal the zone file's sum;
against a reference that holds a changed, a missing or an extra record, both report the
difference. Each server compresses and orders its answers its own way, which is what the
unit tests' dnspython-rendered messages cannot show.

Each test starts its servers on 127.0.0.1 with a free port in its own temp dir and kills
exactly those pids at the end; readiness is an SOA answer, never a sleep.
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

from harness.xfr.rrsum import ZoneSum
from harness.xfr.rrsum_native import ENV, native_module
from harness.xfr.rrsum_text import sum_lines
from harness.xfr.soa_query import query_soa_serial
from harness.xfr.verify import check_copy, verify_copy
from harness.xfr.zonefile_sum import apply_diff_file, zone_file_sum
from harness.zonegen import ZoneFile, ZoneSpec, change_set, generate

pytestmark = [
    pytest.mark.root,
    pytest.mark.servers,
    pytest.mark.xdist_group("verify-servers"),  # its zones generated once (module fixture)
]

ADDRESS = "127.0.0.1"
# Over INLINE_BYTES on the wire (what the runner reads with workers or inline), and signed:
# RRSIG, NSEC3, DNSKEY as each server renders them.
UNSIGNED = ZoneSpec("tld", 80_000, "tld.", seed=7)
SIGNED = ZoneSpec("tld", 2_000, "cz.", seed=8, signed=True)
BINARIES = {"bind": "named", "knot": "knotd", "nsd": "nsd"}


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((ADDRESS, 0))
        return int(sock.getsockname()[1])


def config(kind: str, folder: Path, port: int, zones: list[ZoneFile]) -> list[str]:
    """Write the server's config; its argv (in the foreground)."""
    if kind == "bind":
        conf = folder / "named.conf"
        conf.write_text(
            "options {\n"
            f'  directory "{folder}"; pid-file "{folder}/named.pid";\n'
            f'  session-keyfile "{folder}/session.key"; managed-keys-directory "{folder}";\n'
            f"  listen-on port {port} {{ {ADDRESS}; }}; listen-on-v6 {{ none; }};\n"
            "  recursion no; notify no; allow-transfer { any; };\n"
            "};\ncontrols { };\n"
            + "".join(f'zone "{z.origin}" {{ type primary; file "{z.path}"; }};\n' for z in zones)
        )
        return ["named", "-g", "-u", "root", "-n", "2", "-c", str(conf)]
    if kind == "knot":
        conf = folder / "knot.conf"
        (folder / "db").mkdir()
        conf.write_text(
            f'server:\n    rundir: "{folder}"\n    pidfile: "{folder}/knot.pid"\n'
            f"    listen: {ADDRESS}@{port}\n"
            f'log:\n  - target: "{folder}/knot.log"\n    any: info\n'
            f'database:\n    storage: "{folder}/db"\n'
            f"acl:\n  - id: local\n    address: {ADDRESS}\n    action: transfer\n"
            "template:\n  - id: default\n    acl: local\n    zonefile-sync: -1\n"
            "    journal-content: none\n    semantic-checks: off\n"
            "zone:\n" + "".join(f'  - domain: {z.origin}\n    file: "{z.path}"\n' for z in zones)
        )
        return ["knotd", "-c", str(conf)]
    conf = folder / "nsd.conf"
    conf.write_text(
        f"server:\n    ip-address: {ADDRESS}@{port}\n    do-ip6: no\n"
        '    username: ""\n    chroot: ""\n    database: ""\n'
        f'    zonesdir: "{folder}"\n    zonelistfile: "{folder}/zone.list"\n'
        f'    pidfile: "{folder}/nsd.pid"\n    xfrdfile: "{folder}/xfrd.state"\n'
        f'    xfrdir: "{folder}"\n    logfile: "{folder}/nsd.log"\n    zonefiles-write: 0\n'
        "remote-control:\n    control-enable: no\n"
        + "".join(
            f'zone:\n    name: "{z.origin}"\n    zonefile: "{z.path}"\n'
            f"    provide-xfr: {ADDRESS} NOKEY\n"
            for z in zones
        )
    )
    return ["nsd", "-d", "-c", str(conf)]


@contextmanager
def serving(kind: str, folder: Path, zones: list[ZoneFile]) -> Iterator[int]:
    """The server ``kind`` serving ``zones`` as a primary; yields its port."""
    folder.mkdir(parents=True)
    port = free_port()
    argv = config(kind, folder, port, zones)
    log_path = folder / "stdout.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=folder
        )
    try:
        deadline = time.monotonic() + 180
        for zone in zones:
            while query_soa_serial(ADDRESS, zone.origin, port=port, timeout=0.5) != zone.serial:
                if proc.poll() is not None or time.monotonic() > deadline:
                    logs = "".join(p.read_text(errors="replace") for p in folder.glob("*.log"))
                    pytest.fail(f"{kind} did not serve {zone.origin}: {logs[-3000:]}")
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
def zones(tmp_path_factory: pytest.TempPathFactory) -> tuple[ZoneFile, ZoneFile, Path]:
    if os.geteuid() != 0:
        pytest.skip("needs root")
    if native_module() is None:
        pytest.fail("the xfrbench_rrsum extension is not installed: run `make setup`")
    if shutil.which("dnssec-signzone") is None:
        pytest.skip("signed zones need dnssec-signzone (bind9-utils)")
    cache = tmp_path_factory.mktemp("zones")
    return (
        generate(UNSIGNED, cache_dir=cache).files[0],
        generate(SIGNED, cache_dir=cache).files[0],
        cache,
    )


def both(monkeypatch: pytest.MonkeyPatch, read):  # type: ignore[no-untyped-def]
    """(compiled, reference) results of ``read()``."""
    monkeypatch.delenv(ENV, raising=False)
    compiled = read()
    monkeypatch.setenv(ENV, "python")
    reference = read()
    monkeypatch.delenv(ENV)
    return compiled, reference


@pytest.mark.parametrize("kind", sorted(BINARIES))
def test_a_real_copy_sums_the_same_both_ways(
    kind: str,
    zones: tuple[ZoneFile, ZoneFile, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if shutil.which(BINARIES[kind]) is None:
        pytest.skip(f"{BINARIES[kind]} is not installed")
    unsigned, signed, cache = zones
    references: dict[str, ZoneSum] = {}
    for zone in (unsigned, signed):
        compiled, python = both(
            monkeypatch, lambda z=zone: zone_file_sum(z.path, z.origin, cache=False)
        )
        assert compiled == python and compiled.records == zone.records
        references[zone.origin] = compiled
    with serving(kind, tmp_path / kind, [unsigned, signed]) as port:
        copies = {
            zone.origin: both(
                monkeypatch,
                lambda z=zone: verify_copy(ADDRESS, z.origin, port=port, timeout=120),
            )
            for zone in (unsigned, signed)
        }
    for origin, (compiled, python) in copies.items():
        assert compiled.ok and python.ok, (compiled.error, python.error)
        assert compiled.extra["digest_implementation"] == "rust"
        assert python.extra["digest_implementation"] == "python"
        assert compiled.digest == python.digest == references[origin].text, origin
        assert check_copy(references[origin], compiled) is None

    # A reference the copy does not match: the change set replaces 5 records and adds one
    # (changed and extra records); and one record more than the copy has (a missing one).
    changed = change_set(UNSIGNED, unsigned.serial + 1, 11, cache_dir=cache)
    base = references[unsigned.origin]
    missing_one = base + sum_lines([f"gone.{unsigned.origin} 300 IN A 192.0.2.9"], unsigned.origin)
    for reference in (apply_diff_file(base, changed.diff_path, unsigned.origin), missing_one):
        for copy in copies[unsigned.origin]:
            assert (check_copy(reference, copy) or "").startswith("RRSUM differs")
