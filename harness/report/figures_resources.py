"""The resource figures: the servers' CPU time per transfer and peak memory per case, and
their TCP TIME_WAIT sockets over the run; what each plots (pure, ``Figure.series``) and how
it is drawn.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from harness.core.fmt import duration_unit, short_labels
from harness.report.data import SERVER_ROLES, ReportData
from harness.report.figures_common import (
    ROLE_COLOURS,
    ROLE_LINES,
    Figure,
    case_axes,
    new_figure,
    shared_note,
)

MAX_POINTS_PER_ROLE = 4000  # TIME_WAIT samples drawn per role; peaks are kept when thinning


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
            "(hatched) stacked on it." + shared_note(shared)
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
            "VmHWM)." + shared_note(shared)
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
            "ran, named above the plot; seconds since the first sample." + shared_note(shared)
        ),
        series={
            "unit": "sockets",
            "roles": {role: [list(p) for p in pts] for role, pts in roles.items()},
            "spans": [[short[case], first, last] for case, first, last in data.case_spans],
        },
        points=points,
        note=data.samples_note,
    )


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
    figure = new_figure(len(cases))
    ax = case_axes(figure, [c["label"] for c in cases])
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


def draw_cpu(series: dict[str, Any], fid: str) -> Any:
    totals = [sum(w for w, _ in _cpu_segments(c[r])) for c in series["cases"]
              for r in SERVER_ROLES if c.get(r)]  # fmt: skip
    scale, unit = duration_unit(totals)

    def segments(entry: dict[str, Any]) -> list[tuple[float, str]]:
        return [(width / scale, hatch) for width, hatch in _cpu_segments(entry)]

    return _role_bars(series, fid, segments, f"CPU time per transfer ({unit})")


def size_unit(values: list[float]) -> tuple[float, str]:
    """(scale, unit) in IEC units for an axis: the unit of the largest value."""
    top = max(values, default=0.0)
    for unit, scale in (("GiB", 1024.0**3), ("MiB", 1024.0**2), ("KiB", 1024.0)):
        if top >= scale:
            return scale, unit
    return 1.0, "B"


def draw_memory(series: dict[str, Any], fid: str) -> Any:
    peaks = [c[r] for c in series["cases"] for r in SERVER_ROLES if c.get(r)]
    scale, unit = size_unit(peaks)
    return _role_bars(
        series, fid, lambda peak: [(peak / scale, "")], f"peak resident memory ({unit})"
    )


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


def draw_time_wait(series: dict[str, Any], fid: str) -> Any:
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
