"""The report's figures: what each one plots (pure, from ``ReportData``) and how it is drawn.

Each ``Figure`` carries its ``series``, the exact numbers the drawing uses: the drawing
functions read only ``series``, the HTML embeds it as JSON next to the plot, so a test (or a
reader who wants the numbers) checks what is plotted without parsing SVG. Drawing uses
matplotlib's object API (no pyplot state): SVG for the report, PNG through Agg on request.
"""

from __future__ import annotations

import html
import io
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.report import fmt
from harness.report.data import SERVER_ROLES, CaseRow, ReportData
from harness.report.fmt import short_labels
from harness.units import format_rate

ROLE_COLOURS = {"primary": "#1f77b4", "secondary": "#ff7f0e"}
# One colour per transport in every plot (and the HTML tables' headers).
TRANSPORT_COLOURS = {
    "tcp": "#4c72b0",
    "tcp-tsig": "#55a868",
    "xot": "#c44e52",
    "xot-tsig": "#8172b2",
}
# Phases: by the instant that ends them (harness/report/phases.py SEEN).
PHASE_COLOURS = {
    "NOTIFY": "#bdbdbd",
    "SOA query": "#9ecae1",
    "connect": "#4292c6",
    "transfer end (log)": "#fd8d3c",
    "served": "#74c476",
    "first zone": "#9ecae1",
    "median zone": "#4292c6",
    "95 % of zones": "#fd8d3c",
    "every zone": "#74c476",
}
ROLE_LINES = {"primary": "-", "secondary": "--"}
POINT_COLOUR = "#4c72b0"
BOUND_COLOUR = "#c0392b"
MAX_POINTS_PER_ROLE = 4000  # TIME_WAIT samples drawn per role; peaks are kept when thinning
MIB = 1024 * 1024


@dataclass
class Figure:
    id: str
    title: str
    caption: str
    series: dict[str, Any]
    points: int  # data points drawn (transfers, bars or samples)
    note: str | None = None  # shown instead of a plot when there is nothing to draw
    section: str = "details"  # where the page shows it: "answers", "fleet" or "details"

    @property
    def drawable(self) -> bool:
        return self.note is None and self.points > 0


def _why_empty(row: CaseRow) -> str | None:
    """The text drawn in place of a case's points when it has none."""
    if row.durations_s:
        return None if row.throughputs_bps else "no byte count"
    parts = [f"{row.unsupported} unsupported"] if row.unsupported else []
    parts += [f"{row.failed} failed"] if row.failed else []
    return "no verified transfer" + (f" ({', '.join(parts)})" if parts else "")


def _labels(data: ReportData) -> tuple[str, dict[str, str]]:
    """Short case labels for the plots' axes (the shared part goes to the caption)."""
    return short_labels([row.label for row in data.cases])


def _shared_note(shared: str) -> str:
    return f" Every case is {shared}; the labels show what * stands for." if shared else ""


def duration_figure(data: ReportData) -> Figure:
    shared, short = _labels(data)
    cases = [
        {
            "label": short[row.label],
            "case": row.label,
            "transport": row.transport,
            "points": row.durations_s,
            "median": row.median_s,
            "p10": row.p10_s,
            "p90": row.p90_s,
            "missing": None if row.durations_s else _why_empty(row),
        }
        for row in data.cases
    ]
    points = sum(len(c["points"]) for c in cases)
    return Figure(
        id="fig-duration",
        title="Transfer duration per case",
        caption=(
            "Duration of each verified transfer per case (dots, coloured by transport), "
            "median (black bar) and p10-p90 spread (line); seconds. Failed and unsupported "
            "transfers are not drawn." + _shared_note(shared)
        ),
        series={"unit": "s", "cases": cases},
        points=points,
        note=None if points else "no transfer counted (none was ok and verified)",
    )


def throughput_figure(data: ReportData) -> Figure:
    shared, short = _labels(data)
    cases = [
        {
            "label": short[row.label],
            "case": row.label,
            "transport": row.transport,
            "points": row.throughputs_bps,
            "median": row.throughput_bps,
            "bound": row.model_bound_bps,
            "limited_by": row.limited_by,
            "missing": _why_empty(row) if not row.throughputs_bps else None,
        }
        for row in data.cases
    ]
    bounded = any(c["bound"] is not None for c in cases)
    points = sum(len(c["points"]) for c in cases)
    caption = (
        "Throughput of each verified transfer (zone bytes x 8 / duration; dots) and its "
        "median (black bar)"
    )
    if bounded:
        caption += (
            " against the model bound of the case (red: the lowest of the rate, window and "
            "loss limits); bit/s"
        )
    else:
        caption += "; bit/s. No bound: unimpaired link"
    return Figure(
        id="fig-throughput",
        title="Throughput against the model bound",
        caption=caption + "." + _shared_note(shared),
        series={"unit": "bit/s", "bounded": bounded, "cases": cases},
        points=points,
        note=None if points else "no transfer with a byte count was counted",
    )


def cpu_figure(data: ReportData) -> Figure:
    cases = []
    bars = 0
    shared, short = short_labels([item.case for item in data.resources])
    for item in data.resources:
        entry: dict[str, Any] = {"label": short[item.case], "case": item.case}
        for role in SERVER_ROLES:
            figures = item.roles.get(role)
            if figures is None or figures.cpu_total_s_per_transfer is None:
                entry[role] = None
                continue
            entry[role] = {
                "user": figures.cpu_user_s_per_transfer,
                "system": figures.cpu_system_s_per_transfer,
                "total": figures.cpu_total_s_per_transfer,
            }
            bars += 1
        cases.append(entry)
    note = data.resources_note
    if note is None and not bars:
        note = "no CPU figure per transfer (no transfer-start/end samples)"
    return Figure(
        id="fig-cpu",
        title="CPU time per transfer",
        caption=(
            "Server CPU seconds per transfer (median over transfers of the CPU used between "
            "the transfer's start and end samples: see Resources for the window they cover), "
            "per server role: the median user time (solid) with the median system time "
            "(hatched) stacked on it; seconds." + _shared_note(shared)
        ),
        series={"unit": "s", "cases": cases},
        points=bars,
        note=note,
    )


def memory_figure(data: ReportData) -> Figure:
    cases = []
    bars = 0
    shared, short = short_labels([item.case for item in data.resources])
    for item in data.resources:
        entry: dict[str, Any] = {"label": short[item.case], "case": item.case}
        for role in SERVER_ROLES:
            figures = item.roles.get(role)
            value = figures.peak_rss_bytes if figures is not None else None
            entry[role] = value
            bars += value is not None
        cases.append(entry)
    note = data.resources_note
    if note is None and not bars:
        note = "no memory sample"
    return Figure(
        id="fig-memory",
        title="Peak resident memory",
        caption=(
            "Peak resident memory of each server role during the case (cgroup anon/RSS or "
            "VmHWM); MiB." + _shared_note(shared)
        ),
        series={"unit": "bytes", "cases": cases},
        points=bars,
        note=note,
    )


def thin(points: list[tuple[float, int]], limit: int) -> list[tuple[float, int]]:
    """At most ``limit`` points: the largest of each run of consecutive samples, so the
    peaks the operator looks for survive."""
    if len(points) <= limit:
        return list(points)
    size = -(-len(points) // limit)  # ceiling
    return [max(points[i : i + size], key=lambda p: p[1]) for i in range(0, len(points), size)]


def time_wait_figure(data: ReportData) -> Figure:
    roles = {role: thin(pts, MAX_POINTS_PER_ROLE) for role, pts in data.time_wait.items()}
    points = sum(len(pts) for pts in roles.values())
    shared, short = short_labels([case for case, _, _ in data.case_spans])
    return Figure(
        id="fig-timewait",
        title="TCP TIME_WAIT sockets over time",
        caption=(
            "TCP sockets in TIME_WAIT in each server's network namespace (/proc/<pid>/net/"
            "sockstat) over the run, per role; the bands are the cases in the order they "
            "ran, named above the plot; seconds since the first sample." + _shared_note(shared)
        ),
        series={
            "unit": "sockets",
            "roles": {role: [list(p) for p in pts] for role, pts in roles.items()},
            "spans": [[short[case], first, last] for case, first, last in data.case_spans],
        },
        points=points,
        note=data.samples_note,
    )


def phases_figure(data: ReportData) -> Figure:
    shared, short = short_labels([item.label for item in data.phases])
    cases = [
        {
            "label": short[item.label],
            "case": item.case,
            "site": item.site,
            "repeat": item.repeat,
            "origin": item.origin,
            "segments": [
                {
                    "name": seg.name,
                    "end": seg.name.rsplit(" -> ", 1)[-1],
                    "start": seg.start_s,
                    "seconds": seg.seconds,
                }
                for seg in item.segments
            ],
            "markers": item.markers,
            "notify_at": item.offset_s,
            "logged_secondary": item.logged_secondary_s,
        }
        for item in data.phases
    ]
    bars = sum(len(c["segments"]) for c in cases)
    return Figure(
        id="fig-phases",
        title="Where the time went",
        caption=(
            "Per case, the transfer with the median duration, its phases end to end on one "
            "time axis: from the reload command (notify trigger; the control command with "
            "retransfer, the secondary's start with cold start) to the NOTIFY leaving the "
            "primary, the secondary's SOA query and its connect (both seen on the primary's "
            "wire), the end of the transfer by the secondary's own log (connect + its "
            "logged duration), and the first SOA poll that answers the new serial. The "
            "diamond marks when the primary first served the new version; seconds."
            + _shared_note(shared)
        ),
        series={"unit": "s", "cases": cases},
        points=bars,
        note=None if bars else "no verified server-to-server transfer",
        section="answers",
    )


def convergence_figure(data: ReportData) -> Figure | None:
    if data.fleet is None:
        return None
    shared, short = short_labels([item.case for item in data.fleet.cases])
    cases = [
        {
            "label": short[item.case],
            "case": item.case,
            "secondaries": item.secondaries,
            "repeats": [
                {"repeat": repeat, "steps": [list(step) for step in steps]}
                for repeat, steps in item.convergence()
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
            "counted from the repeat's first NOTIFY (harness/results/fleet.py); seconds."
            + _shared_note(shared)
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


def build_figures(data: ReportData) -> list[Figure]:
    figures = [
        phases_figure(data),
        convergence_figure(data),
        fleet_cost_figure(data),
        duration_figure(data),
        throughput_figure(data),
        cpu_figure(data),
        memory_figure(data),
        time_wait_figure(data),
    ]
    return [figure for figure in figures if figure is not None]


# --- drawing: reads only Figure.series -------------------------------------------------
# Drawn elements carry SVG ids "<figure id>-<what>-<case index>" (points, median, spread,
# bound, bar-<role>, line-<role>), so a test can count what was drawn in the SVG itself.


def _rate_scale(values: list[float]) -> tuple[float, str]:
    top = max(values, default=0.0)
    for scale, unit in ((1e9, "Gbit/s"), (1e6, "Mbit/s"), (1e3, "kbit/s")):
        if top >= scale:
            return scale, unit
    return 1.0, "bit/s"


def _new_figure(rows: int, per_row: float = 0.42) -> Any:
    from matplotlib.figure import Figure as MplFigure

    return MplFigure(figsize=(9, max(2.4, per_row * rows + 1.3)), layout="constrained")


def _case_axes(mpl_figure: Any, labels: list[str]) -> Any:
    ax = mpl_figure.add_subplot()
    ax.set_ylim(len(labels) - 0.5, -0.5)  # first case on top
    ax.set_yticks(range(len(labels)), labels)
    ax.grid(axis="x", alpha=0.3)
    return ax


def _offsets(count: int) -> list[float]:
    """Small fixed vertical offsets so equal points of one case do not hide each other."""
    return [((i % 5) - 2) * 0.07 for i in range(count)]


def _draw_cases(ax: Any, fid: str, cases: list[dict[str, Any]], scale: float) -> None:
    """Per case: its points, p10-p90 line, median and (when given) bound."""
    from matplotlib.transforms import blended_transform_factory

    label_at = blended_transform_factory(ax.transAxes, ax.transData)
    for y, case in enumerate(cases):
        points = [p / scale for p in case["points"]]
        if not points:
            text = case.get("missing") or "no verified transfer"
            ax.text(0.01, y, text, transform=label_at, va="center", fontsize=8, color="grey")
            continue
        ax.scatter(
            points,
            [y + dy for dy in _offsets(len(points))],
            s=14,
            color=TRANSPORT_COLOURS.get(case.get("transport") or "", POINT_COLOUR),
            alpha=0.7,
            zorder=3,
            gid=f"{fid}-points-{y}",
        )
        if case.get("p10") is not None and case.get("p90") is not None:
            ax.plot(
                [case["p10"] / scale, case["p90"] / scale],
                [y, y],
                color="black",
                lw=1,
                gid=f"{fid}-spread-{y}",
            )
        for key, size, width, colour in (
            ("median", 14, 2, "black"),
            ("bound", 16, 2.5, BOUND_COLOUR),
        ):
            if case.get(key) is not None:
                ax.plot(
                    [case[key] / scale],
                    [y],
                    marker="|",
                    ms=size,
                    mew=width,
                    color=colour,
                    gid=f"{fid}-{key}-{y}",
                )


def seconds_tick(value: float) -> str:
    """A time axis tick a reader takes in at once: 50 µs, 2 ms, 0.5 s, 30 s."""
    if value <= 0:
        return "0"
    if value < 1e-3:
        return f"{value * 1e6:.3g} µs"
    if value < 1:
        return f"{value * 1e3:.3g} ms"
    return f"{value:.3g} s"


def rate_tick(value: float) -> str:
    return "0" if value <= 0 else format_rate(value)


def log_scale(values: list[float]) -> bool:
    """Logarithmic when the values span more than two decades (a cold start next to a
    small IXFR, a tiny zone's throughput next to the link's bound)."""
    return bool(values) and min(values) > 0 and max(values) / min(values) > 100


def _log_axis(axis: Any, values: list[float], tick: Callable[[float], str]) -> None:
    """Log ticks labelled in units (not 1e-05), at 1-2-5 steps while that stays readable."""
    import math

    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    decades = math.log10(max(values) / min(values))
    subs = (1.0, 2.0, 5.0) if decades <= 3 else (1.0,)
    axis.set_major_locator(LogLocator(base=10, subs=subs))
    axis.set_major_formatter(FuncFormatter(lambda v, _: tick(v)))
    axis.set_minor_formatter(NullFormatter())


def _transport_legend(figure: Any, cases: list[dict[str, Any]], extra: list[Any]) -> None:
    from matplotlib.lines import Line2D

    used = [t for t in TRANSPORT_COLOURS if any(c.get("transport") == t for c in cases)]
    handles = [
        Line2D([], [], ls="", marker="o", color=TRANSPORT_COLOURS[t], label=t) for t in used
    ] + extra
    if handles:
        figure.legend(handles=handles, loc="outside upper right", ncols=len(handles), fontsize=8)


def _draw_duration(series: dict[str, Any], fid: str) -> Any:
    from matplotlib.lines import Line2D

    cases = series["cases"]
    figure = _new_figure(len(cases))
    ax = _case_axes(figure, [c["label"] for c in cases])
    _draw_cases(ax, fid, cases, 1.0)
    values = [p for c in cases for p in c["points"]]
    if log_scale(values):
        ax.set_xscale("log")
        _log_axis(ax.xaxis, values, seconds_tick)
        ax.set_xlabel("transfer duration (log scale)")
    else:
        ax.set_xlim(left=0)
        ax.set_xlabel("transfer duration (s)")
    median = Line2D([], [], ls="", marker="|", ms=12, mew=2, color="black", label="median")
    _transport_legend(figure, cases, [median])
    return figure


def _draw_throughput(series: dict[str, Any], fid: str) -> Any:
    from matplotlib.lines import Line2D

    cases = series["cases"]
    values = [p for c in cases for p in c["points"]]
    values += [c["bound"] for c in cases if c["bound"] is not None]
    log = log_scale(values)
    scale, unit = (1.0, "") if log else _rate_scale(values)
    figure = _new_figure(len(cases))
    ax = _case_axes(figure, [c["label"] for c in cases])
    _draw_cases(ax, fid, cases, scale)
    if log:
        ax.set_xscale("log")
        _log_axis(ax.xaxis, values, rate_tick)
        ax.set_xlabel("throughput (log scale)")
    else:
        ax.set_xlim(left=0)
        ax.set_xlabel(f"throughput ({unit})")
    handles = [Line2D([], [], ls="", marker="|", ms=12, mew=2, color="black", label="median")]
    if series["bounded"]:
        handles.append(
            Line2D([], [], ls="", marker="|", ms=12, mew=2.5, color=BOUND_COLOUR, label="bound")
        )
    else:
        ax.set_title("no bound: unimpaired link", fontsize=9, loc="right", color="grey")
    _transport_legend(figure, cases, handles)
    return figure


def _role_bars(
    series: dict[str, Any],
    fid: str,
    segments: Callable[[Any], list[tuple[float, str]]],
    xlabel: str,
) -> Any:
    """Two bars per case (primary above secondary); ``segments`` gives the stacked parts
    (value, hatch) of one role's entry."""
    from matplotlib.patches import Patch

    cases = series["cases"]
    figure = _new_figure(len(cases))
    ax = _case_axes(figure, [c["label"] for c in cases])
    height = 0.38
    right = 0.0
    for y, case in enumerate(cases):
        for offset, role in ((-height / 2, "primary"), (height / 2, "secondary")):
            entry = case.get(role)
            if entry is None:
                continue
            left = 0.0
            for part, (width, hatch) in enumerate(segments(entry)):
                ax.barh(
                    y + offset,
                    width,
                    height=height,
                    left=left,
                    color=ROLE_COLOURS[role],
                    hatch=hatch or None,
                    edgecolor="white" if hatch else ROLE_COLOURS[role],
                    alpha=0.6 if hatch else 0.9,
                    gid=f"{fid}-bar-{role}-{y}-{part}",
                )
                left += width
            right = max(right, left)
    ax.set_xlim(0, right * 1.08 or 1.0)
    ax.set_xlabel(xlabel)
    figure.legend(
        handles=[Patch(color=ROLE_COLOURS[r], label=r) for r in SERVER_ROLES],
        loc="outside upper right",
        ncols=2,
        fontsize=8,
    )
    return figure


def _cpu_segments(entry: dict[str, Any]) -> list[tuple[float, str]]:
    if entry.get("user") is not None and entry.get("system") is not None:
        return [(entry["user"], ""), (entry["system"], "///")]
    return [(entry["total"], "")]


def _draw_cpu(series: dict[str, Any], fid: str) -> Any:
    return _role_bars(series, fid, _cpu_segments, "CPU time per transfer (s)")


def _draw_memory(series: dict[str, Any], fid: str) -> Any:
    return _role_bars(series, fid, lambda peak: [(peak / MIB, "")], "peak resident memory (MiB)")


def split_by_span(points: list[list[float]], spans: list[list[Any]]) -> list[list[list[float]]]:
    """Consecutive runs of points that fall in one case span (points outside every span
    stay with their neighbours)."""
    runs: list[list[list[float]]] = []
    current_span: int | None = None
    for point in points:
        span = next((i for i, (_, a, b) in enumerate(spans) if a <= point[0] <= b), None)
        if not runs or (span is not None and span != current_span):
            runs.append([])
            current_span = span if span is not None else current_span
        runs[-1].append(point)
    return runs


def _draw_time_wait(series: dict[str, Any], fid: str) -> Any:
    from matplotlib.figure import Figure as MplFigure
    from matplotlib.ticker import MaxNLocator

    spans = series["spans"]
    # Room above for the upright case names, so that the plot keeps its own height.
    longest = max((len(case) for case, _, _ in spans), default=0)
    figure = MplFigure(figsize=(9, 3.0 + min(longest, 60) * 0.055), layout="constrained")
    ax = figure.add_subplot()
    for index, (_, first, last) in enumerate(spans):
        if index % 2 == 0:
            ax.axvspan(first, last, color="grey", alpha=0.12, lw=0)
    if spans:
        # The cases' names as the ticks of a top axis, upright at their bands' middles:
        # the layout makes room for them, however many there are.
        top = ax.secondary_xaxis("top")
        top.set_xticks(
            [(first + last) / 2 for _, first, last in spans],
            [case for case, _, _ in spans],
            rotation=90,
            fontsize=7 if len(spans) <= 24 else 5,
        )
        top.tick_params(length=0)
    for role in SERVER_ROLES:
        # One line per case: the servers of the next case are new processes in new
        # namespaces, and a line across the gap would invent values.
        for index, points in enumerate(split_by_span(series["roles"].get(role, []), spans)):
            ax.step(
                [p[0] for p in points],
                [p[1] for p in points],
                where="post",
                color=ROLE_COLOURS[role],
                linestyle=ROLE_LINES[role],  # equal counts of both roles stay visible
                label=role if index == 0 else None,
                gid=f"{fid}-line-{role}-{index}",
            )
    ax.set_ylim(bottom=0)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("time since the first sample (s)")
    ax.set_ylabel("TIME_WAIT sockets")
    ax.grid(alpha=0.3)
    figure.legend(loc="outside upper right", ncols=2, fontsize=8)
    return figure


def _draw_phases(series: dict[str, Any], fid: str) -> Any:
    """Stacked segments per case on seconds, or on shares of each bar when the cases' totals
    are too far apart for one axis (the totals are then written beside the bars)."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    cases = series["cases"]
    figure = _new_figure(len(cases), per_row=0.3)  # stacked bars need less room than dots
    ax = _case_axes(figure, [c["label"] for c in cases])
    totals = [sum(seg["seconds"] for seg in c["segments"]) or 1e-9 for c in cases]
    share = max(totals) / min(totals) > 20
    ends: list[str] = []
    for y, (case, total) in enumerate(zip(cases, totals, strict=True)):
        unit = total if share else 1.0
        for part, seg in enumerate(case["segments"]):
            ends += [seg["end"]] if seg["end"] not in ends else []
            ax.barh(
                y,
                seg["seconds"] / unit,
                left=seg["start"] / unit,
                height=0.6,
                color=PHASE_COLOURS.get(seg["end"], "#cccccc"),
                edgecolor="white",
                linewidth=0.5,
                gid=f"{fid}-bar-{y}-{part}",
            )
        for at in case["markers"].values():
            ax.plot([at / unit], [y], marker="D", ms=5, color="black", gid=f"{fid}-marker-{y}")
        if share:
            ax.text(1.01, y, seconds_tick(total), va="center", fontsize=7)
    if share:
        ax.set_xlim(0, 1.12)
        ax.set_xlabel("share of each transfer's time, from its time 0 (total at the right)")
    else:
        ax.set_xlim(left=0)
        ax.set_xlabel("seconds from the reload (or control) command")
    handles: list[Any] = [
        Patch(color=PHASE_COLOURS.get(e, "#cccccc"), label=f"-> {e}") for e in ends
    ]
    if any(c["markers"] for c in cases):
        handles.append(
            Line2D([], [], ls="", marker="D", ms=5, color="black", label="primary serves it")
        )
    figure.legend(
        handles=handles, loc="outside upper right", ncols=min(len(handles), 6), fontsize=8
    )
    return figure


def _draw_convergence(series: dict[str, Any], fid: str) -> Any:
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
            ax.step(xs, ys, where="post", label=f"repeat {repeat['repeat']}",
                    gid=f"{fid}-line-{index}-{repeat['repeat']}")  # fmt: skip
        ax.set_title(f"{case['label']} ({case['secondaries']} secondaries)", fontsize=8)
        ax.set_ylim(0, 1.05)
        ax.set_xlim(left=0)
        ax.yaxis.set_major_formatter(PercentFormatter(1.0))
        ax.xaxis.set_major_formatter(_seconds_formatter())
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


def _seconds_formatter() -> Any:
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(lambda v, _: seconds_tick(v))


def _draw_fleet_cost(series: dict[str, Any], fid: str) -> Any:
    from matplotlib.figure import Figure as MplFigure
    from matplotlib.ticker import FuncFormatter, MaxNLocator, NullLocator

    figure = MplFigure(figsize=(9, 3.0), layout="constrained")
    axes = figure.subplots(1, 3)
    panels = (
        ("cpu_s", "primary CPU per repeat", _seconds_formatter()),
        ("tx_bytes", "bytes sent per repeat", FuncFormatter(lambda v, _: _bytes_tick(v))),
        ("peak_connections", "peak TCP connections", None),
    )
    sizes = [p["secondaries"] for g in series["cases"] for p in g["points"]]
    for ax, (key, title, formatter) in zip(axes, panels, strict=True):
        for index, group in enumerate(series["cases"]):
            points = [p for p in group["points"] if p[key] is not None]
            ax.plot([p["secondaries"] for p in points], [p[key] for p in points],
                    marker="o", label=group["label"], gid=f"{fid}-line-{key}-{index}")  # fmt: skip
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
        figure.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center",
                      ncols=min(len(series["cases"]), 3), fontsize=7)  # fmt: skip
    return figure


def _bytes_tick(value: float) -> str:
    return "0" if value <= 0 else fmt.size(value)


_DRAW: dict[str, Callable[[dict[str, Any], str], Any]] = {
    "fig-phases": _draw_phases,
    "fig-convergence": _draw_convergence,
    "fig-fleet-cost": _draw_fleet_cost,
    "fig-duration": _draw_duration,
    "fig-throughput": _draw_throughput,
    "fig-cpu": _draw_cpu,
    "fig-memory": _draw_memory,
    "fig-timewait": _draw_time_wait,
}

_SVG_PROLOGUE = re.compile(r"\A.*?(?=<svg\b)", re.S)
_SVG_METADATA = re.compile(r"<metadata>.*?</metadata>\s*", re.S)


def render(figure: Figure, fmt: str = "svg") -> bytes:
    """The figure drawn as SVG or PNG (Agg). Deterministic: no date, ids salted by the
    figure's id so several inline SVGs in one page never share an element id."""
    import matplotlib

    mpl_figure = _DRAW[figure.id](figure.series, figure.id)
    buffer = io.BytesIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": figure.id}):
        metadata = {"Date": None} if fmt == "svg" else {"Software": None}
        mpl_figure.savefig(buffer, format=fmt, metadata=metadata, dpi=110)
    return buffer.getvalue()


_SVG_ID = re.compile(r'\bid="([^"]+)"')


def prefix_ids(svg: str, prefix: str) -> str:
    """Make matplotlib's generic ids (figure_1, axes_1...) unique within a page holding
    several SVGs, references (url(#...), href="#...") included."""
    ids = {i for i in _SVG_ID.findall(svg) if not i.startswith(prefix + "-")}
    if not ids:
        return svg
    names = "|".join(re.escape(i) for i in sorted(ids, key=len, reverse=True))
    pattern = re.compile(rf'(\bid="|url\(#|href="#)({names})(?=[")])')
    return pattern.sub(lambda m: f"{m.group(1)}{prefix}-{m.group(2)}", svg)


def render_svg(figure: Figure) -> str:
    """Inline SVG for an HTML page: no XML prologue, DOCTYPE or RDF metadata (which carry
    external URLs); the figure's title becomes the SVG's accessible name."""
    svg = render(figure, "svg").decode("utf-8")
    svg = _SVG_METADATA.sub("", _SVG_PROLOGUE.sub("", svg, count=1), count=1)
    svg = prefix_ids(svg, figure.id)
    label = html.escape(figure.title, quote=True)
    return svg.replace("<svg ", f'<svg role="img" aria-label="{label}" ', 1)


def write_png(figure: Figure, path: Path) -> Path:
    Path(path).write_bytes(render(figure, "png"))
    return Path(path)
