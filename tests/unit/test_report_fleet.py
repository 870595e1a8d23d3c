"""The report's fleet section when a fleet did not converge, and a fleet's statistics over
repeats (not secondaries): on the synthetic fleet runs of test_report_answers.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli import main
from harness.report.data import load_report_data
from harness.report.html import render_html, transport_notes
from harness.report.transport_costs import transport_costs
from tests.unit.test_report_answers import Tables, record
from tests.unit.test_report_fleet_answers import FLEETS, fleet_duration, make_fleet_run


def test_a_fleet_that_did_not_converge_shows_no_last_time_and_who_is_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    large = list(FLEETS)[1]
    folder = make_fleet_run(tmp_path, lost=(large, 2, "far-3"))
    data = load_report_data(folder)
    assert data.fleet is not None
    case = data.fleet.cases[1]
    first, second, third = case.repeats
    assert first.converged and first.served_of == "6 of 6 served"
    assert second.served_of == "5 of 6 served" and second.last_s is None
    assert second.p95_s is None and second.last_site is None
    # the origin is the lost secondary's NOTIFY (0.001 s), the earliest of the repeat
    near1 = fleet_duration("near", 1, 2, 3) + 0.01 - 0.001
    assert second.times["near-1"] == pytest.approx(near1)
    assert case.converged == "2 of 3 repeats converged"
    page = render_html(data)
    parsed = Tables(page)
    rows = [(a, c) for a, c in parsed.rows("fleet-repeats") if a.get("data-case") == large]
    lost_row = next(cells for a, cells in rows if a.get("data-repeat") == "2")
    last = next(c for c, _ in lost_row if "last" in c["class"].split())
    assert last["data-value"] == "" and "not converged" in page
    assert "5 of 6 served" in page and "far-3 (far): timed out" in page
    assert "failed (timed out)" in page  # the secondary's own words
    assert main(["report", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "5 of 6" in out and "not converged" in out
    # These records hold no refusal count of the primary's: "not logged", never 0.
    refused = next(c for c, _ in lost_row if "refused" in c.get("class", "").split())
    assert refused["data-value"] == "" and "not logged" in out
    assert "repeat 2: 5 of 6 served, not converged; missing: far-3 (far): timed out" in " ".join(
        out.split()
    )


def test_a_fleets_transport_cost_takes_one_value_per_repeat() -> None:
    """Eight secondaries per repeat, XoT 10 % slower: pooled, 24 against 24 durations made
    p tiny; per repeat it is 3 against 3, where no p below 0.05 is possible."""
    records = []
    for transport, factor in (("tcp", 1.0), ("xot", 1.1)):
        for repeat in (1, 2, 3):
            for index in range(8):
                duration = (0.5 + 0.001 * index + 0.002 * repeat) * factor
                records.append(
                    record("f", f"bind-bind/preset=tld/{transport}/axfr", repeat, duration,
                           host=f"edge-{index}", site="edge",
                           phases={"notify_sent": 0.0, "served": duration})
                )  # fmt: skip
    (group,) = transport_costs(records)
    assert group.per.startswith("fleet repeat") and group.baseline_n == 3
    xot = next(c for c in group.costs if c.transport == "xot")
    assert xot.n == 3 and not xot.testable and not xot.significant
    assert xot.median_s == pytest.approx((0.507 + 0.004) * 1.1)  # repeat 2's last secondary
    assert any("n counts repeats" in note for note in transport_notes([group]))
