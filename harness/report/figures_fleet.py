"""The fleet figures: how a fleet's secondaries converged on the new serial, and the
primary's cost as the fleet grows; what each plots (pure, ``Figure.series``; None for a run
without a fleet) and how it is drawn.
"""

from __future__ import annotations

from typing import Any

from harness.core import fmt
from harness.report.data import ReportData
from harness.report.figures_common import Figure, seconds_formatter, shared_note


def convergence_figure(data: ReportData) -> Figure | None:
    if data.fleet is None:
        return None
    shared, short = data.labels.shared, data.labels.short
    cases = [
        {
            "label": short[item.case],
            "case": item.case,
            "secondaries": item.secondaries,
            "repeats": [
                {
                    "repeat": repeat.repeat,
                    "steps": [list(step) for step in steps],
                    "served_of": repeat.served_of,
                    "converged": repeat.converged,
                }
                for repeat, (_, steps) in zip(item.repeats, item.convergence(), strict=True)
            ],
        }
        for item in data.fleet.cases
    ]
    points = sum(len(r["steps"]) for c in cases for r in c["repeats"])
    return Figure(
        id="fig-convergence",
        title="How the fleet converged",
        caption=(
            "Per fleet case and repeat, the fraction of its secondaries serving the new serial "
            "over time: each step is one secondary's first answer with it (harness SOA polls), "
            "counted from the repeat's first NOTIFY to any secondary (harness/results/fleet.py); "
            "seconds. A repeat whose line stops short of 100 % did not converge: its legend "
            "says how many of the fleet served, the fleet table who is missing and why."
            + shared_note(shared)
        ),
        series={"unit": "s", "cases": cases},
        points=points,
        note=None if points else "no secondary served a new serial",
        section="fleet",
    )


def fleet_cost_figure(data: ReportData) -> Figure | None:
    if data.fleet is None or not data.fleet.growth:
        return None
    groups = [
        {
            "label": growth.group,
            "points": [
                {
                    "secondaries": point.secondaries,
                    "cpu_s": point.cpu_s,
                    "peak_connections": point.peak_connections,
                    "tx_bytes": point.tx_bytes,
                    "median_last_s": point.median_last_s,
                }
                for point in growth.points
            ],
        }
        for growth in data.fleet.growth
    ]
    points = sum(len(g["points"]) for g in groups)
    return Figure(
        id="fig-fleet-cost",
        title="The primary's cost as the fleet grows",
        caption=(
            "Per group of cases that differ only in fleet size: the primary's CPU seconds per "
            "repeat (its cgroup, from the repeat's start mark to its end mark), the bytes it "
            "sent per repeat, and the most TCP connections it held at once (from its periodic "
            "samples: 0 when no sample fell inside a transfer), against the number of "
            "secondaries; medians over the repeats (connections: the highest)."
        ),
        series={"cases": groups},
        points=points,
        section="fleet",
    )


def draw_convergence(series: dict[str, Any], fid: str) -> Any:
    from matplotlib.figure import Figure as MplFigure
    from matplotlib.ticker import PercentFormatter

    cases = series["cases"]
    columns = 2 if len(cases) > 1 else 1
    rows = -(-len(cases) // columns)
    figure = MplFigure(figsize=(9, 0.4 + 2.0 * rows), layout="constrained")
    axes = figure.subplots(rows, columns, squeeze=False)
    for index, case in enumerate(cases):
        ax = axes[index // columns][index % columns]
        for repeat in case["repeats"]:
            steps = repeat["steps"]
            if not steps:
                continue
            xs = [0.0] + [t for t, _ in steps]
            ys = [0.0] + [f for _, f in steps]
            ax.step(
                xs,
                ys,
                where="post",
                label=f"repeat {repeat['repeat']}"
                + ("" if repeat.get("converged", True) else f" ({repeat['served_of']})"),
                gid=f"{fid}-line-{index}-{repeat['repeat']}",
            )
        ax.set_title(f"{case['label']} ({case['secondaries']} secondaries)", fontsize=8)
        ax.set_ylim(0, 1.05)
        ax.set_xlim(left=0)
        ax.yaxis.set_major_formatter(PercentFormatter(1.0))
        ax.xaxis.set_major_formatter(seconds_formatter())
        ax.grid(alpha=0.3)
        ax.tick_params(labelsize=7)
        if index % columns == 0:
            ax.set_ylabel("serving it", fontsize=8)
        if index == 0:
            ax.legend(fontsize=7, loc="lower right")
    for index in range(len(cases), rows * columns):
        axes[index // columns][index % columns].set_visible(False)
    figure.supxlabel("time since the repeat's first NOTIFY", fontsize=9)
    return figure


def draw_fleet_cost(series: dict[str, Any], fid: str) -> Any:
    from matplotlib.figure import Figure as MplFigure
    from matplotlib.ticker import FuncFormatter, MaxNLocator, NullLocator

    figure = MplFigure(figsize=(9, 3.0), layout="constrained")
    axes = figure.subplots(1, 3)
    panels = (
        ("cpu_s", "primary CPU per repeat", seconds_formatter()),
        ("tx_bytes", "bytes sent per repeat", FuncFormatter(lambda v, _: _bytes_tick(v))),
        ("peak_connections", "peak TCP connections", None),
    )
    sizes = [p["secondaries"] for g in series["cases"] for p in g["points"]]
    for ax, (key, title, formatter) in zip(axes, panels, strict=True):
        for index, group in enumerate(series["cases"]):
            points = [p for p in group["points"] if p[key] is not None]
            ax.plot(
                [p["secondaries"] for p in points],
                [p[key] for p in points],
                marker="o",
                label=group["label"],
                gid=f"{fid}-line-{key}-{index}",
            )
        ax.set_title(title, fontsize=9)
        if sizes and max(sizes) / max(min(sizes), 1) >= 8:
            ax.set_xscale("log", base=2)
        ax.set_xticks(sorted(set(sizes)), [str(n) for n in sorted(set(sizes))])
        ax.xaxis.set_minor_locator(NullLocator())
        values = [p[key] for g in series["cases"] for p in g["points"] if p[key] is not None]
        ax.set_ylim(0, max(values, default=0) * 1.1 or 1)  # a flat zero stays readable
        if formatter is not None:
            ax.yaxis.set_major_formatter(formatter)
        else:
            ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        ax.tick_params(labelsize=7)
    figure.supxlabel("secondaries in the fleet", fontsize=9)
    if len(series["cases"]) > 1:
        figure.legend(
            *axes[0].get_legend_handles_labels(),
            loc="outside lower center",
            ncols=min(len(series["cases"]), 3),
            fontsize=7,
        )
    return figure


def _bytes_tick(value: float) -> str:
    return "0" if value <= 0 else fmt.size(value)
