"""The report's figures: which ones a report has, in the page's order, and their rendering
(SVG for the page, PNG through Agg on request).

Each ``Figure`` (harness/report/figures_common.py) carries its ``series``, the exact numbers
the drawing uses: the drawing functions read only ``series``, the HTML embeds it as JSON next
to the plot, so a test (or a reader who wants the numbers) checks what is plotted without
parsing SVG. Each family builds and draws its own: figures_time (durations, throughputs,
phases), figures_resources (CPU, memory, TIME_WAIT), figures_fleet (convergence, the
primary's cost), figures_faults (each faulted repeat's timeline). Drawing uses matplotlib's
object API (no pyplot state).
"""

from __future__ import annotations

import html
import io
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.report.data import ReportData
from harness.report.figures_catalog import catalog_growth_figure, draw_catalog_growth
from harness.report.figures_common import Figure
from harness.report.figures_faults import draw_faults, faults_figure
from harness.report.figures_fleet import (
    convergence_figure,
    draw_convergence,
    draw_fleet_cost,
    fleet_cost_figure,
)
from harness.report.figures_resources import (
    cpu_figure,
    draw_cpu,
    draw_memory,
    draw_time_wait,
    memory_figure,
    time_wait_figure,
)
from harness.report.figures_stream import (
    draw_stream_lag,
    draw_stream_load,
    stream_lag_figure,
    stream_load_figure,
)
from harness.report.figures_time import (
    draw_duration,
    draw_phases,
    draw_throughput,
    duration_figure,
    phases_figure,
    throughput_figure,
)


def build_figures(data: ReportData) -> list[Figure]:
    figures = [
        phases_figure(data),
        convergence_figure(data),
        fleet_cost_figure(data),
        faults_figure(data),
        stream_load_figure(data),
        stream_lag_figure(data),
        catalog_growth_figure(data),
        duration_figure(data),
        throughput_figure(data),
        cpu_figure(data),
        memory_figure(data),
        time_wait_figure(data),
    ]
    return [figure for figure in figures if figure is not None]


_DRAW: dict[str, Callable[[dict[str, Any], str], Any]] = {
    "fig-phases": draw_phases,
    "fig-convergence": draw_convergence,
    "fig-fleet-cost": draw_fleet_cost,
    "fig-faults": draw_faults,
    "fig-stream-load": draw_stream_load,
    "fig-stream-lag": draw_stream_lag,
    "fig-catalog-growth": draw_catalog_growth,
    "fig-duration": draw_duration,
    "fig-throughput": draw_throughput,
    "fig-cpu": draw_cpu,
    "fig-memory": draw_memory,
    "fig-timewait": draw_time_wait,
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
