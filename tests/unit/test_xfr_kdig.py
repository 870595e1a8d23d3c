"""kdig's output parser on captured kdig 3.2.6 output, and its command line."""

from __future__ import annotations

from pathlib import Path

from harness.xfr import TsigKey
from harness.xfr.kdig import kdig_argv, parse_kdig_output

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def parse(name: str):  # type: ignore[no-untyped-def]
    return parse_kdig_output((FIXTURES / name).read_text())


def test_axfr_many_messages() -> None:
    stats = parse("kdig_axfr_multi.txt")
    assert (stats.received_bytes, stats.messages, stats.records) == (65317, 5, 3011)
    assert stats.time_s == 0.0088
    assert (stats.server, stats.protocol) == ("127.0.0.1@42497", "TCP")
    assert stats.first_serial == 2024010101
    assert stats.errors == []
    assert stats.ixfr_style == "axfr-style"  # the second record is not an SOA


def test_axfr_tsig_and_xot() -> None:
    tsig = parse("kdig_axfr_tsig.txt")
    assert (tsig.received_bytes, tsig.messages, tsig.records) == (65717, 5, 3011)
    xot = parse("kdig_axfr_xot.txt")
    assert (xot.received_bytes, xot.messages, xot.records, xot.time_s) == (65372, 5, 3011, 0.0109)


def test_ixfr() -> None:
    inc = parse("kdig_ixfr_incremental.txt")
    assert (inc.records, inc.first_serial, inc.ixfr_style) == (6, 2024010102, "incremental")
    up = parse("kdig_ixfr_uptodate.txt")
    assert (up.records, up.received_bytes, up.first_serial) == (1, 76, 2024010102)


def test_errors() -> None:
    notauth = parse("kdig_axfr_notauth.txt")
    assert notauth.errors[0] == "server replied with error 'NOTAUTH'"
    assert notauth.received_bytes == 0 and notauth.messages is None
    badsig = parse("kdig_axfr_badsig.txt")
    assert "BADSIG" in badsig.errors[0]
    badname = parse("kdig_axfr_xot_badname.txt")
    assert badname.warnings == ["TLS, handshake failed (Error in the certificate.)"]
    assert badname.errors and badname.received_bytes is None
    crashed = parse("kdig_tls_on_tcp_port.txt")
    assert crashed.errors == ["failed to query server 127.0.0.1@42497(TCP)"]


def test_stderr_is_parsed_too() -> None:
    stats = parse_kdig_output("", ";; ERROR: failed to query server x\n")
    assert stats.errors == ["failed to query server x"]


def test_argv_keeps_secret_out() -> None:
    key = TsigKey("k", "hmac-sha256", "c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0MTI=")
    argv = kdig_argv(
        "192.0.2.1",
        "example.",
        xfr="ixfr",
        serial=5,
        port=853,
        netns="xfb-s",
        key_file=Path("/tmp/k.key"),
        tls=True,
        tls_ca=Path("/tmp/ca.crt"),
        tls_hostname="ns.test",
        timeout=2.5,
    )
    assert argv[:4] == ["ip", "netns", "exec", "xfb-s"]
    assert "IXFR=5" in argv and "-k" in argv and "+tls-ca=/tmp/ca.crt" in argv
    assert "+tls-hostname=ns.test" in argv and "+time=3" in argv
    assert not any(key.secret in part for part in argv)
    assert key.kdig_keyfile_text() == f"hmac-sha256:k:{key.secret}\n"
