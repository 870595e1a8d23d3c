"""What every figure of the report shares: the ``Figure`` record, the palette, the caption's
note on shortened case labels, and the matplotlib canvas, axes and tick helpers.

A figure is made in the module of its family (figures_time, figures_resources,
figures_fleet) in two steps: what it plots, pure, from ``ReportData`` into
``Figure.series``; then how it is drawn, from ``series`` alone. Drawn elements carry SVG ids
"<figure id>-<what>-<case index>" (points, median, spread, bound, bar-<role>, line-<role>),
so a test can count what was drawn in the SVG itself. matplotlib is imported inside the
drawing helpers only: building a figure's series needs none of it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.core import fmt

ROLE_COLOURS = {"primary": "#1f77b4", "secondary": "#ff7f0e"}
# One colour per transport in every plot (and the HTML tables' headers).
TRANSPORT_COLOURS = {
    "tcp": "#4c72b0",
    "tcp-tsig": "#55a868",
    "xot": "#c44e52",
    "xot-tsig": "#8172b2",
}
# Phases: by the instant that ends them (harness/report/phases.py SEEN), one hue each, in
# the order they happen: the primary's delay, the SOA query, connecting, the transfer.
PHASE_COLOURS = {
    "NOTIFY": "#9e9e9e",
    "SOA query": "#9467bd",
    "connect": "#1f77b4",
    "transfer starts (log)": "#ff7f0e",
    "served": "#2ca02c",
    "first zone": "#9467bd",
    "median zone": "#1f77b4",
    "95 % of zones": "#ff7f0e",
    "every zone": "#2ca02c",
}
ROLE_LINES = {"primary": "-", "secondary": "--"}
POINT_COLOUR = "#4c72b0"
BOUND_COLOUR = "#c0392b"


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


def shared_note(shared: str) -> str:
    return f" Every case is {shared}; the labels show what * stands for." if shared else ""


def new_figure(rows: int, per_row: float = 0.42) -> Any:
    from matplotlib.figure import Figure as MplFigure

    return MplFigure(figsize=(9, max(2.4, per_row * rows + 1.3)), layout="constrained")


def case_axes(mpl_figure: Any, labels: list[str]) -> Any:
    ax = mpl_figure.add_subplot()
    ax.set_ylim(len(labels) - 0.5, -0.5)  # first case on top
    ax.set_yticks(range(len(labels)), labels)
    ax.grid(axis="x", alpha=0.3)
    return ax


def seconds_tick(value: float) -> str:
    """A time axis tick in the unit policy of the tables (harness/core/fmt.py): 50 µs,
    2 ms, 500 ms, 30 s."""
    return "0" if value <= 0 else fmt.duration(value)


def seconds_formatter() -> Any:
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(lambda v, _: seconds_tick(v))
