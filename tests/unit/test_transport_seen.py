"""The transport a transfer really used (the wire's connect ports, the servers' TSIG words)
judged against the case's, and kept on every measured record. Fake bench, no servers."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.core.transport import Transport
from harness.measure.protocol import Publication
from harness.measure.transport_seen import TransportSeen
from tests.unit.test_flows import FakeBench, _plan, _run


def test_the_evidence_names_the_transport() -> None:
    seen = TransportSeen.of([853, 853], {"signed": True, "records": 3}, {"signed": True})
    assert seen == TransportSeen((853,), True, "primary")
    xot_tsig = Transport.parse("xot-tsig")
    assert seen.transport == xot_tsig and seen.unproven(xot_tsig) is None
    # The primary's word first; the secondary's where the primary's log does not say.
    assert TransportSeen.of([53], {}, {"signed": False}) == TransportSeen((53,), False, "secondary")
    assert TransportSeen.of([53], {"signed": None}, {}).transport is None  # TSIG unknown


def test_what_contradicts_the_expected_transport() -> None:
    plain_to_853 = TransportSeen((853,), False, "primary")
    assert plain_to_853.contradiction(Transport.parse("xot")) is None
    assert plain_to_853.contradiction(Transport.parse("tcp")) == (
        "the secondary connected to the primary's port 853, not 53 (tcp)"
    )
    kept_key = TransportSeen((53,), True, "primary")
    assert kept_key.contradiction(Transport.parse("tcp")) == (
        "the primary's log says the transfer was signed; tcp is unsigned"
    )
    lost_key = TransportSeen((853,), False, "secondary")
    assert lost_key.contradiction(Transport.parse("xot-tsig")) == (
        "the secondary's log says the transfer was unsigned; xot-tsig is signed"
    )
    # Both ports in one transfer's window: one of them is not the transport's.
    assert TransportSeen((53, 853), None).contradiction(Transport.parse("xot")) is not None


def test_silence_is_no_contradiction_but_no_proof() -> None:
    unseen = TransportSeen((), None)
    assert unseen.contradiction(Transport.parse("xot-tsig")) is None
    assert unseen.unproven(Transport.parse("xot-tsig")) == (
        "no connect from the secondary to the primary was seen on the wire"
    )
    # A TSIG setting no log says (Knot 3.2) does not fail a proof; the record keeps None.
    assert TransportSeen((53,), None).unproven(Transport.parse("tcp-tsig")) is None


def test_every_measured_record_says_what_it_was_seen_to_use(tmp_path: Path) -> None:
    plan = _plan(tmp_path, 'repeats = 1\ntransports = ["xot-tsig"]\n')
    (record,) = _run(FakeBench(plan, signed={"secondary": True}))
    assert record.ok and record.extra["transport_seen"] == {
        "transport": "xot-tsig",
        "ports": [853],
        "signed": True,
        "signed_said_by": "primary",
    }


@pytest.mark.parametrize(
    ("script", "words"),
    [
        ({"signed": {"secondary": True}}, "log says the transfer was signed; tcp is unsigned"),
        ({"ports": {"secondary": [853]}}, "port 853, not 53"),
    ],
)
def test_a_transfer_over_another_transport_is_the_harness_error_not_a_result(
    tmp_path: Path, script: dict[str, dict[str, object]], words: str
) -> None:
    """Issue 18: a secondary that kept its old setting after a switch was recorded ok, its
    time counted for the transport the case names."""
    plan = _plan(tmp_path, 'repeats = 1\ntransports = ["tcp"]\n')
    (record,) = _run(FakeBench(plan, **script))
    assert not record.ok and not record.counts and record.failure == "harness"
    assert record.verified  # the copy itself was right
    assert record.error is not None and record.error.startswith("not over tcp: ")
    assert words in record.error


def test_the_connects_are_looked_for_from_the_publication_on(tmp_path: Path) -> None:
    # A real NSD started an IXFR before the primary's NOTIFY to it left: its connect came
    # before the repeat's t0, and the window from t0 saw none.
    plan = _plan(tmp_path, "repeats = 1\n")
    bench = FakeBench(plan)
    windows: list[float] = []
    published: list[float] = []
    publish, ports = bench.publish, bench.connect_ports

    def publish_at(serial: int) -> Publication:
        publication = publish(serial)
        published.append(publication.issued)
        return publication

    def ports_in(host: str, since: float) -> list[int]:
        windows.append(since)
        return ports(host, since)

    bench.publish = publish_at  # type: ignore[method-assign]
    bench.connect_ports = ports_in  # type: ignore[method-assign]
    (record,) = _run(bench)
    (since,) = windows
    assert since == published[-1] and record.phases["notify_sent"] > 0  # before the NOTIFY
