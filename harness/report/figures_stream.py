"""The change-stream figures: each serial's load time and slowest secondary over the run,
per site; and each secondary's lag in serials and seconds over the run. What each plots
(pure, ``Figure.series``; None for a run without a stream) and how it is drawn.
"""

from __future__ import annotations

from typing import Any

from harness.report.data import ReportData
from harness.report.figures_common import Figure, seconds_formatter, shared_note

LOAD_COLOUR = "#4c72b0"
SLOWEST_COLOUR = "#c44e52"
SLA_COLOUR = "#55a868"


def stream_load_figure(data: ReportData) -> Figure | None:
    if data.stream is None:
        return None
    shared, short = data.labels.shared, data.labels.short
    panels = []
    for item in data.stream.cases:
        for site in item.sites:
            loads = sorted(
                (x for x in item.loads if x.site == site and x.published_s is not None),
                key=lambda x: (x.repeat, x.published_s or 0.0),
            )
            panels.append(
                {
                    "label": short[item.case],
                    "case": item.case,
                    "site": site or "fleet",
                    "sla_s": item.sla_s,
                    "points": [
                        [x.repeat, x.serial, x.published_s, x.load_s, x.slowest_s, x.slowest_host]
                        for x in loads
                    ],
                }
            )
    points = sum(len(p["points"]) for p in panels)
    return Figure(
        id="fig-stream-load",
        title="Each serial's load time and slowest secondary",
        caption=(
            "Per stream case and site (the fleet first): for each serial, when it was put on "
            "the primary (since the stream's start, x) and how long after the primary served "
            "it 95 % of the secondaries (rounded up: RSSAC002's load time) and the slowest one "
            "served it (y); the green line is [stream] sla. A serial that never reached 95 % "
            "has no load point (harness/results/stream.py)." + shared_note(shared)
        ),
        series={"unit": "s", "panels": panels},
        points=points,
        note=None if points else "no serial was served",
        section="stream",
    )


def stream_lag_figure(data: ReportData) -> Figure | None:
    if data.stream is None:
        return None
    shared, short = data.labels.shared, data.labels.short
    cases = []
    for item in data.stream.cases:
        repeats = {repeat for repeat, _ in item.lag}
        lines = [
            {
                "host": host if len(repeats) == 1 else f"{host} (repeat {repeat})",
                "points": [list(point) for point in series],
            }
            for (repeat, host), series in sorted(item.lag.items())
        ]
        cases.append({"label": short[item.case], "case": item.case, "lines": lines})
    points = sum(len(line["points"]) for case in cases for line in case["lines"])
    return Figure(
        id="fig-stream-lag",
        title="How far behind each secondary was",
        caption=(
            "Per stream case and secondary, over the stream (seconds since its start): the "
            "serials put on the primary that it did not serve yet (top), and how long ago the "
            "oldest of them was put there (bottom), just before and after every publish and "
            "every first answer with a serial, from the records." + shared_note(shared)
        ),
        series={"unit": "s", "cases": cases},
        points=points,
        note=None if points else "no serial was published",
        section="stream",
    )


def draw_stream_load(series: dict[str, Any], fid: str) -> Any:
    from matplotlib.figure import Figure as MplFigure

    panels = series["panels"]
    columns = 2 if len(panels) > 1 else 1
    rows = -(-len(panels) // columns)
    figure = MplFigure(figsize=(9, 0.6 + 2.2 * rows), layout="constrained")
    axes = figure.subplots(rows, columns, squeeze=False)
    for index, panel in enumerate(panels):
        ax = axes[index // columns][index % columns]
        points = panel["points"]
        loads = [(p[2], p[3]) for p in points if p[3] is not None]
        slowest = [(p[2], p[4]) for p in points if p[4] is not None]
        if slowest:
            ax.plot(*zip(*slowest, strict=True), linestyle="--", color=SLOWEST_COLOUR,
                    linewidth=1, label="slowest", gid=f"{fid}-slowest-{index}")  # fmt: skip
        if loads:
            ax.plot(*zip(*loads, strict=True), marker="o", markersize=2.5, color=LOAD_COLOUR,
                    linewidth=1, label="95 % (load time)", gid=f"{fid}-load-{index}")  # fmt: skip
        if panel["sla_s"] is not None:
            ax.axhline(panel["sla_s"], color=SLA_COLOUR, linewidth=1, label="sla",
                       gid=f"{fid}-sla-{index}")  # fmt: skip
        ax.set_title(f"{panel['label']}: {panel['site']}", fontsize=8)
        ax.set_ylim(bottom=0)
        ax.set_xlim(left=0)
        ax.yaxis.set_major_formatter(seconds_formatter())
        ax.xaxis.set_major_formatter(seconds_formatter())
        ax.grid(alpha=0.3)
        ax.tick_params(labelsize=7)
        if index == 0:
            ax.legend(fontsize=7, loc="upper left")
    for index in range(len(panels), rows * columns):
        axes[index // columns][index % columns].set_visible(False)
    figure.supxlabel("put on the primary, since the stream's start", fontsize=9)
    figure.supylabel("from the primary serving it", fontsize=9)
    return figure


def draw_stream_lag(series: dict[str, Any], fid: str) -> Any:
    from matplotlib.figure import Figure as MplFigure
    from matplotlib.ticker import MaxNLocator

    cases = series["cases"]
    figure = MplFigure(figsize=(9, 0.6 + 3.2 * len(cases)), layout="constrained")
    axes = figure.subplots(2 * len(cases), 1, squeeze=False, sharex=True)
    for index, case in enumerate(cases):
        behind, seconds = axes[2 * index][0], axes[2 * index + 1][0]
        for number, line in enumerate(case["lines"]):
            xs = [p[0] for p in line["points"]]
            # Each instant is there twice, the lag just before and after it: lines, not steps.
            behind.plot(xs, [p[1] for p in line["points"]], linewidth=1, label=line["host"],
                        gid=f"{fid}-serials-{index}-{number}")  # fmt: skip
            seconds.plot(xs, [p[2] for p in line["points"]], linewidth=1,
                         gid=f"{fid}-seconds-{index}-{number}")  # fmt: skip
        behind.set_title(case["label"], fontsize=8)
        behind.set_ylabel("serials behind", fontsize=8)
        behind.yaxis.set_major_locator(MaxNLocator(integer=True))
        seconds.set_ylabel("seconds behind", fontsize=8)
        seconds.yaxis.set_major_formatter(seconds_formatter())
        for ax in (behind, seconds):
            ax.set_ylim(bottom=0)
            ax.grid(alpha=0.3)
            ax.tick_params(labelsize=7)
        if len(case["lines"]) <= 12:
            behind.legend(fontsize=6, loc="upper left", ncols=min(4, len(case["lines"])))
    axes[-1][0].xaxis.set_major_formatter(seconds_formatter())
    figure.supxlabel("since the stream's start", fontsize=9)
    return figure
