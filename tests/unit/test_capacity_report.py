"""A capacity campaign drawn as a page: the answer first, the curve with a mark per step
(pass, fail, too noisy) and the SLA line, then each search's tables."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from harness.capacity import answer as text
from harness.capacity.report import curve_points, render_page, write_page
from harness.results.campaign import CAPACITY_HTML, new_campaign, read_campaign, write_campaign
from tests.unit.test_capacity_answer import SLA, quota_line, searched, step


def campaign_data(then: bool = True) -> dict[str, Any]:
    first = searched(
        [step(8, "pass", 0.9), step(16, "fail", None), step(12, "pass", 1.1),
         step(14, "noisy", 25.0), step(13, "pass", 1.2)],
        capacity=13, fail=14, bound=quota_line(25),
    )  # fmt: skip
    line = quota_line(25)
    line["at_fail"]["candidate"] = "quota"  # as evidence.py writes a reading
    first["evidence"] = [line]
    searches = [first]
    if then:
        second = searched([step(8, "pass", 0.8), step(16, "pass", 1.0)], 16, None, True)
        second["label"] = "servers.primary.options.transfers-out=20"
        searches.append(second)
    for one in searches:
        one |= {"finished": True, "wall_s": 120.0}
        one["answer"] = text.answer(one, "secondaries", SLA)
    return {
        "campaign": "capacity-test",
        "scenario": "scenarios/capacity.toml",
        "key": "secondaries.edge.count",
        "unit": "secondaries",
        "sla": SLA,
        "from": 8.0,
        "max": 16.0,
        "factor": 2.0,
        "searches": searches,
    }


def test_curve_points_are_in_load_order_and_keep_a_fail_without_figure() -> None:
    points = curve_points(campaign_data()["searches"][0])
    assert [p["load"] for p in points] == [8, 12, 13, 14, 16]
    assert points[-1] == {"load": 16, "verdict": "fail", "figure": None, "low": None,
                          "high": None}  # fmt: skip


def test_the_page_opens_with_the_answer_then_the_curve_then_the_tables(tmp_path: Path) -> None:
    data = campaign_data()
    page = render_page(data)
    answer = data["searches"][0]["answer"]
    assert answer.startswith("capacity: 13 secondaries within p95 load time 30 s")
    first = page.index('id="answer-1"')
    assert first < page.index('id="moved"') < page.index('id="curve"')
    assert page.index('id="curve"') < page.index('id="curve-1"') < page.index('id="evidence-1"')
    assert "capacity 13 -&gt; 16 secondaries (+3)" in page  # escaped, as every cell is
    # one mark per step of both searches: 5 + 2 scatter points, the SLA line once
    svg = page[page.index("<svg") : page.index("</svg>")]
    assert len(re.findall(r'id="PathCollection_\d+"|<g id="capacity-PathCollection_\d+"', svg)) == 7
    assert "BIND transfers-out 10 &lt;- binding" in page
    # what the terminal prints is what the page shows
    for row in text.curve_rows(data["searches"][0], SLA):
        assert f"<td>{row[0]}</td><td>{row[1]}</td>" in page


def test_a_campaign_is_drawn_again_from_its_folder(tmp_path: Path) -> None:
    folder = new_campaign(tmp_path, "capacity-again")
    write_campaign(folder, campaign_data(then=False))
    path = write_page(folder, read_campaign(folder))
    assert path == folder / CAPACITY_HTML
    assert 'id="moved"' not in path.read_text() and "<svg" in path.read_text()


def test_a_campaign_with_no_step_yet_has_no_curve(tmp_path: Path) -> None:
    data = campaign_data(then=False)
    data["searches"][0]["result"]["steps"] = []
    assert "<svg" not in render_page(data)
