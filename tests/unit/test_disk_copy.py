"""Verifying a copy from the file its server keeps (harness/measure/disk_copy.py), on the
servers' own files (tests/fixtures/disk_copies/) and a server answered from the file: the
flush is asked again until the file holds the serial; a copy whose file or served sample
differs fails with what differs; one that cannot be read or asked is the harness's."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import dns.name
import dns.rdatatype
import dns.zone
import pytest

from harness.measure.disk_copy import FLUSH_AGAIN_S, check_on_disk, make_current
from harness.xfr.name_sample import Key, SampleError
from harness.xfr.rrsum import ZoneSum
from harness.xfr.rrsum_text import soa_bump
from harness.xfr.zone_copy import DiskCopy
from harness.xfr.zonefile_sum import zone_file_sum
from harness.zonegen import ZoneSpec, generate
from harness.zonegen.tld import soa_line

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "disk_copies"
ORIGIN = "exp.example."
SOA = "exp.example. 3600 IN SOA a.ns.exp.example. hostmaster.exp.example. {} 900 300 604800 900\n"


@pytest.fixture(scope="module")
def primary(tmp_path_factory: pytest.TempPathFactory) -> ZoneSum:
    """The sum of the zone the captured copies hold: 300 records of tld, serial 2."""
    base = generate(ZoneSpec("tld", 300, ORIGIN, seed=1), cache_dir=tmp_path_factory.mktemp("z"))
    total = zone_file_sum(base.files[0].path, ORIGIN)
    return soa_bump(total, soa_line(ORIGIN, 1), soa_line(ORIGIN, 2), ORIGIN)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_a_server_that_writes_late_is_asked_again_until_the_file_holds_the_serial(
    tmp_path: Path,
) -> None:
    path = tmp_path / "zone"
    path.write_text(SOA.format(4))  # an older version, being replaced
    clock, asked = Clock(), []

    def run(argv: list[str], **kw: Any) -> None:
        asked.append((clock.now, argv))
        if len(asked) == 2:  # the first sync came while it still wrote serial 4
            path.write_text(SOA.format(5))

    copy = DiskCopy(path, "lines", ("rndc", "sync", ORIGIN))
    flushed = make_current(copy, ORIGIN, 5, run, 30.0, clock=clock, sleep=clock.sleep)
    assert (flushed.serial, flushed.current) == (5, True)
    assert [argv for _, argv in asked] == [["rndc", "sync", ORIGIN]] * 2
    assert asked[1][0] - asked[0][0] == pytest.approx(FLUSH_AGAIN_S, abs=0.1)
    # Never written: the serial it holds, after the timeout.
    never = make_current(copy, ORIGIN, 6, lambda argv: None, 5.0, clock=clock, sleep=clock.sleep)
    assert (never.serial, never.current) == (5, False)


def test_a_blocking_command_is_run_once_and_a_printed_copy_is_its_output(tmp_path: Path) -> None:
    calls = []
    copy = DiskCopy(tmp_path / "zone", "lines", ("knotc", "zone-flush"), waits=True)
    (tmp_path / "zone").write_text(SOA.format(3))
    flushed = make_current(copy, ORIGIN, 5, lambda argv: calls.append(argv), 30.0)
    assert calls == [["knotc", "zone-flush"]] and (flushed.serial, flushed.current) == (3, False)
    printed = DiskCopy(tmp_path / "out" / "zone", "master", ("printf",), waits=True, prints=True)

    def run(argv: list[str], *, output: Path) -> None:  # Place.run's printed output
        with output.open("wb") as out:
            subprocess.run(
                [*argv, "$ORIGIN exp.example.\\n" + SOA.format(5)], check=True, stdout=out
            )

    assert make_current(printed, ORIGIN, 5, run, 30.0).current
    assert printed.path.read_text() == "$ORIGIN exp.example.\n" + SOA.format(5)


def _answering(path: Path, fmt: str) -> dict[Key, Any]:
    """A server answering from the file: each (name, type) it holds."""
    text = path.read_text()
    if fmt == "lines" and "\tIN\t" not in text and " IN " not in text:  # Knot's: no class
        text = "".join(
            " ".join([*line.split(None, 2)[:2], "IN", line.split(None, 2)[2]]) + "\n"
            if line and not line.startswith(";")
            else "\n"
            for line in text.splitlines()
        )
    zone = dns.zone.from_text(text, origin=ORIGIN, relativize=False, check_origin=False)
    out: dict[Key, Any] = {}
    for name, node in zone.nodes.items():
        for rdataset in node.rdatasets:
            out[(name, int(rdataset.rdtype))] = (rdataset.ttl, frozenset(rdataset))
    return out


@pytest.mark.parametrize(("kind", "fmt"), [("knot", "lines"), ("nsd", "master")])
def test_a_copy_on_disk_and_what_its_server_serves(
    kind: str, fmt: str, primary: ZoneSum, tmp_path: Path
) -> None:
    path = tmp_path / "zone"
    shutil.copy(FIXTURES / f"{kind}.zone", path)
    copy = DiskCopy(path, fmt, ("flush",))  # type: ignore[arg-type]
    held = _answering(path, fmt)
    asked: list[list[Key]] = []

    def ask(keys: list[Key]) -> dict[Key, Any]:
        asked.append(keys)
        return {key: held.get(key) for key in keys}

    def check(answer: Any = ask, pause: Any = lambda s: None) -> Any:
        return check_on_disk(copy, ORIGIN, primary, 2, [], seed=1, ask=answer,
                             scratch=tmp_path / "scratch", pause=pause)  # fmt: skip

    ok = check()
    assert (ok.ok, ok.by, ok.sample, ok.records, ok.problem) == (True, "disk+sample", 32, 301, None)
    assert not (tmp_path / "scratch").exists()  # a master file's lines are the harness's
    keys = asked[0]
    # Served otherwise at one sampled name: a TTL.
    name, rdtype = next(k for k in keys if k[1] == dns.rdatatype.NS and k[0] != keys[0][0])
    ttl, rdatas = held[(name, rdtype)]
    wrong = check(lambda ks: {k: (ttl + 1, rdatas) if k == (name, rdtype) else held.get(k)
                              for k in ks})  # fmt: skip
    assert not wrong.ok and wrong.failure == "verification"
    assert wrong.problem == (
        f"served otherwise than its copy on disk at 1 of {len(keys)} sampled names and types: "
        f"{name} NS: served TTL {ttl + 1} " + ", ".join(sorted(r.to_text() for r in rdatas))
        + f", the copy holds TTL {ttl} " + ", ".join(sorted(r.to_text() for r in rdatas))
    )  # fmt: skip
    # Between versions: an older serial first, the copy's at the second look.
    apex = dns.name.from_text(ORIGIN)
    older = _answering(FIXTURES / "bind.zone", "lines")
    older[(apex, dns.rdatatype.SOA)] = (3600, frozenset(
        r.replace(serial=1) for r in older[(apex, dns.rdatatype.SOA)][1]))  # fmt: skip
    looks = iter([older, held])
    paused = []
    soa = (apex, dns.rdatatype.SOA)
    again = check(lambda ks: {k: next(looks).get(k) if k == soa else held.get(k) for k in ks},
                  pause=paused.append)  # fmt: skip
    assert again.ok and paused == [1.0]
    assert again.reread == "the secondary serves serial 1, its copy on disk 2"

    # No answer (NSD resets a connection during its handover): asked once more.
    resets = [SampleError("could not ask 127.0.0.1 for the sampled names: connection reset")]

    def flaky(keys: list[Key]) -> dict[Key, Any]:
        if resets:
            raise resets.pop()
        return ask(keys)

    back = check(flaky)
    assert back.ok and "connection reset" in (back.reread or "")

    def unreachable(keys: list[Key]) -> dict[Key, Any]:
        raise SampleError("could not ask 127.0.0.1 for the sampled names: timed out")

    lost = check(unreachable)
    assert not lost.ok and lost.failure == "harness" and "timed out" in (lost.problem or "")
    # Still an older serial at the second look: the copy it serves is not the file's.
    stale = check(lambda ks: {k: older.get(k) if k == soa else held.get(k) for k in ks})
    assert not stale.ok and stale.failure == "verification" and stale.records == 301
    assert stale.problem == stale.reread == "the secondary serves serial 1, its copy on disk 2"


@pytest.mark.parametrize(("kind", "fmt"), [("bind", "lines"), ("nsd", "master")])
def test_a_record_missing_from_the_file_fails_and_a_file_it_cannot_read_is_the_harnesss(
    kind: str, fmt: str, primary: ZoneSum, tmp_path: Path
) -> None:
    path = tmp_path / "zone"
    lines = (FIXTURES / f"{kind}.zone").read_text().splitlines(keepends=True)
    gone = next(i for i, line in enumerate(lines) if line.split()[-2:-1] == ["A"])
    path.write_text("".join(lines[:gone] + lines[gone + 1 :]))
    copy = DiskCopy(path, fmt, ("flush",))  # type: ignore[arg-type]

    def check() -> Any:
        return check_on_disk(copy, ORIGIN, primary, 2, [], seed=1, ask=lambda keys: {},
                             scratch=tmp_path / "scratch")  # fmt: skip

    missing = check()
    assert not missing.ok and missing.failure == "verification" and missing.records == 300
    assert missing.problem is not None and missing.problem.startswith(
        "the copy on disk differs: RRSUM expected 300 records"
    )
    path.write_text("$INCLUDE elsewhere\n" if fmt == "master" else "a 1 IN A 999.1.1.1\n")
    unread = check()
    assert not unread.ok and unread.failure == "harness"
    assert (unread.problem or "").startswith(f"could not read the copy on disk {path}: ")
