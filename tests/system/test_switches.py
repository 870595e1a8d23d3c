"""Transport switches of a running secondary, in exact sequences, on real servers (a BIND
primary): each switch is made as its dialect declares (reconfiguration or restart), proven
by an unrecorded transfer the first time the visit runs a transport (and after every
restart), and every measured transfer is verified and was seen to use its transport, as
the secondary's own log confirms serial by serial.

Issue 18: an NSD secondary started on TCP+TSIG and switched to XoT by `nsd-control reconfig`
never completed an XoT transfer, and the records called it XoT timeouts.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from harness import spec
from harness.core.terms import TransportName
from harness.core.transport import Transport
from harness.plan.case import group_cases, plan_case
from harness.results.model import TransferRecord
from harness.run.runner import NETNS, resolve_binaries
from harness.run.session import GroupSession, RunContext
from harness.servers import Nsd

pytestmark = [
    pytest.mark.root,
    pytest.mark.netns,
    pytest.mark.servers,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for namespaces"),
]

T, TS, X, XS = "tcp", "tcp-tsig", "xot", "xot-tsig"
# From TCP+TSIG to XoT, XoT+TSIG and back, then on through every other ordered pair of the
# four transports once (an Eulerian circuit: 12 switches).
EVERY_SWITCH_FROM_TCP_TSIG: list[TransportName] = [TS, X, XS, TS, T, X, T, XS, X, TS, XS, T, TS]
EVERY_SWITCH_FROM_TCP: list[TransportName] = [T, TS, T, X, T, XS, TS, X, TS, XS, X, XS, T]

# The secondary's own words for each serial it took: NSD's commit line, BIND's xfer-in.
NSD_COMMIT = re.compile(
    r'committed "received update to serial (?P<serial>\d+) at \S+ from [\d.]+@(?P<port>\d+)'
    r"(?P<tsig> TSIG verified)?"
)
BIND_SIGNED = re.compile(r"transferred serial (?P<serial>\d+)(?P<tsig>: TSIG )?")
BIND_DONE = re.compile(
    r"from [\d.]+#(?P<port>\d+): Transfer completed: .* \(serial (?P<serial>\d+)\)"
)


def visit(tmp_path: Path, secondary: str, sequence: list[TransportName]) -> list[TransferRecord]:
    """One testbed visit running one measured repeat per item of `sequence`, in that order
    (the secondary starts on the first), through the harness's own session."""
    path = tmp_path / "switches.toml"
    path.write_text(
        'repeats = 1\ntimeout = "60s"\ntrigger = "notify"\nxfr = ["axfr"]\n'
        f"transports = {[T, TS, X, XS]!r}\n".replace("'", '"')
        + '[zones]\npreset = "tld"\nrecords = 2000\norigin = "switch.example."\n'
        + f'[servers.primary]\nkind = "bind"\n[servers.secondary]\nkind = "{secondary}"\n'
    )
    plans = [plan_case(case) for case in spec.load(path).cases]
    (group,) = group_cases(plans)
    index = {case.transport.name: i for i, case in enumerate(group.cases)}
    per_case, _ = resolve_binaries(plans, NETNS, path)
    records: list[TransferRecord] = []
    run = RunContext("switches", records.append, per_case, NETNS)
    with GroupSession(group, tmp_path / "visit", run) as session:
        for position, transport in enumerate(sequence, start=1):
            session.run(index[transport], position, position, 0)
    return records


def secondary_saw(tmp_path: Path, kind: str) -> dict[int, tuple[str, bool]]:
    """serial -> (port, signed) as the secondary logged the first transfer of each serial (a
    restarted secondary takes the serial it served before once more, at its start)."""
    name = "nsd.log" if kind == "nsd" else "named.log"
    text = (tmp_path / "visit" / "secondary" / name).read_text()
    saw: dict[int, tuple[str, bool]] = {}
    if kind == "nsd":
        for m in NSD_COMMIT.finditer(text):
            saw.setdefault(int(m["serial"]), (m["port"], bool(m["tsig"])))
        return saw
    signed = {int(m["serial"]): bool(m["tsig"]) for m in BIND_SIGNED.finditer(text)}
    for m in BIND_DONE.finditer(text):
        saw.setdefault(int(m["serial"]), (m["port"], signed[int(m["serial"])]))
    return saw


def check_visit(
    records: list[TransferRecord], sequence: list[TransportName], saw: dict[int, tuple[str, bool]]
) -> None:
    assert [r.transport for r in records] == sequence
    assert all(r.ok and r.verified for r in records), [(r.transport, r.error) for r in records]
    for record in records:
        # The harness's evidence (wire, primary's log) and the secondary's own log agree.
        assert record.extra["transport_seen"]["transport"] == record.transport
        assert record.serial is not None
        transport = Transport.parse(record.transport)
        assert saw[record.serial] == (str(transport.port), transport.signed), record.serial
        schedule = record.extra["schedule"]
        if schedule["switched"]:
            proof = schedule["proof"]
            if proof.get("earlier"):
                # Proven earlier in the visit (prove = "once"): the proving serial reached
                # the secondary as this transport does, and this transfer's own evidence
                # (transport_seen, above) agrees.
                assert proof["serial"] < record.serial - 1
                assert saw[proof["serial"]] == saw[record.serial], record.serial
            else:
                assert proof["seen"]["transport"] == record.transport
                assert proof["serial"] == record.serial - 1 and proof["serial"] in saw


def fresh_proofs(records: list[TransferRecord]) -> int:
    """How many switches an unrecorded transfer proved (not proven earlier)."""
    return sum(
        1
        for r in records
        if r.extra["schedule"]["switched"] and not r.extra["schedule"]["proof"].get("earlier")
    )


def test_nsd_switched_from_tcp_tsig_to_xot_and_back_by_its_reconfiguration(
    tmp_path: Path,
) -> None:
    records = visit(tmp_path, "nsd", EVERY_SWITCH_FROM_TCP_TSIG)
    check_visit(records, EVERY_SWITCH_FROM_TCP_TSIG, secondary_saw(tmp_path, "nsd"))
    # NSD started with the TLS settings: its reconfiguration makes every switch.
    assert [r.extra["schedule"].get("switched_by") for r in records] == [None] + ["reconfig"] * 12
    # Each transport was proven once: the three it was switched to first (TCP+TSIG, where it
    # started, by the warm-up).
    assert fresh_proofs(records) == 3


def test_nsd_restarted_for_switches_it_is_not_declared_to_make(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The restart path, on a dialect declaring no switch (as a new one does): stopped, its
    # xfrd.state removed, started with the new config, proven like any switch.
    monkeypatch.setattr(Nsd, "reconfig_switches", frozenset())
    sequence: list[TransportName] = [TS, X, XS, T]
    records = visit(tmp_path, "nsd", sequence)
    check_visit(records, sequence, secondary_saw(tmp_path, "nsd"))
    switched = [r.extra["schedule"] for r in records[1:]]
    assert [s["switched_by"] for s in switched] == ["restart"] * 3
    assert all(s["switch_s"] > 0 and s["proof"]["seconds"] > 0 for s in switched)
    starts = (tmp_path / "visit" / "secondary" / "nsd.log").read_text().count("nsd started")
    assert starts == 4


def test_bind_makes_every_switch_by_its_reconfiguration(tmp_path: Path) -> None:
    records = visit(tmp_path, "bind", EVERY_SWITCH_FROM_TCP)
    check_visit(records, EVERY_SWITCH_FROM_TCP, secondary_saw(tmp_path, "bind"))
    assert [r.extra["schedule"].get("switched_by") for r in records] == [None] + ["reconfig"] * 12
    assert fresh_proofs(records) == 3
