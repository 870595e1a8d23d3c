"""The catalog figure a planner needs: what a one-member change costs as the catalog grows
(a matrix over `catalog.members`), per consumer, on log axes: the time until the consumer
served the added member, and the consumer's CPU for that catalog version. What it plots
(pure, from summary.json's catalog rows: harness/results/catalog.py) and how it is drawn.
"""

from __future__ import annotations

from typing import Any

from harness.report.data import ReportData
from harness.report.figures_common import Figure, seconds_formatter

ADD_PHASE = "add"  # the first catalog version after provisioning: one member added


def catalog_sizes(rows: list[dict[str, Any]]) -> dict[str, int]:
    """case -> members its catalog named when provisioned (a provision row per consumer
    sums them over its repeats)."""
    sizes = {}
    for row in rows:
        if row["phase"] == "provision" and row["consumer"] and row["repeats"]:
            sizes[row["case"]] = row["members"] // row["repeats"]
    return sizes


def growth_lines(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per consumer: (catalog members, seconds until the added member was served or None,
    consumer CPU seconds or None) for each case that added a member, by size."""
    sizes = catalog_sizes(rows)
    by_consumer: dict[str, list[list[Any]]] = {}
    for row in rows:
        if row["phase"] != ADD_PHASE or not row["consumer"] or row["case"] not in sizes:
            continue
        point = [sizes[row["case"]], row["last_s"], row["consumer_cpu_s"]]
        by_consumer.setdefault(row["consumer"], []).append(point)
    return [
        {"consumer": consumer, "points": sorted(points, key=lambda p: p[0])}
        for consumer, points in sorted(by_consumer.items())
    ]


def catalog_growth_figure(data: ReportData) -> Figure | None:
    lines = growth_lines(data.catalog)
    if not lines:
        return None
    sizes = {p[0] for line in lines for p in line["points"]}
    points = sum(len(line["points"]) for line in lines)
    return Figure(
        id="fig-catalog-growth",
        title="What a one-member change costs as the catalog grows",
        caption=(
            "Per consumer, for each catalog size of the run (x, members, log scale): how long "
            "after the primary served the catalog version adding one member the consumer "
            "served that member (top), and the consumer's CPU for that version (bottom), both "
            "log scale; median over repeats for the CPU, the last served for the time "
            "(harness/results/catalog.py). A member never served has no point."
        ),
        series={"lines": lines},
        points=points,
        note=None
        if len(sizes) > 1
        else "one catalog size: a matrix over catalog.members draws the growth",
        section="details",
    )


def members_tick(value: float, _position: object = None) -> str:
    """1000 -> "1 k", 100000 -> "100 k", 2000000 -> "2 M"."""
    for scale, unit in ((1_000_000, " M"), (1000, " k")):
        if value >= scale:
            return f"{value / scale:g}{unit}"
    return f"{value:g}"


def draw_catalog_growth(series: dict[str, Any], fid: str) -> Any:
    from matplotlib.figure import Figure as MplFigure
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    figure = MplFigure(figsize=(9, 5.2), layout="constrained")
    served, cpu = figure.subplots(2, 1, sharex=True)
    for number, line in enumerate(series["lines"]):
        for ax, column, kind in ((served, 1, "served"), (cpu, 2, "cpu")):
            xy = [(p[0], p[column]) for p in line["points"] if p[column]]
            if xy:
                ax.plot(*zip(*xy, strict=True), marker="o", markersize=3, linewidth=1,
                        label=line["consumer"], gid=f"{fid}-{kind}-{number}")  # fmt: skip
    for ax, label in ((served, "added member served"), (cpu, "consumer CPU")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_ylabel(label, fontsize=8)
        # 1, 2 and 5 of each decade labelled in seconds: a narrow range still gets labels.
        ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(seconds_formatter())
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.xaxis.set_major_formatter(FuncFormatter(members_tick))
        ax.grid(alpha=0.3, which="both")
        ax.tick_params(labelsize=7)
    served.legend(fontsize=7, loc="upper left")
    figure.supxlabel("members in the catalog", fontsize=9)
    return figure
