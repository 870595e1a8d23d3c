"""The phase chart of a real quick.toml run (tests/fixtures/runs/report-quick): rows grouped
by transfer kind then transport in one fixed order, the legend in the order the phases
happen, one hue per phase, a millisecond axis and each bar's total at its end."""

from __future__ import annotations

import re
from pathlib import Path

from harness.core.terms import TRANSPORTS, XFR_KINDS
from harness.report.data import load_report_data
from harness.report.figures import render_svg
from harness.report.figures_common import PHASE_COLOURS
from harness.report.figures_time import phases_figure
from harness.report.phases import SEEN, case_phases
from harness.results.model import TransferRecord

QUICK = Path(__file__).parent.parent / "fixtures" / "runs" / "report-quick"


def test_rows_by_kind_then_transport() -> None:
    records = []
    for index, xfr in enumerate(("ixfr", "axfr")):  # the order a schedule might run them
        for transport in ("xot-tsig", "tcp", "xot", "tcp-tsig"):
            for zone in ("tiny", "tld"):
                records.append(
                    TransferRecord(
                        run_id="r", case=f"bind-bind/{zone}/{transport}/{xfr}", repeat=1,
                        primary_kind="bind", secondary_kind="bind", host="secondary",
                        site=None, transport=transport, xfr=xfr, zone="q.", serial=2,  # type: ignore[arg-type]
                        records=3, bytes=200, messages=1, duration_s=0.07 + index / 100,
                        started_at=1.0, ok=True, verified=True, trigger="notify",
                    )
                )  # fmt: skip
    rows = [p.case for p in case_phases(records)]
    assert rows == [
        f"bind-bind/{zone}/{transport}/{xfr}"
        for xfr in XFR_KINDS
        for transport in TRANSPORTS
        for zone in ("tiny", "tld")
    ]


def test_legend_in_time_order_with_one_hue_each() -> None:
    figure = phases_figure(load_report_data(QUICK))
    svg = render_svg(figure)
    text = re.sub(r"<[^>]+>", "\n", svg)
    legend = [line.strip() for line in text.splitlines() if line.strip().startswith("→ ")]
    assert legend == ["→ NOTIFY", "→ SOA query", "→ connect", "→ transfer starts (log)",
                      "→ served"]  # fmt: skip
    assert [name.removeprefix("→ ") for name in legend] == [n for n in SEEN if f"→ {n}" in legend]
    hues = [PHASE_COLOURS[name.removeprefix("→ ")] for name in legend]
    assert len(set(hues)) == len(hues)
    rows = len(figure.series["cases"])
    assert all(f'id="fig-phases-total-{y}"' in svg for y in range(rows))
    assert "ms from the reload (or control) command" in text
