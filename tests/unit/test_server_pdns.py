"""The PowerDNS dialect, pure parts: version, capabilities, log lines and their year-less
stamps, rendering (config, start script, the database of zones, keys and settings).

Logs are real captures of PowerDNS Authoritative 4.7.3 (Debian 12), unedited:
- pdns_xfer.log: a secondary run by the harness (scenario with a Knot 3.2.6 primary, NOTIFY,
  TCP and TCP+TSIG, AXFR and IXFR cases sharing the secondary, 2026-11-25);
- pdns_primary_xfer.log: a primary of a BIND 9.18.49 secondary asking for IXFR (research run,
  loglevel 6; the "== ..." line was echoed in between steps by the person running it);
- pdns_uptodate.log: a secondary refreshed and told to retrieve when up to date (research).
"""

from __future__ import annotations

import shlex
import sqlite3
import stat
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from harness.servers import DIALECTS, ServerSetup, ZoneEntry
from harness.servers.pdns import SCHEMA, Pdns, pdns_timestamp
from harness.xfr.secrets import new_tsig

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
PACKAGED_SCHEMA = Path("/usr/share/pdns-backend-sqlite3/schema/schema.sqlite3.sql")
CAPTURED = datetime(2026, 11, 25, 17, 0, tzinfo=UTC).timestamp()  # near the captures


def _log(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_version_from_what_pdns_server_prints() -> None:
    # `pdns_server --version` writes this on stderr (stamped like its log) and exits 99.
    printed = (
        "Nov 25 15:56:49 PowerDNS Authoritative Server 4.7.3 (C) 2001-2022 PowerDNS.COM BV\n"
        "Nov 25 15:56:49 Using 64-bits mode. Built using gcc 12.2.0.\n"
    )
    assert Pdns.parse_version(printed) == "4.7.3"
    assert Pdns.parse_version("pdns_recursor 4.8.4") is None


def test_capabilities_say_what_4_7_cannot_do() -> None:
    caps = DIALECTS["pdns"].capabilities("4.7.3")
    assert not caps.xot_primary.ok and not caps.xot_secondary.ok
    assert "no XoT" in caps.xot_primary.reason
    assert not caps.ixfr_primary.ok and "whole zone" in caps.ixfr_primary.reason
    assert caps.ixfr_secondary.ok and caps.tsig.ok
    assert not caps.ixfr_signed_secondary.ok and "AXFR" in caps.ixfr_signed_secondary.reason
    assert any("1 s loop" in note for note in caps.notes)


def test_secondary_log_incoming_axfr_and_ixfr() -> None:
    entries = Pdns.parse_log(_log("pdns_xfer.log"), near=CAPTURED)
    incoming = [e for e in entries if e.direction == "in"]
    assert [(e.xfr, e.serial) for e in incoming] == [
        ("axfr", 1),
        ("ixfr", 2),
        ("ixfr", 3),
        ("axfr", 4),
        ("axfr", 5),
        ("ixfr", 6),
    ]
    assert {e.zone for e in incoming} == {"pairs.example."}
    assert {e.peer for e in incoming} == {"198.19.24.2"}
    # Nothing in its log says sizes or durations.
    assert all(e.bytes is e.records is e.messages is e.duration_s is None for e in entries)
    # The harness's reads of the copy, on loopback, are outgoing transfers to 127.0.0.1.
    outgoing = [e for e in entries if e.direction == "out"]
    assert len(outgoing) == 4 and all(Pdns.peer_is(e.peer, "127.0.0.1") for e in outgoing)
    first = incoming[0]
    assert first.logged_at == "Nov 25 16:41:57"
    assert first.at_unix == datetime(2026, 11, 25, 16, 41, 57).timestamp()


def test_primary_log_counts_an_ixfr_answered_as_axfr_once() -> None:
    entries = Pdns.parse_log(_log("pdns_primary_xfer.log"), near=CAPTURED)
    # Three whole zones (the first AXFR, two IXFRs answered AXFR style), one up-to-date
    # IXFR answered with the SOA; the AXFRs cut short by a client that hung up never
    # logged "finished".
    assert [(e.direction, e.xfr, e.logged_at) for e in entries] == [
        ("out", "axfr", "Nov 25 16:17:37"),
        ("out", "axfr", "Nov 25 16:17:43"),
        ("out", "ixfr", "Nov 25 16:17:44"),
        ("out", "axfr", "Nov 25 16:17:50"),
    ]
    assert all(e.serial is None and e.peer == "192.0.2.2" for e in entries)


def test_an_up_to_date_retrieve_is_no_transfer() -> None:
    entries = Pdns.parse_log(_log("pdns_uptodate.log"), near=CAPTURED)
    assert [(e.direction, e.xfr, e.serial) for e in entries] == [
        ("in", "axfr", 1),
        ("in", "axfr", 2),  # an IXFR the primary answered with the whole zone
        ("out", "axfr", None),
    ]


def test_peers_as_pdns_writes_them() -> None:
    assert Pdns.peer_is("192.0.2.2", "192.0.2.2")
    assert Pdns.peer_is("192.0.2.2:34681", "192.0.2.2")
    assert not Pdns.peer_is("192.0.2.22", "192.0.2.2")
    assert not Pdns.peer_is(None, "192.0.2.2")


@pytest.mark.parametrize(
    ("stamp", "near", "expected"),
    [
        ("Nov 25 16:09:02", datetime(2026, 11, 25, 16, 10), datetime(2026, 11, 25, 16, 9, 2)),
        # A year-end: the stamp belongs to the year that puts it nearest.
        ("Dec 31 23:59:59", datetime(2027, 1, 1, 0, 0, 5), datetime(2026, 12, 31, 23, 59, 59)),
        ("Jan  1 00:00:01", datetime(2026, 12, 31, 23, 59), datetime(2027, 1, 1, 0, 0, 1)),
        ("Feb 29 12:00:00", datetime(2029, 1, 10), datetime(2028, 2, 29, 12, 0)),
    ],
)
def test_year_less_stamps(stamp: str, near: datetime, expected: datetime) -> None:
    got = pdns_timestamp(
        f"{stamp} AXFR-out zone 'x', ...", UTC, near.replace(tzinfo=UTC).timestamp()
    )
    assert got == expected.replace(tzinfo=UTC).timestamp()
    assert pdns_timestamp("no stamp here") is None


# --- rendering -----------------------------------------------------------------------------


def _setup(tmp_path: Path, role: str, **kw: object) -> ServerSetup:
    zones = [ZoneEntry(f"z{i}.example.", tmp_path / f"z{i}.zone") for i in range(kw.pop("n", 1))]
    peers = ("198.18.0.130", "198.18.0.131") if role == "primary" else ("198.18.0.2",)
    return ServerSetup(
        role=role,  # type: ignore[arg-type]
        address="198.18.0.2" if role == "primary" else "198.18.0.130",
        peers=peers,
        zones=zones,
        workdir=tmp_path / role,
        control_socket=tmp_path / "ctl" / f"abc-{role[0]}.sock",
        **kw,  # type: ignore[arg-type]
    )


def _rows(db: Path, sql: str) -> set[tuple[object, ...]]:
    with sqlite3.connect(db) as con:
        return set(con.execute(sql).fetchall())


def _apply(server: Pdns) -> Path:
    """What start.sh (and a switch's reconfig_argv) does on the server's host: the schema
    into a new database, then the rendered rows, by the sqlite3 tool."""
    db, workdir = server.database, server.setup.workdir
    script = f'[ -s "{db}" ] || sqlite3 -bail "{db}" < "{workdir}/schema.sql"; '
    script += f'sqlite3 "{db}" < "{server.database_script}"'
    subprocess.run(["/bin/sh", "-c", script], check=True)
    return db


def test_primary_renders_its_zones_keys_and_settings(tmp_path: Path) -> None:
    tsig, update = new_tsig(), new_tsig(name="xfrbench-update.")
    setup = _setup(tmp_path, "primary", tsig=tsig, tsig_only=False, update_key=update)
    server = Pdns(setup, Path("/usr/sbin/pdns_server"))
    files = server.render()
    conf = (setup.workdir / "pdns.conf").read_text()
    for line in (
        "launch=gsqlite3",
        "local-address=198.18.0.2, 127.0.0.1",
        "primary=yes",
        "only-notify=",
        "dnsupdate=yes",
        "allow-dnsupdate-from=127.0.0.0/8, 198.18.0.2",
        "xfr-cycle-interval=1",
        "xfr-max-received-mbytes=0",
        "disable-syslog=yes",
    ):
        assert line in conf.splitlines(), line
    start = (setup.workdir / "start.sh").read_text()
    assert 'load-zone z0.example. "' in start and "exec /usr/sbin/pdns_server" in start
    assert f'--socket-dir="{tmp_path}/ctl/abc-p"' in start
    script = server.database_script  # it holds the secrets
    assert script in files and stat.S_IMODE(script.stat().st_mode) == 0o600
    assert "umask 077" in start  # ...and so does the database start.sh makes
    db = _apply(server)
    assert _rows(db, "SELECT name, type, master FROM domains") == {("z0.example", "MASTER", None)}
    assert _rows(db, "SELECT name, algorithm, secret FROM tsigkeys") == {
        ("xfrbench-xfr", "hmac-sha256", tsig.secret),
        ("xfrbench-update", "hmac-sha256", update.secret),
    }
    assert _rows(db, "SELECT kind, content FROM domainmetadata") == {
        ("TSIG-ALLOW-AXFR", "xfrbench-xfr."),
        ("ALLOW-AXFR-FROM", "198.18.0.130/32"),  # unsigned cases in its group
        ("ALLOW-AXFR-FROM", "198.18.0.131/32"),
        ("ALSO-NOTIFY", "198.18.0.130"),
        ("ALSO-NOTIFY", "198.18.0.131"),
        ("TSIG-ALLOW-DNSUPDATE", "xfrbench-update."),
        ("NOTIFY-DNSUPDATE", "1"),
    }
    assert (tmp_path / "ctl" / "abc-p").is_dir()
    assert server.control_path == tmp_path / "ctl" / "abc-p"  # removed after each stop


def test_a_primary_of_many_zones_loads_them_in_one_transaction(tmp_path: Path) -> None:
    setup = _setup(tmp_path, "primary", n=12, notify=False, tsig=new_tsig())
    server = Pdns(setup, Path("/usr/sbin/pdns_server"))
    server.render()
    start = (setup.workdir / "start.sh").read_text()
    assert "load-zone z" not in start and "zone2sql --gsqlite" in start
    zones = (setup.workdir / "zones.conf").read_text()
    assert zones.count("type master;") == 12
    db = _apply(server)
    assert len(_rows(db, "SELECT name FROM domains WHERE type = 'MASTER'")) == 12
    # TSIG only and no NOTIFY: no address may transfer unsigned, nobody is notified.
    assert _rows(db, "SELECT DISTINCT kind FROM domainmetadata") == {("TSIG-ALLOW-AXFR",)}


def test_a_secondary_is_switched_by_its_rows_and_keeps_its_copy(tmp_path: Path) -> None:
    key = new_tsig()
    setup = _setup(tmp_path, "secondary", tsig=key, ixfr=True)
    server = Pdns(setup, Path("/usr/sbin/pdns_server"))
    server.render()
    conf = (setup.workdir / "pdns.conf").read_text().splitlines()
    assert "secondary=yes" in conf and "trusted-notification-proxy=127.0.0.1" in conf
    assert "allow-notify-from=198.18.0.2/32, 127.0.0.0/8" in conf
    db = _apply(server)
    assert _rows(db, "SELECT name, type, master FROM domains") == {
        ("z0.example", "SLAVE", "198.18.0.2")
    }
    assert _rows(db, "SELECT kind, content FROM domainmetadata") == {
        ("AXFR-MASTER-TSIG", "xfrbench-xfr."),
        ("IXFR", "1"),
    }
    with sqlite3.connect(db) as con:  # a copy it took
        con.execute(
            "INSERT INTO records (domain_id, name, type, content) VALUES (1, 'a', 'A', 'x')"
        )
    # The next case: no TSIG (the key stays known for signed NOTIFYs), AXFR.
    server.setup = _setup(tmp_path, "secondary", tsig=None, tsig_known=key, ixfr=False)
    server.render()
    _apply(server)
    assert _rows(db, "SELECT kind FROM domainmetadata") == set()
    assert _rows(db, "SELECT name FROM tsigkeys") == {("xfrbench-xfr",)}
    assert _rows(db, "SELECT count(*) FROM records") == {(1,)}


def test_a_signed_zone_is_kept_as_transferred_and_read_back(tmp_path: Path) -> None:
    """The DNSSEC tables and PRESIGNED only for a zone with its own DNSSEC records; its
    rows lack the NSEC3 chain PowerDNS makes when it serves: no copy on disk to check."""
    plain = Pdns(_setup(tmp_path / "plain", "secondary", ixfr=True), Path("/usr/sbin/pdns"))
    plain.render()
    assert not any("dnssec" in line for line in plain.config.read_text().splitlines())
    assert plain.disk_copy("z0.example.") is not None
    setup = _setup(tmp_path / "signed", "secondary", ixfr=True, signed=True)
    server = Pdns(setup, Path("/usr/sbin/pdns_server"))
    server.render()
    assert "gsqlite3-dnssec=yes" in server.config.read_text().splitlines()
    db = _apply(server)
    assert _rows(db, "SELECT kind, content FROM domainmetadata") == {
        ("PRESIGNED", "1"),
        ("IXFR", "1"),
    }
    assert server.disk_copy("z0.example.") is None
    server.render()  # a switch replaces the row, never doubles it
    _apply(server)
    assert _rows(db, "SELECT count(*) FROM domainmetadata WHERE kind = 'PRESIGNED'") == {(1,)}
    assert Pdns.snippet_owned["gsqlite3-dnssec"]


def test_options_replace_the_rendered_defaults(tmp_path: Path) -> None:
    options = {"xfr-cycle-interval": 5, "retrieval-threads": 8}
    setup = _setup(tmp_path, "secondary", options=options)
    Pdns(setup, Path("/usr/sbin/pdns_server")).render()
    conf = (setup.workdir / "pdns.conf").read_text().splitlines()
    assert [line for line in conf if line.startswith("xfr-cycle-interval")] == [
        "xfr-cycle-interval=5"
    ]
    assert "retrieval-threads=8" in conf


def test_control_commands(tmp_path: Path) -> None:
    server = Pdns(_setup(tmp_path, "secondary"), Path("/usr/sbin/pdns_server"), in_container=True)
    socket_dir = f"--socket-dir={tmp_path}/ctl/abc-s"
    assert server.retransfer_argv("z0.example") == [
        "/usr/bin/pdns_control",
        f"--config-dir={tmp_path}/secondary",
        socket_dir,
        "retrieve",
        "z0.example.",
    ]
    assert server.refresh_argv("z0.example.") == [
        "/usr/bin/pdns_notify",
        "127.0.0.1",
        "z0.example.",
    ]
    # A switch: the rendered rows applied on the server's host, then a check it answers.
    shell, flag, script = server.reconfig_argv()
    assert (shell, flag) == ("/bin/sh", "-c")
    assert shlex.split(script) == [
        "sqlite3", f"{tmp_path}/secondary/pdns.sqlite3", "<", str(server.database_script),
        "&&", *server.control("rping"),
    ]  # fmt: skip
    assert server.argv() == ["/bin/bash", f"{tmp_path}/secondary/start.sh"]


def test_a_switch_runs_in_a_folder_whose_name_the_shell_would_split(tmp_path: Path) -> None:
    """A run folder with a space and a quote in its name: the shell still gets each path
    as one word (sh runs it: the rows land in the database)."""
    folder = tmp_path / "it's a run"
    server = Pdns(_setup(folder, "secondary"), Path("/usr/sbin/pdns_server"))
    server.render()
    with sqlite3.connect(server.database) as con:  # start.sh made it
        con.executescript((server.setup.workdir / "schema.sql").read_text())
    shell, flag, script = server.reconfig_argv()
    applied = script.partition(" && ")[0]  # without the server's rping
    subprocess.run([shell, flag, applied], check=True, timeout=30)
    assert _rows(server.database, "SELECT name FROM domains") == {("z0.example",)}


@pytest.mark.skipif(not PACKAGED_SCHEMA.exists(), reason="pdns-backend-sqlite3 not installed")
def test_the_schema_is_the_installed_packages() -> None:
    assert SCHEMA.read_text() == PACKAGED_SCHEMA.read_text()
