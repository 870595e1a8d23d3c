"""What a cold start reads, shared by the netns and inventory backends (measure/cold_start.py):
copies checked against the zone files' sums, a secondary's log read in its own wording."""

from __future__ import annotations

from pathlib import Path

from harness.measure.cold_start import check_copies, read_cold_start_log
from harness.servers import Bind, Nsd
from harness.xfr import PullResult
from harness.xfr.rrsum import ZoneSum

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SUM = ZoneSum(12345, 7)


def _copy(zone: str, *, ok: bool = True, serial: int = 5, digest: str = SUM.text) -> PullResult:
    error = None if ok else "connection refused"
    return PullResult(ok, "axfr", zone, error=error, serial=serial, records=7, digest=digest)


def test_each_zone_checked_against_its_sum_at_the_serial() -> None:
    references = {"a.": SUM, "b.": SUM, "c.": SUM}
    copies = {
        "a.": _copy("a."),
        "b.": _copy("b.", serial=4),
        "c.": _copy("c.", digest=ZoneSum(999, 7).text),
        "d.": _copy("d."),
        "e.": _copy("e.", ok=False),
    }
    got = check_copies(references | {"e.": SUM}, copies, list(copies), 5)
    assert got["a."].ok and got["a."].records == 7
    assert not got["b."].ok and "serial differs" in (got["b."].problem or "")
    assert not got["c."].ok and "RRSUM differs" in (got["c."].problem or "")
    assert got["d."].problem == "could not read the primary's copy"
    assert got["e."].problem == "could not read the copy: connection refused"


def test_a_secondarys_log_read_as_its_incoming_transfers() -> None:
    text = (FIXTURES / "bind_xfer.log").read_text()
    stamps = [e.at_unix for e in Bind.parse_log(text) if e.direction == "in" and e.at_unix]
    started = max(stamps) - 1.5
    log = read_cold_start_log(Bind, text, started)
    assert (log.transfers, log.bytes, log.messages) == (2, 4232 + 205, 2)
    assert log.last_transfer_s == 1.5


def test_a_log_without_sizes_sums_none() -> None:
    text = (FIXTURES / "nsd_xfer.log").read_text()
    log = read_cold_start_log(Nsd, text, None)
    assert log.transfers > 0 and log.bytes is None and log.last_transfer_s is None
