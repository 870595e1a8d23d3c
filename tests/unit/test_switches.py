"""Which transport switches each dialect's reconfiguration makes on a running secondary, as
real runs showed (the evidence is cited beside each declaration); the harness restarts the
server for the others."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import ClassVar

import pytest

from harness.core.terms import TRANSPORTS, TransportName
from harness.core.transport import Transport
from harness.servers import Bind, Knot, Nsd, Server, ServerSetup, ZoneEntry
from harness.servers.base import Switch
from harness.xfr import TsigKey
from harness.xfr.secrets import TlsFiles

KEY = TsigKey("xfrbench-xfr.", "hmac-sha256", "c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0")
TLS = TlsFiles(Path("ca.pem"), Path("cert.pem"), Path("key.pem"), "primary.test")
PAIRS = [(a, b) for a in TRANSPORTS for b in TRANSPORTS if a != b]


def setup(name: TransportName, *, ixfr: bool = False, tls_known: bool = True) -> ServerSetup:
    zones = [ZoneEntry("tld.", Path("tld.zone"))]
    made = ServerSetup("secondary", "198.18.0.130", ("198.18.0.2",), zones, Path("s"))
    made.transport = Transport.parse(name)
    made.tsig, made.tls = made.transport.secrets(KEY, TLS)
    made.tls_known = TLS if tls_known else None
    made.ixfr = ixfr
    return made


def by_reconfig(
    dialect: type[Server],
    move: Switch,
    *,
    started: TransportName | None = None,
    tls_known: bool = True,
) -> bool:
    before, after = setup(move[0], tls_known=tls_known), setup(move[1], tls_known=tls_known)
    first = setup(started or move[0], tls_known=tls_known)
    return dialect.switches_by_reconfig(first, before, after)


def test_a_setup_holds_the_secrets_of_its_transport() -> None:
    assert [(setup(t).tls is TLS, setup(t).tsig is KEY) for t in TRANSPORTS] == [
        (False, False), (False, True), (True, False), (True, True)
    ]  # fmt: skip


def test_a_primary_setup_names_no_transport_to_switch() -> None:
    primary = dataclasses.replace(setup("tcp"), role="primary", transport=None)
    with pytest.raises(ValueError, match="name their transport"):
        Bind.switches_by_reconfig(primary, primary, primary)


@pytest.mark.parametrize("move", PAIRS)
def test_bind_reconfig_makes_every_switch(move: Switch) -> None:
    assert by_reconfig(Bind, move)


@pytest.mark.parametrize("move", PAIRS)
def test_knot_reconfig_makes_only_the_tsig_switches(move: Switch) -> None:
    assert by_reconfig(Knot, move) == (set(move) == {"tcp", "tcp-tsig"})


@pytest.mark.parametrize("move", PAIRS)
@pytest.mark.parametrize("started", TRANSPORTS)
def test_nsd_started_with_the_tls_settings_switches_by_reconfig(
    move: Switch, started: TransportName
) -> None:
    assert by_reconfig(Nsd, move, started=started)


@pytest.mark.parametrize("move", PAIRS)
def test_nsd_started_without_the_tls_settings_is_restarted_into_xot(move: Switch) -> None:
    # The defect of issue 18: reconfig answered ok, then NSD sent a plain AXFR to port 853.
    expected = not Transport.parse(move[1]).tls
    assert by_reconfig(Nsd, move, started="tcp-tsig", tls_known=False) == expected


def test_nsd_started_on_xot_keeps_its_tls_settings() -> None:
    # What it was started with counts, not what its config says now (a TCP case's).
    started = setup("xot", tls_known=False)
    now, after = setup("tcp", tls_known=False), setup("xot-tsig", tls_known=False)
    assert Nsd.switches_by_reconfig(started, now, after)


class Undeclared(Bind):
    """A new dialect that has not declared anything yet."""

    reconfig_switches: ClassVar[frozenset[Switch]] = frozenset()
    reconfig_switches_xfr = False


@pytest.mark.parametrize("move", PAIRS)
def test_a_dialect_that_declares_nothing_is_restarted_for_every_switch(move: Switch) -> None:
    assert not by_reconfig(Undeclared, move)
    assert not Server.reconfig_switches and not Server.reconfig_switches_xfr


def test_axfr_ixfr_switches() -> None:
    axfr, ixfr = setup("tcp"), setup("tcp", ixfr=True)
    assert Undeclared.switches_by_reconfig(axfr, axfr, dataclasses.replace(axfr)) is True
    assert Undeclared.switches_by_reconfig(axfr, axfr, ixfr) is False
    assert all(d.switches_by_reconfig(axfr, axfr, ixfr) for d in (Bind, Knot, Nsd))


def test_only_nsd_forgets_state_when_restarted() -> None:
    assert Nsd.restart_forgets == ("xfrd.state",)
    assert Bind.restart_forgets == () and Knot.restart_forgets == ()
