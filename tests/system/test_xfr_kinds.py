"""AXFR and IXFR cases sharing their servers (interleaved), on real servers: every measured
transfer is of its case's kind, as the primary's own log says serial by serial.

Issue 18: a Knot 3.2 secondary cannot be told to ask AXFR only; in the "axfr" cases it
asked IXFR and its BIND primary sent IXFRs (run 20261125T170854Z-228a6d: IXFR for all 8
"axfr" and "ixfr" transfers), and the report's AXFR row showed IXFR times.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from harness import spec
from harness.plan.case import group_cases, plan_case
from harness.results.model import TransferRecord
from harness.run.runner import NETNS, resolve_binaries
from harness.run.session import GroupSession, RunContext

pytestmark = [
    pytest.mark.root,
    pytest.mark.netns,
    pytest.mark.servers,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for namespaces"),
]

# Each kind after each other, on both transports (a switch of the transport and of the kind).
SEQUENCE = [
    ("tcp", "axfr"),
    ("tcp", "ixfr"),
    ("tcp", "axfr"),
    ("tcp-tsig", "ixfr"),
    ("tcp-tsig", "axfr"),
    ("tcp-tsig", "ixfr"),
    ("tcp", "ixfr"),
    ("tcp-tsig", "axfr"),
]
# The BIND primary's line for each transfer out: "AXFR-style IXFR" is a whole zone.
BIND_OUT = re.compile(
    r"client @\S+ (?P<peer>[\d.]+)#\d+(?:/key \S+)? \([^)]*\): transfer of '[^']+': "
    r"(?P<kind>AXFR-style IXFR|AXFR|IXFR) ended: .*\(serial (?P<serial>\d+)\)"
)
# Knot's: with provide-ixfr off, "IXFR, outgoing, ..., cannot provide, fallback to AXFR" and
# then "AXFR, outgoing, remote A@port, started, serial N".
KNOT_OUT = re.compile(
    r"\] (?P<kind>AXFR|IXFR), outgoing, remote (?P<peer>[\d.]+)@\d+, started, "
    r"serial (?:\d+ -> )?(?P<serial>\d+)"
)


def visit(tmp_path: Path, primary: str, secondary: str) -> list[TransferRecord]:
    """One testbed visit, one measured repeat per item of SEQUENCE."""
    path = tmp_path / "kinds.toml"
    path.write_text(
        'repeats = 1\ntimeout = "60s"\ntrigger = "notify"\nxfr = ["axfr", "ixfr"]\n'
        'transports = ["tcp", "tcp-tsig"]\n'
        '[zones]\npreset = "tld"\nrecords = 5000\norigin = "kinds.example."\nixfr_changes = 10\n'
        f'[servers.primary]\nkind = "{primary}"\n[servers.secondary]\nkind = "{secondary}"\n'
    )
    plans = [plan_case(case) for case in spec.load(path).cases]
    (group,) = group_cases(plans)
    index = {(case.transport.name, case.xfr): i for i, case in enumerate(group.cases)}
    per_case, _ = resolve_binaries(plans, NETNS, path)
    records: list[TransferRecord] = []
    run = RunContext("kinds", records.append, per_case, NETNS)
    with GroupSession(group, tmp_path / "visit", run) as session:
        for position, key in enumerate(SEQUENCE, start=1):
            session.run(index[key], position, position, 0)
    return records


def sent_kinds(tmp_path: Path, primary: str) -> dict[int, str]:
    """serial -> the kind the primary's own log says it sent to the secondary."""
    name, pattern = ("named.log", BIND_OUT) if primary == "bind" else ("knot.log", KNOT_OUT)
    log = (tmp_path / "visit" / "primary" / name).read_text()
    return {
        int(m["serial"]): "axfr" if m["kind"].startswith("AXFR") else "ixfr"
        for m in pattern.finditer(log)
        if m["peer"] != "127.0.0.1"
    }


@pytest.mark.parametrize("primary", ["bind", "knot"])
def test_a_knot_secondary_gets_axfr_in_axfr_cases(tmp_path: Path, primary: str) -> None:
    records = visit(tmp_path, primary, "knot")
    assert [(r.transport, r.xfr) for r in records] == SEQUENCE
    assert all(r.ok and r.verified for r in records), [(r.case, r.error) for r in records]
    sent = sent_kinds(tmp_path, primary)
    for record in records:
        assert record.serial is not None
        assert sent[record.serial] == record.xfr, (record.case, record.serial)
        assert record.extra["xfr_seen"]["xfr"] == record.xfr
        assert record.extra["xfr_seen"]["said_by"] == "primary"
