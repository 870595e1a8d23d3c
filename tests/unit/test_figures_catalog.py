"""The catalog growth figure: a one-member change's cost per consumer against the catalog's
size, from summary.json's catalog rows, on log axes."""

from __future__ import annotations

from typing import Any

from harness.report.figures import render
from harness.report.figures_catalog import draw_catalog_growth, growth_lines, members_tick
from harness.report.figures_common import Figure


def _row(case: str, phase: str, consumer: str, members: int, **figures: Any) -> dict[str, Any]:
    return {"case": case, "phase": phase, "consumer": consumer, "repeats": 2,
            "members": members, "last_s": figures.get("last_s"),
            "consumer_cpu_s": figures.get("cpu")}  # fmt: skip


# A matrix over catalog.members (1 k and 10 k), two consumers, two repeats each; the rows
# over all consumers (consumer "") are left out of the lines.
ROWS = [
    _row("c1k", "provision", "berlin", 2000),
    _row("c1k", "provision", "prague", 2000),
    _row("c1k", "provision", "", 4000),
    _row("c1k", "add", "berlin", 2, last_s=6.4, cpu=0.004),
    _row("c1k", "add", "prague", 2, last_s=0.2, cpu=0.002),
    _row("c1k", "add", "", 4, last_s=6.4),
    _row("c10k", "provision", "berlin", 20000),
    _row("c10k", "provision", "prague", 20000),
    _row("c10k", "add", "berlin", 2, last_s=None, cpu=0.03),  # the member never served
    _row("c10k", "add", "prague", 2, last_s=0.2, cpu=0.013),
]


def test_each_consumers_cost_by_catalog_size() -> None:
    assert growth_lines(ROWS) == [
        {"consumer": "berlin", "points": [[1000, 6.4, 0.004], [10000, None, 0.03]]},
        {"consumer": "prague", "points": [[1000, 0.2, 0.002], [10000, 0.2, 0.013]]},
    ]
    assert growth_lines([r for r in ROWS if r["phase"] == "provision"]) == []


def test_it_is_drawn_on_log_axes_and_skips_what_was_never_served() -> None:
    series = {"lines": growth_lines(ROWS)}
    drawn = draw_catalog_growth(series, "fig-catalog-growth")
    served, cpu = drawn.axes
    assert [ax.get_xscale() for ax in (served, cpu)] == ["log", "log"]
    assert [ax.get_yscale() for ax in (served, cpu)] == ["log", "log"]
    # berlin's 10 k member was never served: one point on the time panel, two on the CPU's.
    assert [len(line.get_xdata()) for line in served.lines] == [1, 2]
    assert [len(line.get_xdata()) for line in cpu.lines] == [2, 2]
    figure = Figure("fig-catalog-growth", "t", "c", series, points=4)
    assert b"<svg" in render(figure, "svg")


def test_member_counts_read_as_people_say_them() -> None:
    assert [members_tick(v) for v in (100, 1000, 10000, 100000, 2_000_000)] == [
        "100",
        "1 k",
        "10 k",
        "100 k",
        "2 M",
    ]
