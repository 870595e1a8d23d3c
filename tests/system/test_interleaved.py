"""Four transports interleaved on one BIND -> BIND testbed: the schedule alternates the cases
repeat by repeat, and each transfer really used its transport, as the secondary's own log
says (port 853 for XoT, the key for TSIG), after its server was switched by `rndc reconfig`."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from harness import spec
from harness.core.transport import Transport
from harness.results.folder import read_run
from harness.run.runner import run_scenario

pytestmark = [
    pytest.mark.root,
    pytest.mark.netns,
    pytest.mark.servers,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for namespaces"),
]

_DONE = re.compile(r"from [\d.]+#(?P<port>\d+): Transfer completed: .* \(serial (?P<serial>\d+)\)")
_SIGNED = re.compile(r"transferred serial (?P<serial>\d+): TSIG '")


def test_four_transports_interleaved_on_one_testbed(tmp_path: Path) -> None:
    path = tmp_path / "interleaved.toml"
    path.write_text(
        'repeats = 3\ntimeout = "60s"\ntransports = ["tcp", "tcp-tsig", "xot", "xot-tsig"]\n'
        'trigger = "notify"\norder = "interleaved"\n'
        '[zones]\npreset = "tld"\nrecords = 1000\norigin = "inter.example."\n'
    )
    run_dir = run_scenario(spec.load(path), results_root=tmp_path / "results")
    _, records = read_run(run_dir)
    assert len(records) == 4 * 3 and all(r.ok and r.verified for r in records)
    # One testbed for the four cases, and the transfers in the order they ran.
    visits = {r.extra["schedule"]["visit_dir"] for r in records}
    assert len(visits) == 1
    ordered = sorted(records, key=lambda r: r.extra["schedule"]["position"])
    assert [r.extra["schedule"]["position"] for r in ordered] == list(range(1, 13))
    for start in range(0, 12, 4):  # every pass runs every case once...
        assert {r.transport for r in ordered[start : start + 4]} == {
            "tcp",
            "tcp-tsig",
            "xot",
            "xot-tsig",
        }
    passes = [tuple(r.transport for r in ordered[s : s + 4]) for s in range(0, 12, 4)]
    assert len(set(passes)) > 1  # ...in a shuffled order
    assert sum(r.extra["schedule"]["switched"] for r in ordered) >= 6

    (log,) = (run_dir / "cases").glob("*/secondary/named.log")
    text = log.read_text()
    port = {int(m["serial"]): m["port"] for m in _DONE.finditer(text)}
    signed = {int(m["serial"]) for m in _SIGNED.finditer(text)}
    for record in records:
        assert record.serial is not None
        transport = Transport.parse(record.transport)
        assert port[record.serial] == str(transport.port), (record.case, record.serial)
        assert (record.serial in signed) == transport.signed, record.case
