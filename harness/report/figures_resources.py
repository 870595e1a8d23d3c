"""The resource figures: the servers' CPU time per transfer and anonymous memory peak per
case, and their TCP TIME_WAIT sockets over the run; what each plots (pure,
``Figure.series``) and how it is drawn.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from harness.core.fmt import duration_unit
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
    shared, short = data.labels.shared, data.labels.short
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
    shared, short = data.labels.shared, data.labels.short
    for item in data.resources:
        entry: dict[str, Any] = {"label": short[item.case], "case": item.case}
        for role in SERVER_ROLES:
            figures = item.roles.get(role)
            value = figures.anon_peak_bytes if figures is not None else None
            entry[role] = value
            bars += value is not None
        cases.append(entry)
    note = data.resources_note
    if note is None and not bars:
        note = "no memory sample"
    return Figure(
        id="fig-memory",
        title="Peak anonymous memory",
        caption=(
            "The highest anonymous memory of each server role sampled during the case "
            "(cgroup v2 anon, v1 rss, or RssAnon over the process tree: the server's own "
            "heap, not the files it read). The memory charged to the server including "
            "page cache, since it started, is in Resources." + shared_note(shared)
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
    shared, short = data.labels.shared, data.labels.short
    spans = []
    for case, first, last in data.case_spans:
        ports, reuse = data.port_ranges.get(case, (None, False))
        spans.append([short[case], first, last, ports, reuse])
    return Figure(
        id="fig-timewait",
        title="TCP TIME_WAIT sockets over time",
        caption=(
            "TCP sockets in TIME_WAIT in each server's network namespace (/proc/<pid>/net/"
            "sockstat) over the run, per role; the numbered bands are the cases in the order "
            "they ran (the legend below names them); the red dashes are the secondary's "
            "ephemeral port range, the most TIME_WAIT sockets its connections to one primary "
            "can leave before connect() fails (unless tcp_tw_reuse = 1 lets it reuse them), "
            "written at the top when it is far above the plot; seconds since the first "
            "sample." + shared_note(shared)
        ),
        series={
            "unit": "sockets",
            "roles": {role: [list(p) for p in pts] for role, pts in roles.items()},
            "spans": spans,
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
        series, fid, lambda peak: [(peak / scale, "")], f"peak anonymous memory ({unit})"
    )


def split_by_span(points: list[list[float]], spans: list[list[Any]]) -> list[list[list[float]]]:
    """Consecutive runs of points that fall in one case span (points outside every span
    stay with their neighbours)."""
    runs: list[list[list[float]]] = []
    current_span: int | None = None
    for point in points:
        span = next((i for i, (_, a, b, *_) in enumerate(spans) if a <= point[0] <= b), None)
        if not runs or (span is not None and span != current_span):
            runs.append([])
            current_span = span if span is not None else current_span
        runs[-1].append(point)
    return runs


LIMIT_COLOUR = "#c0392b"
BAND_COLOUR = "grey"


def _port_limits(ax: Any, fid: str, spans: list[list[Any]], peak: float) -> str | None:
    """Each case's port range as a dashed line over its band, when it fits on the plot
    (within 4x the peak); else the words for the top of the plot."""
    far: dict[int, bool] = {}
    for index, (_, first, last, ports, reuse) in enumerate(spans):
        if not ports:
            continue
        if ports <= 4 * max(peak, 1):
            ax.hlines(ports, first, last, colors=LIMIT_COLOUR, linestyles="--", lw=1.2,
                      gid=f"{fid}-limit-{index}")  # fmt: skip
        else:
            far[int(ports)] = far.get(int(ports), False) or bool(reuse)
    if not far:
        return None
    ranges = ", ".join(
        f"{p:,} ports" + (" (tcp_tw_reuse)" if r else "") for p, r in sorted(far.items())
    )
    return f"↑ port range limit {ranges}: far above the peak of {peak:,.0f}"


def draw_time_wait(series: dict[str, Any], fid: str) -> Any:
    from matplotlib.figure import Figure as MplFigure
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    from matplotlib.ticker import MaxNLocator

    spans = series["spans"]
    cases = list(dict.fromkeys(span[0] for span in spans))  # numbered as they first ran
    number = {case: index + 1 for index, case in enumerate(cases)}
    columns = 1 if len(cases) <= 6 else 2 if len(cases) <= 20 else 3
    rows = -(-len(cases) // columns)  # the legend of the bands, under the plot
    figure = MplFigure(figsize=(9, 3.4 + 0.2 * rows), layout="constrained")
    ax = figure.add_subplot()
    for index, (case, first, last, *_rest) in enumerate(spans):
        shade = 0.14 if number[case] % 2 else 0.05
        ax.axvspan(first, last, color=BAND_COLOUR, alpha=shade, lw=0, gid=f"{fid}-band-{index}")
        ax.text((first + last) / 2, 1.01, str(number[case]), transform=ax.get_xaxis_transform(),
                ha="center", va="bottom", fontsize=6 if len(spans) <= 60 else 4)  # fmt: skip
    peak = 0.0
    for role in SERVER_ROLES:
        # One line per case: the servers of the next case are new processes in new
        # namespaces, and a line across the gap would invent values.
        points = series["roles"].get(role, [])
        peak = max([peak, *(p[1] for p in points)])
        for index, run in enumerate(split_by_span(points, spans)):
            ax.step(
                [p[0] for p in run],
                [p[1] for p in run],
                where="post",
                color=ROLE_COLOURS[role],
                linestyle=ROLE_LINES[role],  # equal counts of both roles stay visible
                gid=f"{fid}-line-{role}-{index}",
            )
    far = _port_limits(ax, fid, spans, peak)
    if far:
        ax.text(0.99, 0.97, far, transform=ax.transAxes, ha="right", va="top", fontsize=8,
                color=LIMIT_COLOUR, gid=f"{fid}-limit-far")  # fmt: skip
    ax.set_ylim(bottom=0)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("time since the first sample (s)")
    ax.set_ylabel("TIME_WAIT sockets")
    ax.grid(alpha=0.3)
    handles: list[Any] = [
        Line2D([], [], color=ROLE_COLOURS[r], linestyle=ROLE_LINES[r], label=r)
        for r in SERVER_ROLES
        if series["roles"].get(r)
    ]
    if any(span[3] for span in spans):
        handles.append(Line2D([], [], color=LIMIT_COLOUR, linestyle="--", label="port range"))
    figure.legend(handles=handles, loc="outside upper right", ncols=len(handles), fontsize=8)
    if cases:
        bands = [
            Patch(color=BAND_COLOUR, alpha=0.14 if number[c] % 2 else 0.05,
                  label=f"{number[c]}: {c}")
            for c in cases
        ]  # fmt: skip
        figure.legend(handles=bands, loc="outside lower center", ncols=columns, fontsize=7,
                      title="bands: the case that ran, numbered in the order they first ran",
                      title_fontsize=7)  # fmt: skip
    return figure
