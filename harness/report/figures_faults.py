"""The faults figure: per faulted repeat, the bytes each secondary's link carried towards it
over time, the fault's window shaded, the failure lines the servers wrote marked, and the
instant each secondary served the new serial; what it plots (pure, ``Figure.series``; None
for a run without faults) and how it is drawn.
"""

from __future__ import annotations

from typing import Any

from harness.core import fmt
from harness.report.data import ReportData
from harness.report.faultview import series as case_series
from harness.report.figures_common import Figure, seconds_formatter, shared_note

MAX_PANELS = 48  # more faulted repeats than this: the first ones, and a note
FAULT_SHADE = "#f4c7c3"
MARK_COLOUR = "#a11"


def faults_figure(data: ReportData) -> Figure | None:
    if data.faults is None or not data.faults.cases:
        return None
    cases = data.faults.cases
    shared, short = data.labels.shared, data.labels.short
    panels = [
        case_series(case) | {"label": f"{short[case.case]} #{case.repeat}"}
        for case in cases[:MAX_PANELS]
    ]
    points = sum(len(h["timeline"]) for p in panels for h in p["hosts"])
    more = len(cases) - len(panels)
    return Figure(
        id="fig-faults",
        title="Faults: what each secondary received, and when it served the serial",
        caption=(
            "Per faulted repeat, the bytes each secondary's link carried towards it (linkem's "
            "passed_bytes, IP bytes of every connection, read every 0.2 s) against the seconds "
            "since the trigger; the fault's window shaded (a line for a one-event fault), its "
            "failure lines in its own log marked x, and a dot where it first served the new "
            "serial (none: stuck)."
            + shared_note(shared)
            + (f" The first {len(panels)} of {len(cases)} faulted repeats." if more else "")
        ),
        series={"cases": panels},
        points=points,
        note=None if points else "no byte counts were recorded",
        section="faults",
    )


def _bytes_at(timeline: list[list[float]], at: float) -> float:
    """The bytes carried by `at` (the last reading at or before it)."""
    value = 0.0
    for t, carried in timeline:
        if t > at:
            break
        value = carried
    return value


def draw_faults(series: dict[str, Any], fid: str) -> Any:
    from matplotlib.figure import Figure as MplFigure
    from matplotlib.ticker import FuncFormatter

    cases = series["cases"]
    columns = 2 if len(cases) > 1 else 1
    rows = -(-len(cases) // columns)
    figure = MplFigure(figsize=(9, 0.5 + 2.1 * rows), layout="constrained")
    axes = figure.subplots(rows, columns, squeeze=False)
    for index, case in enumerate(cases):
        ax = axes[index // columns][index % columns]
        began, ended = case["window"]
        if began is not None:
            if ended is not None and ended > began:
                ax.axvspan(began, ended, color=FAULT_SHADE, gid=f"{fid}-window-{index}")
            else:
                ax.axvline(began, color=FAULT_SHADE, lw=3, gid=f"{fid}-window-{index}")
        for number, host in enumerate(case["hosts"]):
            line = host["timeline"]
            if not line:
                continue
            (drawn,) = ax.step(
                [t for t, _ in line],
                [b for _, b in line],
                where="post",
                lw=1.2,
                label=f"{host['host']} ({host['kind']})"
                + (" stuck" if host["outcome"] in ("stuck", "freed") else ""),
                gid=f"{fid}-line-{index}-{number}",
            )
            marks = host["marks"]
            if marks:
                ax.plot(
                    [t for t, _ in marks],
                    [_bytes_at(line, t) for t, _ in marks],
                    "x",
                    color=MARK_COLOUR,
                    ms=5,
                    gid=f"{fid}-marks-{index}-{number}",
                )
            if host["served_s"] is not None:
                ax.plot(
                    [host["served_s"]],
                    [_bytes_at(line, host["served_s"])],
                    "o",
                    color=drawn.get_color(),
                    ms=5,
                    gid=f"{fid}-served-{index}-{number}",
                )
        ax.set_title(case["label"], fontsize=8)
        ax.set_xlim(left=min(0.0, *(t for h in case["hosts"] for t, _ in h["timeline"][:1])))
        ax.set_ylim(bottom=0)
        ax.xaxis.set_major_formatter(seconds_formatter())
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: _bytes_tick(v)))
        ax.grid(alpha=0.3)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=6, loc="upper left")
    for index in range(len(cases), rows * columns):
        axes[index // columns][index % columns].set_visible(False)
    figure.supxlabel("time since the trigger", fontsize=9)
    figure.supylabel("bytes towards the secondary", fontsize=9)
    return figure


def _bytes_tick(value: float) -> str:
    return "0" if value <= 0 else fmt.size(value)
