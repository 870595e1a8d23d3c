"""The TIME_WAIT plot: numbered bands for each stay of a case, a legend that names them, and
the secondary's ephemeral port range (the TIME_WAIT limit) drawn."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

from harness.core.fmt import short_labels
from harness.report.data import Labels, port_ranges, time_wait_series
from harness.report.figures import render_svg
from harness.report.figures_resources import time_wait_figure
from harness.results.folder import open_run

FIXTURE = Path(__file__).parent.parent / "fixtures" / "runs" / "failures"
TCP, XOT = "bind-bind/tcp/axfr", "bind-bind/xot/axfr"


def samples(counts: list[tuple[str, int]]) -> list[dict[str, object]]:
    """One secondary sample a second, the case it ran and its TIME_WAIT sockets."""
    return [
        {"t": 100.0 + i, "case": case, "role": "secondary", "tcp": {"time_wait": n}}
        for i, (case, n) in enumerate(counts)
    ]


def test_each_stay_of_a_case_is_a_band() -> None:
    """Interleaved cases take turns: a band per stay, not one from a case's first sample
    to its last (those overlapped)."""
    _, spans = time_wait_series(samples([(TCP, 1), (TCP, 2), (XOT, 3), (TCP, 4), (XOT, 5)]))
    assert spans == [(TCP, 0.0, 1.0), (XOT, 2.0, 2.0), (TCP, 3.0, 3.0), (XOT, 4.0, 4.0)]


def test_the_port_range_of_a_real_run() -> None:
    ranges = port_ranges(open_run(FIXTURE).cases)
    assert ranges["bind-bind/loss=0%/tcp/axfr"] == (60999 - 32768 + 1, False)


def figure(peak: int, ports: int) -> str:
    counts = [(TCP, peak // 2), (TCP, peak), (XOT, 1), (TCP, peak - 1)]
    series, spans = time_wait_series(samples(counts))
    data = SimpleNamespace(
        time_wait=series,
        case_spans=spans,
        port_ranges={TCP: (ports, False), XOT: (ports, True)},
        samples_note=None,
        labels=Labels(*short_labels([TCP, XOT])),  # the names as the report shortens them
    )
    return render_svg(time_wait_figure(data))  # type: ignore[arg-type]


def text_of(svg: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", svg).split())


def test_a_near_limit_is_a_line_over_each_band() -> None:
    svg = figure(peak=80, ports=100)
    assert all(f'id="fig-timewait-limit-{i}"' in svg for i in range(3))
    assert 'id="fig-timewait-limit-far"' not in svg
    words = text_of(svg)
    assert "1: tcp" in words and "2: xot" in words and "port range" in words


def test_a_far_limit_is_written_at_the_top() -> None:
    svg = figure(peak=72, ports=28232)
    assert 'id="fig-timewait-limit-0"' not in svg and 'id="fig-timewait-limit-far"' in svg
    words = text_of(svg)
    assert "port range limit 28,232 ports (tcp_tw_reuse)" in words  # xot's secondary reuses
    assert "far above the peak of 72" in words
