"""Each server as a secondary (BIND, Knot, NSD, PowerDNS), its copy verified from the file it
keeps (measure/disk_copy.py) as `xfrbench run` does: the same verdict as the copy read back,
after the first AXFR and after an IXFR (journals: BIND's rndc sync, Knot's flush); a record
taken out of the file after the server wrote it fails verification, and so does a server
serving a copy other than its file (edited behind its back, then the file put back).

Each test runs a BIND primary and the secondary in namespaces of their own testbed and stops
exactly those servers at the end.
"""

from __future__ import annotations

import dataclasses
import os
import sqlite3
from contextlib import AbstractContextManager, closing
from pathlib import Path

import dns.rdatatype
import pytest

from harness.core.seeds import derive_seed
from harness.measure import processes as srv
from harness.measure.disk_copy import check_on_disk, make_current
from harness.measure.live import LiveCase
from harness.xfr.name_sample import draw
from harness.xfr.zone_copy import write_lines
from tests.system.live_cases import first_copies

pytestmark = [
    pytest.mark.root,
    pytest.mark.netns,
    pytest.mark.servers,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for namespaces"),
]

KINDS = ["bind", "knot", "nsd", "pdns"]
NS = dns.rdatatype.NS


def live_case(tmp_path: Path, kind: str) -> AbstractContextManager[LiveCase]:
    """A BIND primary and a `kind` secondary serving the first copy of a 2,000-record tld
    zone (IXFR with change sets of 10 records, NOTIFY)."""
    return first_copies(
        tmp_path,
        'repeats = 1\ntimeout = "20s"\nxfr = ["ixfr"]\n[zones]\npreset = "tld"\n'
        f'records = 2000\norigin = "disk.example."\n[servers.secondary]\nkind = "{kind}"\n',
    )


def both(live: LiveCase, serial: int) -> None:
    """The copy verified from disk and read back: both verified, the same records."""
    zone = live.first_zone
    disk = live.verify("secondary", zone, serial)
    assert disk.ok, disk.problem
    assert (disk.by, disk.sample) == ("disk+sample", 32)
    assert disk.flush_s is not None and disk.flush_s >= 0
    chosen = live.plan
    live.plan = dataclasses.replace(chosen, verify="served")
    try:
        read = live.verify("secondary", zone, serial)
    finally:
        live.plan = chosen
    assert read.ok, read.problem
    assert (read.by, read.records) == ("served", disk.records)


@pytest.mark.parametrize("kind", KINDS)
def test_a_copy_verified_on_disk_is_the_copy_read_back(kind: str, tmp_path: Path) -> None:
    with live_case(tmp_path, kind) as live:
        both(live, live.base_serial)
        serial = live.base_serial + 1
        live.publish(serial)  # a change set: the secondary takes it by IXFR
        assert live.wait_served(["secondary"], live.first_zone, serial, live.clock() + 30)
        assert live.change is not None
        both(live, serial)


@pytest.mark.parametrize("kind", KINDS)
def test_a_record_taken_out_of_the_file_after_the_flush_fails(kind: str, tmp_path: Path) -> None:
    with live_case(tmp_path, kind) as live:
        running, zone, serial = live.secondaries["secondary"], live.first_zone, live.base_serial
        copy = running.server.disk_copy(zone)
        assert copy is not None

        def run(argv: list[str], **kw: object) -> object:
            return running.place.run(argv, timeout=20, **kw)

        assert make_current(copy, zone, serial, run, 20.0).current
        lines = copy.path.read_text().splitlines(keepends=True)
        gone = next(i for i, line in enumerate(lines) if line.split()[-2:-1] == ["NS"])
        copy.path.write_text("".join(lines[:gone] + lines[gone + 1 :]))

        def ask(keys: list) -> dict:  # type: ignore[type-arg]
            return running.place.served_names(keys, 20)

        check = check_on_disk(copy, zone, live._reference(zone), serial, [], seed=1, ask=ask,
                              scratch=tmp_path / "scratch")  # fmt: skip
        assert not check.ok and check.failure == "verification", check
        assert (check.problem or "").startswith("the copy on disk differs: RRSUM expected")


@pytest.mark.parametrize("kind", KINDS)
def test_a_server_serving_other_than_its_file_fails(kind: str, tmp_path: Path) -> None:
    """One sampled name's NS TTL changed in what the server serves: BIND and NSD leave the
    file they wrote (put back as it was) alone, so the sample finds it; Knot writes what it
    serves and PowerDNS's file is its database, so the sum does."""
    with live_case(tmp_path, kind) as live:
        running, zone, serial = live.secondaries["secondary"], live.first_zone, live.base_serial
        assert live.verify("secondary", zone, serial).ok
        copy = running.server.disk_copy(zone)
        assert copy is not None
        lines_path = copy.path
        if copy.format == "master":
            assert kind in ("nsd", "pdns")
            if kind == "pdns":  # its file is an output of pdnsutil: write it once more
                run = running.place.run
                make_current(copy, zone, serial, lambda argv, **kw: run(argv, **kw), 20.0)
            lines_path = tmp_path / "lines"
            write_lines(copy.path, lines_path, zone)
        seed = derive_seed(live.plan.zone_spec.seed, "verify-sample", "secondary", str(serial))
        sample = draw(lines_path, zone, [], seed)  # the names the check will ask for
        apex = sample.names[0]
        owner = next(
            n for n in sample.names[1:] if (n, NS) in sample.expected and n.parent() == apex
        ).to_text()
        if kind == "pdns":
            with closing(sqlite3.connect(running.server.database)) as db, db:  # type: ignore[attr-defined]
                changed = db.execute(
                    "UPDATE records SET ttl = 1234 WHERE name = ? AND type = 'NS'",
                    (owner.rstrip("."),),
                ).rowcount
            assert changed > 0
        else:
            original = copy.path.read_bytes()
            srv.stop(running)
            edited = _edited(original, owner, copy.format == "master")
            copy.path.write_bytes(edited)
            srv.spawn(running, render=False)
            assert live.wait_served(["secondary"], zone, serial, live.clock() + 30)
            copy.path.write_bytes(original)  # the file as the server wrote it
        check = live.verify("secondary", zone, serial)
        assert not check.ok and check.failure == "verification", check
        problem = check.problem or ""
        if kind in ("bind", "nsd"):
            assert problem.startswith("served otherwise than its copy on disk at 1 of ")
            assert f"{owner} NS: served TTL 1234 " in problem
        else:
            assert problem.startswith("the copy on disk differs: RRSUM expected")


def _edited(text: bytes, owner: str, master: bool) -> bytes:
    """The zone file with `owner`'s NS records at TTL 1234 (a direct child of the zone: in a
    master file, its label under the zone's $ORIGIN and the lines that leave it out)."""
    label, zone = (part.encode() for part in owner.split(".", 1))
    out, inside, origin = [], False, b""
    for line in text.splitlines(keepends=True):
        fields = line.split()
        first = line[:1] not in (b" ", b"\t")
        if master and fields[:1] == [b"$ORIGIN"]:
            origin = fields[1]
        elif not master:
            inside = fields[:1] == [owner.encode()]
        elif first and fields and not line.startswith(b";"):
            inside = origin == zone and fields[0] == label
        if inside and b"NS" in fields:
            at = fields.index(b"NS")
            ttl = next(i for i, f in enumerate(fields[:at]) if f.isdigit())
            fields[ttl] = b"1234"
            line = (b"" if first else b"\t") + b"\t".join(fields) + b"\n"
        out.append(line)
    edited = b"".join(out)
    assert edited != text, f"no NS record of {owner} in the file"
    return edited
