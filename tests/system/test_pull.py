"""System tests of the client side: the own reader and kdig against a real BIND, TSIG, XoT,
IXFR, a silent server, SOA polling, and sockets inside a network namespace.

Every test starts its own `named` on 127.0.0.1 with free ports, in its own temp dir, and
kills exactly that pid at the end; readiness is an SOA answer, never a sleep.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.core import netns as netns_mod
from harness.xfr import TsigKey, compare_zones
from harness.xfr.digest import zone_digest_dnspython
from harness.xfr.kdig import kdig_pull
from harness.xfr.poll import wait_for_serial
from harness.xfr.pull import pull, pull_verified_copy, xot_context
from harness.xfr.secrets import new_tls
from harness.xfr.soa_query import query_soa_serial

pytestmark = [
    pytest.mark.root,
    pytest.mark.xdist_group("pull"),  # one named for its tests (module fixture)
]

ZONE = "example."
SERIAL = 2024010101
ADDRESS = "127.0.0.1"
KEY = TsigKey("xfr-key", "hmac-sha256", "c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0MTI=")
UPDATE_KEY = TsigKey("update-key", "hmac-sha256", "dXBkYXRldXBkYXRldXBkYXRldXBkYXRldXBkYXRlMTI=")
WRONG_KEY = TsigKey("xfr-key", "hmac-sha256", "d3JvbmcgYnV0IHdlbGwgZm9ybWVkIHNlY3JldCEhISE=")
TLS_NAME = "xfr.test"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((ADDRESS, 0))
        return int(sock.getsockname()[1])


def zone_text(serial: int, hosts: int) -> str:
    lines = [
        f"$ORIGIN {ZONE}",
        "$TTL 3600",
        f"@ IN SOA ns1 hostmaster {serial} 900 300 604800 900",
        "@ IN NS ns1",
        "@ IN NS ns2.Other.Test.",
        "ns1 IN A 192.0.2.1",
        "ns1 IN AAAA 2001:db8::1",
        "Mail IN MX 10 ns1",
        'txt IN TXT "hello world" "two"',
        "_sip._tcp IN SRV 0 5 5060 ns1",
        "sub IN NS ns.sub",
        "ns.sub IN A 192.0.2.53",
    ]
    lines += [f"h{i} IN A 10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}" for i in range(hosts)]
    return "\n".join(lines) + "\n"


def make_tls_files(folder: Path) -> tuple[Path, Path, Path]:
    """A per-test CA and a server certificate for TLS_NAME and 127.0.0.1: (ca, cert, key)."""
    files = new_tls(folder, TLS_NAME, ADDRESS)
    return files.ca_cert, files.cert, files.key


def key_clause(key: TsigKey) -> str:
    return f'key "{key.name}" {{ algorithm {key.algorithm}; secret "{key.secret}"; }};\n'


@dataclass
class Named:
    folder: Path
    port: int
    tls_port: int
    ca: Path
    zone_file: Path
    proc: subprocess.Popen[bytes]

    def log(self) -> str:
        return (self.folder / "named.log").read_text(errors="replace")


def start_named(folder: Path, hosts: int = 300) -> Named:
    """named serving ZONE (dynamic, so an update makes an IXFR) over TCP and XoT."""
    folder.mkdir(parents=True, exist_ok=True)
    ca, cert, key = make_tls_files(folder)
    zone_file = folder / "example.zone"
    zone_file.write_text(zone_text(SERIAL, hosts))
    port, tls_port = free_port(), free_port()
    conf = folder / "named.conf"
    fd = os.open(conf, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # holds secrets
    with os.fdopen(fd, "w") as fh:
        fh.write(
            key_clause(KEY)
            + key_clause(UPDATE_KEY)
            + f'tls local-tls {{ key-file "{key}"; cert-file "{cert}"; }};\n'
            + "options {\n"
            + f'  directory "{folder}";\n'
            + f'  pid-file "{folder}/named.pid";\n'
            + f'  session-keyfile "{folder}/session.key";\n'
            + f'  managed-keys-directory "{folder}";\n'
            + f"  listen-on port {port} {{ {ADDRESS}; }};\n"
            + f"  listen-on port {tls_port} tls local-tls {{ {ADDRESS}; }};\n"
            + "  listen-on-v6 { none; };\n"
            + "  recursion no;\n"
            + "  notify no;\n"
            + "  allow-transfer { any; };\n"
            + "};\n"
            + "controls { };\n"
            + f'zone "{ZONE}" {{ type primary; file "{zone_file}"; '
            + f"allow-update {{ key {UPDATE_KEY.name}; }}; }};\n"
        )
    log = (folder / "named.log").open("wb")
    proc = subprocess.Popen(
        ["named", "-g", "-u", "root", "-n", "2", "-c", str(conf)],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    log.close()
    server = Named(folder, port, tls_port, ca, zone_file, proc)
    deadline = time.monotonic() + 30
    while query_soa_serial(ADDRESS, ZONE, port=port, timeout=0.2) != SERIAL:
        if proc.poll() is not None or time.monotonic() > deadline:
            stop_named(server)
            pytest.fail(f"named did not come up: {server.log()[-2000:]}")
        time.sleep(0.02)  # between readiness queries, not instead of them
    return server


def stop_named(server: Named) -> None:
    if server.proc.poll() is None:
        server.proc.send_signal(signal.SIGTERM)
        try:
            server.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.proc.kill()
            server.proc.wait()


@pytest.fixture(scope="module")
def named(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Named]:
    if os.geteuid() != 0 or shutil.which("named") is None:
        pytest.skip("needs root and named")
    server = start_named(tmp_path_factory.mktemp("named"))
    try:
        yield server
    finally:
        stop_named(server)


def reference_digest(server: Named) -> str:
    import dns.zone

    return zone_digest_dnspython(dns.zone.from_file(str(server.zone_file), ZONE))


@pytest.mark.servers
def test_axfr_own_and_kdig_agree(named: Named) -> None:
    own = pull(ADDRESS, ZONE, port=named.port, digest=True, timeout=10)
    kd = kdig_pull(ADDRESS, ZONE, port=named.port, digest=True, timeout=10)
    assert own.ok, own.error
    assert kd.ok, kd.error
    assert own.records == kd.records == 300 + 10 + 1  # zone records + the closing SOA
    assert (own.bytes, own.messages, own.serial) == (kd.bytes, kd.messages, kd.serial)
    assert own.digest == kd.digest == reference_digest(named)
    assert compare_zones(own, kd) is None
    assert 0 <= own.connect_s <= own.first_byte_s <= own.duration_s  # type: ignore[operator]


@pytest.mark.servers
def test_axfr_many_messages_fast_path(tmp_path: Path) -> None:
    if os.geteuid() != 0 or shutil.which("named") is None:
        pytest.skip("needs root and named")
    server = start_named(tmp_path / "big", hosts=30_000)
    try:
        fast = pull(ADDRESS, ZONE, port=server.port, timeout=30)
        full = pull(ADDRESS, ZONE, port=server.port, timeout=30, digest=True)
        copy = pull_verified_copy(ADDRESS, ZONE, port=server.port, timeout=30)
        kd = kdig_pull(ADDRESS, ZONE, port=server.port, timeout=30)
    finally:
        stop_named(server)
    assert fast.ok and full.ok and kd.ok, (fast.error, full.error, kd.error)
    # Read first, digested after: the same digest as digesting while reading.
    assert copy.ok and copy.digest == full.digest and copy.wire is None
    assert fast.messages > 10
    # The fast path parsed only the first message and the one that closes the transfer.
    assert fast.extra["messages_parsed"] <= 3
    assert full.extra["messages_parsed"] == full.messages
    assert fast.records == full.records == kd.records == 30_000 + 11
    assert fast.bytes == full.bytes == kd.bytes


@pytest.mark.servers
def test_tsig_right_key_ok_wrong_key_fails(named: Named) -> None:
    good = pull(ADDRESS, ZONE, port=named.port, tsig=KEY, digest=True, timeout=10)
    assert good.ok, good.error
    assert good.extra["tsig_signed_messages"] >= 1
    assert good.digest == reference_digest(named)
    bad = pull(ADDRESS, ZONE, port=named.port, tsig=WRONG_KEY, timeout=10)
    assert not bad.ok
    assert "NOTAUTH" in (bad.error or "") and "BADSIG" in (bad.error or "")
    kd_good = kdig_pull(ADDRESS, ZONE, port=named.port, tsig=KEY, timeout=10)
    kd_bad = kdig_pull(ADDRESS, ZONE, port=named.port, tsig=WRONG_KEY, timeout=10)
    assert kd_good.ok, kd_good.error
    assert kd_good.bytes == good.bytes
    assert not kd_bad.ok and "BADSIG" in (kd_bad.error or "")


@pytest.mark.servers
def test_xot_with_ca_and_hostname(named: Named) -> None:
    ctx = xot_context(named.ca)
    by_name = pull(ADDRESS, ZONE, port=named.tls_port, tls=ctx, tls_hostname=TLS_NAME, digest=True)
    assert by_name.ok, by_name.error
    assert by_name.tls_s is not None and by_name.tls_s > 0
    assert by_name.digest == reference_digest(named)
    by_ip = pull(ADDRESS, ZONE, port=named.tls_port, tls=ctx, tsig=KEY, timeout=10)
    assert by_ip.ok, by_ip.error
    wrong_name = pull(ADDRESS, ZONE, port=named.tls_port, tls=ctx, tls_hostname="other.test")
    assert not wrong_name.ok and "certificate" in (wrong_name.error or "")
    kd = kdig_pull(
        ADDRESS, ZONE, port=named.tls_port, tls_ca=named.ca, tls_hostname=TLS_NAME, timeout=10
    )
    # kdig 3.2 labels the connection "(TCP)" even over TLS; the port only speaks TLS.
    assert kd.ok, kd.error
    assert kd.records == by_name.records
    # Over TLS kdig adds EDNS (padding) to its query, so each answer carries an 11-byte OPT.
    assert kd.bytes - by_name.bytes == 11 * kd.messages


@pytest.mark.servers
def test_ixfr_after_update(tmp_path: Path) -> None:
    import dns.query
    import dns.tsigkeyring
    import dns.update

    if os.geteuid() != 0 or shutil.which("named") is None:
        pytest.skip("needs root and named")
    server = start_named(tmp_path / "ixfr")
    try:
        update = dns.update.UpdateMessage(
            ZONE,
            keyring=dns.tsigkeyring.from_text({UPDATE_KEY.name: UPDATE_KEY.secret}),
            keyname=UPDATE_KEY.name,
            keyalgorithm=UPDATE_KEY.algorithm,
        )
        update.add("new", 300, "A", "192.0.2.99")
        update.delete("h1", "A")
        answer = dns.query.tcp(update, ADDRESS, port=server.port, timeout=5)
        assert answer.rcode() == 0
        since = time.monotonic()
        seen = wait_for_serial(ADDRESS, ZONE, SERIAL + 1, port=server.port, timeout=10, since=since)
        assert seen >= since
        inc = pull(ADDRESS, ZONE, xfr="ixfr", serial=SERIAL, port=server.port, timeout=10)
        assert inc.ok, inc.error
        assert inc.ixfr_style == "incremental"
        assert inc.serial == SERIAL + 1
        # new SOA, old SOA, deleted A, new SOA, added A, new SOA
        assert inc.records == 6
        kd = kdig_pull(ADDRESS, ZONE, xfr="ixfr", serial=SERIAL, port=server.port, timeout=10)
        assert kd.ok, kd.error
        assert (kd.records, kd.bytes, kd.ixfr_style) == (6, inc.bytes, "incremental")
        current = pull(ADDRESS, ZONE, xfr="ixfr", serial=SERIAL + 1, port=server.port)
        assert current.ok and current.ixfr_style == "up-to-date" and current.records == 1
        older = pull(ADDRESS, ZONE, xfr="ixfr", serial=SERIAL - 5, port=server.port, digest=True)
        assert older.ok, older.error
        assert older.ixfr_style == "axfr-style"
        full = pull(ADDRESS, ZONE, port=server.port, digest=True)
        assert older.digest == full.digest is not None
    finally:
        stop_named(server)


@pytest.mark.servers
def test_query_soa_serial_and_errors(named: Named) -> None:
    assert query_soa_serial(ADDRESS, ZONE, port=named.port) == SERIAL
    assert query_soa_serial(ADDRESS, "not-served.", port=named.port) is None  # REFUSED
    wrong_zone = pull(ADDRESS, "not-served.", port=named.port, timeout=5)
    assert not wrong_zone.ok and "NOTAUTH" in (wrong_zone.error or "")
    since = time.monotonic()
    with pytest.raises(Exception, match=r"timeout after 0\.[0-9] s waiting for serial"):
        wait_for_serial(ADDRESS, ZONE, SERIAL + 100, port=named.port, timeout=0.3, since=since)


@contextmanager
def silent_listener(netns: str | None = None) -> Iterator[int]:
    """A TCP listener that accepts connections and never answers."""
    sock = netns_mod.socket_in(netns, socket.AF_INET, socket.SOCK_STREAM)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def serve() -> None:
        sock.settimeout(0.05)
        while not stop.is_set():
            try:
                conn, _ = sock.accept()
                accepted.append(conn)
            except OSError:
                continue

    try:
        sock.bind((ADDRESS, 0))
        sock.listen(8)
        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        yield int(sock.getsockname()[1])
        stop.set()
        thread.join()
    finally:
        for conn in accepted:
            conn.close()
        sock.close()


def test_pull_from_silent_server_times_out() -> None:
    with silent_listener() as port:
        t0 = time.monotonic()
        result = pull(ADDRESS, ZONE, port=port, timeout=0.5)
        elapsed = time.monotonic() - t0
    assert not result.ok
    assert (result.error or "").startswith("timeout after 0.5 s waiting for the first message")
    assert elapsed < 2


@pytest.fixture
def scratch_netns() -> Iterator[str]:
    if os.geteuid() != 0:
        pytest.skip("needs root")
    name = f"xfbtest-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        subprocess.run(["ip", "-n", name, "link", "set", "lo", "up"], check=True)
        yield name
    finally:
        subprocess.run(["ip", "netns", "delete", name], check=True)


@pytest.mark.netns
def test_netns_entered_and_socket_in(scratch_netns: str) -> None:
    root_inode = netns_mod.current_netns_inode()
    with netns_mod.entered(scratch_netns):
        inside = netns_mod.current_netns_inode()
        assert inside != root_inode
    assert netns_mod.current_netns_inode() == root_inode
    with netns_mod.entered(None):
        assert netns_mod.current_netns_inode() == root_inode

    # A socket made inside stays inside: its loopback is not the root namespace's.
    server = netns_mod.socket_in(scratch_netns, socket.AF_INET, socket.SOCK_DGRAM)
    try:
        server.bind((ADDRESS, 0))
        port = server.getsockname()[1]
        assert netns_mod.current_netns_inode() == root_inode
        client = netns_mod.socket_in(scratch_netns, socket.AF_INET, socket.SOCK_DGRAM)
        with client:
            client.sendto(b"ping", (ADDRESS, port))
            server.settimeout(2)
            assert server.recvfrom(16)[0] == b"ping"
    finally:
        server.close()

    with silent_listener(scratch_netns) as port:
        inside_pull = pull(ADDRESS, ZONE, port=port, netns=scratch_netns, timeout=0.3)
        outside_pull = pull(ADDRESS, ZONE, port=port, timeout=0.3)
    assert (inside_pull.error or "").startswith("timeout after")
    assert "Connection refused" in (outside_pull.error or "")


def test_entered_unknown_netns_is_a_clear_error() -> None:
    from harness.core.errors import EnvironmentProblem

    with (
        pytest.raises(EnvironmentProblem, match="does not exist"),
        netns_mod.entered("xfb-no-such-ns"),
    ):
        pass
