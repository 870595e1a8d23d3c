"""An IXFR case whose transfers a server logged as whole zones (a logged fallback: they
count) says so on the first screen and in its row: its figures are AXFR times."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from harness.report.data import load_report_data
from harness.report.html import render_html
from harness.report.text import print_summary
from harness.results import RunStore
from tests.unit.test_report import RUN_META, record

TINY, TLD = "bind-bind/tcp/ixfr", "bind-bind/xot/ixfr"
RATIO = (
    "IXFR delta size (270 bytes) exceeds the maximum ratio to database size (130 bytes), "
    "falling back to AXFR"
)


def seen(xfr: str, kind: str | None) -> dict[str, object]:
    return {
        "xfr_seen": {
            "xfr": xfr,
            "said_by": "primary",
            "fallback": RATIO if kind else None,
            "fallback_kind": kind,
        }
    }


def run(tmp_path: Path) -> Path:
    with RunStore.create(tmp_path, "w1", None, dict(RUN_META)) as store:
        for repeat in range(3):
            store.append(
                record("w1", TINY, repeat, xfr="ixfr", extra=seen("axfr", "delta too large"))
            )
            store.append(record("w1", TLD, repeat, xfr="ixfr", extra=seen("ixfr", None)))
        store.append(record("w1", "bind-bind/tcp/axfr", 0, extra=seen("axfr", None)))
    return store.folder


def test_ixfr_rows_that_were_whole_zones_say_so(tmp_path: Path) -> None:
    data = load_report_data(run(tmp_path))
    rows = {row.case: row for row in data.cases}
    assert rows[TINY].whole_zone_note == "came as AXFR: 3 of 3 (delta too large)"
    assert rows[TLD].whole_zone_note is None  # its IXFRs were IXFRs
    assert rows["bind-bind/tcp/axfr"].whole_zone_note is None  # an AXFR case's AXFR
    (note,) = data.whole_zone_notes
    assert "came as AXFR: 3 of 3" in note and "AXFR times, not IXFR" in note

    out = io.StringIO()
    print_summary(data, Console(file=out, width=240))
    first_screen = out.getvalue().split("cases (ok = verified")[0]
    assert "came as AXFR: 3 of 3 (delta too large), as the servers logged" in first_screen
    page = render_html(data)
    assert 'id="whole-zones"' in page and "came as AXFR: 3 of 3" in page
