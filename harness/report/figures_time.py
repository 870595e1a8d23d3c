"""The transfer-time figures: each case's durations and throughputs (against its model bound),
and where the median transfer's time went (the first screen's phases, harness/report/phases.py);
what each plots (pure, ``Figure.series``) and how it is drawn.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from harness.core import fmt
from harness.core.fmt import duration_unit
from harness.core.units import format_rate
from harness.report.case_rows import CaseRow
from harness.report.data import ReportData
from harness.report.figures_common import (
    BOUND_COLOUR,
    PHASE_COLOURS,
    POINT_COLOUR,
    TRANSPORT_COLOURS,
    Figure,
    case_axes,
    new_figure,
    seconds_tick,
    shared_note,
)
from harness.report.phases import SEEN


def _why_empty(row: CaseRow) -> str | None:
    """The text drawn in place of a case's points when it has none."""
    if row.durations_s:
        return None if row.throughputs_bps else "no byte count"
    parts = [f"{row.unsupported} unsupported"] if row.unsupported else []
    parts += [f"{row.failed} failed"] if row.failed else []
    return "no verified transfer" + (f" ({', '.join(parts)})" if parts else "")


def _labels(data: ReportData) -> tuple[str, dict[str, str]]:
    """Short case labels for the plots' axes (the shared part goes to the caption)."""
    return data.labels.shared, data.labels.short


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
            "median (black bar) and p10-p90 spread (line, nearest rank). Failed and "
            "unsupported transfers are not drawn." + shared_note(shared)
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
        "Throughput of each verified transfer (zone bytes x 8 from the secondary's connect "
        "to served; dots) and its median (black bar)"
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
        caption=caption + "." + shared_note(shared),
        series={"unit": "bit/s", "bounded": bounded, "cases": cases},
        points=points,
        note=None if points else "no transfer with a byte count was counted",
    )


def phases_figure(data: ReportData) -> Figure:
    shared, short = data.labels.shared, data.labels.short
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
            "missing": item.missing,
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
            "wire), the start of the transfer by the secondary's own log (served minus the "
            "time it logged: before it the TCP handshake, and with XoT the TLS handshake "
            "and, for AXFR, the SOA query inside TLS), and the first SOA poll that answers "
            "the new serial; rows by transfer kind, then transport; the total at each "
            "bar's end. The diamond marks when the primary first served the new version."
            + shared_note(shared)
        ),
        series={"unit": "s", "cases": cases},
        points=bars,
        note=None if bars else "no verified server-to-server transfer",
        section="answers",
    )


def _rate_scale(values: list[float]) -> tuple[float, str]:
    top = max(values, default=0.0)
    for scale, unit in ((1e9, "Gbit/s"), (1e6, "Mbit/s"), (1e3, "kbit/s")):
        if top >= scale:
            return scale, unit
    return 1.0, "bit/s"


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


def draw_duration(series: dict[str, Any], fid: str) -> Any:
    from matplotlib.lines import Line2D

    cases = series["cases"]
    figure = new_figure(len(cases))
    ax = case_axes(figure, [c["label"] for c in cases])
    values = [p for c in cases for p in c["points"]]
    log = log_scale(values)
    scale, unit = (1.0, "") if log else duration_unit(values)
    _draw_cases(ax, fid, cases, scale)
    if log:
        ax.set_xscale("log")
        _log_axis(ax.xaxis, values, seconds_tick)
        ax.set_xlabel("transfer duration (log scale)")
    else:
        ax.set_xlim(left=0)
        ax.set_xlabel(f"transfer duration ({unit})")
    median = Line2D([], [], ls="", marker="|", ms=12, mew=2, color="black", label="median")
    _transport_legend(figure, cases, [median])
    return figure


def draw_throughput(series: dict[str, Any], fid: str) -> Any:
    from matplotlib.lines import Line2D

    cases = series["cases"]
    values = [p for c in cases for p in c["points"]]
    values += [c["bound"] for c in cases if c["bound"] is not None]
    log = log_scale(values)
    scale, unit = (1.0, "") if log else _rate_scale(values)
    figure = new_figure(len(cases))
    ax = case_axes(figure, [c["label"] for c in cases])
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


def draw_phases(series: dict[str, Any], fid: str) -> Any:
    """Stacked segments per case on one time axis (ms, or the unit of the longest bar),
    each bar's total at its end; on shares of each bar when the cases' totals are too far
    apart for one axis. The legend lists the phases in the order they happen."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    from matplotlib.transforms import blended_transform_factory

    cases = series["cases"]
    figure = new_figure(len(cases), per_row=0.3)  # stacked bars need less room than dots
    ax = case_axes(figure, [c["label"] for c in cases])
    totals = [sum(seg["seconds"] for seg in c["segments"]) or 1e-9 for c in cases]
    drawn = [t for t, c in zip(totals, cases, strict=True) if c["segments"]] or [1.0]
    share = max(drawn) / min(drawn) > 20
    scale, unit = duration_unit(drawn)
    label_at = blended_transform_factory(ax.transAxes, ax.transData)
    used: set[str] = set()
    for y, (case, total) in enumerate(zip(cases, totals, strict=True)):
        if not case["segments"]:
            text = case.get("missing") or "no verified transfer"
            ax.text(0.01, y, text, transform=label_at, va="center", fontsize=8, color="grey")
            continue
        width = total if share else scale
        for part, seg in enumerate(case["segments"]):
            used.add(seg["end"])
            ax.barh(
                y,
                seg["seconds"] / width,
                left=seg["start"] / width,
                height=0.6,
                color=PHASE_COLOURS.get(seg["end"], "#cccccc"),
                edgecolor="white",
                linewidth=0.5,
                gid=f"{fid}-bar-{y}-{part}",
            )
        for at in case["markers"].values():
            ax.plot([at / width], [y], marker="D", ms=5, color="black", gid=f"{fid}-marker-{y}")
        ax.annotate(
            fmt.duration(total),
            (total / width, y),
            xytext=(3, 0),
            textcoords="offset points",
            va="center",
            fontsize=7,
            gid=f"{fid}-total-{y}",
        )
    right = 1.0 if share else max(drawn) / scale
    ax.set_xlim(0, right * 1.12)
    if share:
        ax.set_xlabel("share of each transfer's time, from its time 0 (total at the bar's end)")
    else:
        ax.set_xlabel(f"{unit} from the reload (or control) command; total at the bar's end")
    order = [name for name in SEEN if name in used]  # the order the instants happen in
    handles: list[Any] = [
        Patch(color=PHASE_COLOURS.get(e, "#cccccc"), label=f"→ {e}") for e in order
    ]
    if any(c["markers"] for c in cases):
        handles.append(
            Line2D([], [], ls="", marker="D", ms=5, color="black", label="primary serves it")
        )
    figure.legend(
        handles=handles, loc="outside upper right", ncols=min(len(handles), 6), fontsize=8
    )
    return figure
