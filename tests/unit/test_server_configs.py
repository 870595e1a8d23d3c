"""What the dialects render for a secondary that the harness may switch between transports."""

from __future__ import annotations

from pathlib import Path

from harness.servers import ServerSetup, ZoneEntry, make_server
from harness.xfr import TsigKey
from harness.xfr.secrets import TlsFiles

KEY = TsigKey("xfrbench-xfr.", "hmac-sha256", "c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0")


def _tls(root: Path) -> TlsFiles:
    return TlsFiles(root / "ca.pem", root / "cert.pem", root / "key.pem", "primary.test")


def _secondary(tmp_path: Path, **settings: object) -> ServerSetup:
    zones = [ZoneEntry("tld.", tmp_path / "zones" / "tld.zone")]
    setup = ServerSetup("secondary", "198.18.0.130", ("198.18.0.2",), zones, tmp_path / "s")
    for name, value in settings.items():
        setattr(setup, name, value)
    return setup


def _nsd_conf(setup: ServerSetup) -> str:
    server = make_server("nsd", setup, Path("/usr/sbin/nsd"))
    server.render()
    return server.config.read_text()


def test_nsd_on_tcp_in_a_group_with_xot_knows_the_tls_settings(tmp_path: Path) -> None:
    # NSD 4.6.1 applies tls-auth and tls-cert-bundle only at start; the research runs
    # (research-switch/REPORT.md) failed every switch into XoT without them.
    tls = _tls(tmp_path)
    text = _nsd_conf(_secondary(tmp_path, tsig=KEY, tls_known=tls))
    assert f'tls-cert-bundle: "{tls.ca_cert}"' in text
    assert 'name: "primary-tls"' in text and 'auth-domain-name: "primary.test"' in text
    # ...but transfers over TCP, signed.
    assert "request-xfr: 198.18.0.2@53 xfrbench-xfr.\n" in text


def test_nsd_on_xot_uses_the_tls_settings(tmp_path: Path) -> None:
    tls = _tls(tmp_path)
    text = _nsd_conf(_secondary(tmp_path, tls=tls, tls_known=tls))
    assert "request-xfr: 198.18.0.2@853 NOKEY primary-tls\n" in text
    assert f'tls-cert-bundle: "{tls.ca_cert}"' in text


def test_nsd_in_a_group_without_xot_has_no_tls_settings(tmp_path: Path) -> None:
    text = _nsd_conf(_secondary(tmp_path))
    assert "tls-cert-bundle" not in text and "tls-auth" not in text
    assert "request-xfr: 198.18.0.2@53 NOKEY\n" in text
