"""A cold start timed by the secondary's own log (cold_start_poll = "off"), on Knot's lines."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from harness.measure.served_log import first_logged, to_served, wait_logged_zones
from harness.servers.knot import Knot
from harness.xfr.poll_zones import ZonesTimeout

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "knot_xfer.log"


def _line(stamp: str, zone: str) -> str:
    return (
        f"{stamp} info: [{zone}] AXFR, incoming, remote 198.18.255.1@53, finished, "
        "0.01 seconds, 1 messages, 4243 bytes\n"
    )


def test_the_first_incoming_transfer_of_each_wanted_zone_counts() -> None:
    found: dict[str, float] = {}
    first_logged(Knot.parse_log(FIXTURE.read_text()), {"example."}, found)
    assert found == {"example.": 1795310985.0}  # the AXFR; the IXFR after it changes nothing
    first_logged(Knot.parse_log(FIXTURE.read_text()), {"other."}, found)
    assert set(found) == {"example."}


def test_a_stamp_is_the_start_of_its_interval() -> None:
    got = to_served(["a.", "B.", "c."], {"a.": 1010.0, "b.": 1012.0}, 1009.5, 100.0, 1.0)
    assert got.served == {"a.": 101.5, "B.": 103.5}  # served by the end of the second
    assert got.unserved == {"a.": 100.5, "B.": 102.5}  # and not known served before it
    assert got.errors() == {"a.": 1.0, "B.": 1.0}
    early = to_served(["a."], {"a.": 1009.0}, 1009.5, 100.0, 1.0)  # stamp before the start
    assert early.unserved == {"a.": 100.0} and early.served == {"a.": 101.0}


class _Server:
    parse_log = Knot.parse_log
    failures = Knot.failures

    def __init__(self, log: Path) -> None:
        self.log_path = log


class _Running:
    def __init__(self, log: Path, started: float) -> None:
        self.server = _Server(log)
        self.started_at = started
        self.name = "secondary"
        self.checks = 0

    def alive(self) -> None:
        self.checks += 1


def test_the_log_is_read_as_it_grows(tmp_path: Path) -> None:
    log = tmp_path / "knot.log"
    log.write_text(_line("2026-11-22T01:29:45+0000", "z1.example"))
    started = 1795310984.0  # 01:29:44 UTC
    running: Any = _Running(log, started)

    def later() -> None:
        time.sleep(0.3)
        with log.open("a") as f:
            f.write(_line("2026-11-22T01:29:47+0000", "z2.example")[:40])  # half a line
            f.flush()
            time.sleep(0.6)
            f.write(_line("2026-11-22T01:29:47+0000", "z2.example")[40:])

    writer = threading.Thread(target=later)
    writer.start()
    since = time.monotonic()
    seen = wait_logged_zones(running, ["z1.example.", "z2.example."], since, since + 10)
    writer.join()
    assert seen.served == pytest.approx({"z1.example.": since + 2.0, "z2.example.": since + 4.0})
    assert running.checks >= 2


def test_zones_never_logged_time_out_with_what_was(tmp_path: Path) -> None:
    log = tmp_path / "knot.log"
    log.write_text(_line("2026-11-22T01:29:45+0000", "z1.example"))
    running: Any = _Running(log, 1795310984.0)
    since = time.monotonic()
    with pytest.raises(ZonesTimeout, match="1 of 2 zones not logged") as caught:
        wait_logged_zones(running, ["z1.example.", "z2.example."], since, since + 0.2)
    assert set(caught.value.result.served) == {"z1.example."}
