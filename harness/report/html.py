"""report.html: one self-contained page (inline SVG, inline CSS, no script that runs, no
external URL) rendered from ``ReportData`` with the Jinja template next to this module."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from harness.errors import UserInputError
from harness.report import fmt
from harness.report.data import ReportData, RunInfo
from harness.report.figures import Figure, build_figures, render_svg
from harness.results.access import write_text_atomic
from harness.results.summary import MAX_STABLE_CV, MIN_STABLE_N

TEMPLATE = "report.html.j2"


@dataclass
class RenderedFigure:
    id: str
    title: str
    caption: str
    points: int
    series_count: int  # cases (or roles for a time series) in the series
    note: str | None
    svg: Markup | None
    series_json: Markup


def series_json(series: dict[str, Any]) -> Markup:
    """JSON safe inside <script type="application/json">: '</' cannot end the element."""
    text = json.dumps(series, separators=(",", ":"), allow_nan=False)
    return Markup(text.replace("</", "<\\/"))


def rendered(figure: Figure) -> RenderedFigure:
    count = len(figure.series.get("cases", figure.series.get("roles", {})))
    return RenderedFigure(
        id=figure.id,
        title=figure.title,
        caption=figure.caption,
        points=figure.points if figure.drawable else 0,
        series_count=count,
        note=figure.note,
        svg=Markup(render_svg(figure)) if figure.drawable else None,
        series_json=series_json(figure.series),
    )


def meta_rows(run: RunInfo, uniform_link: str | None) -> list[tuple[str, str]]:
    state = {
        "complete": "no",
        "interrupted": "yes (Ctrl-C: finished transfers kept)",
        "unfinished": "yes (the run never finished: no end time in run.json)",
    }[run.state]
    commit = run.git_commit or "-"
    if run.git_dirty:
        commit += " (uncommitted changes)"
    servers = ", ".join(f"{s.kind} {s.version or '?'} ({s.path or '?'})" for s in run.servers)
    rows = [
        ("run id", run.run_id),
        ("scenario", " - ".join(x for x in (run.scenario, run.description) if x) or "-"),
        ("scenario file", run.scenario_path or "-"),
        ("spec hash", run.spec_hash or "-"),
        ("started", run.started or "-"),
        ("finished", run.finished or "-"),
        ("interrupted", state),
        ("transfers", str(run.transfers)),
        ("harness commit", commit),
        ("host", run.hostname or "-"),
        ("OS", run.os or "-"),
        ("kernel", run.kernel or "-"),
        ("CPU", run.cpu or "-"),
        ("servers", servers or "-"),
        ("link backend", run.link_backend or "-"),
    ]
    if uniform_link:
        rows.append(("link", uniform_link))
    return rows


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(Path(__file__).parent),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=False,
        keep_trailing_newline=True,
    )
    env.filters.update(
        dur=fmt.seconds, rate=fmt.rate, pct=fmt.percent, mib=fmt.mib, count=fmt.count
    )
    return env


def render_html(data: ReportData, figures: list[Figure] | None = None) -> str:
    figures = build_figures(data) if figures is None else figures
    link_rows = [
        (item.case, direction, counts)
        for item in data.resources
        for direction, counts in item.link.items()
    ]
    uniform_link = data.uniform_link
    return (
        environment()
        .get_template(TEMPLATE)
        .render(
            run=data.run,
            warnings=data.warnings,
            meta_rows=meta_rows(data.run, uniform_link),
            cases=data.cases,
            uniform_link=uniform_link,
            min_stable_n=MIN_STABLE_N,
            max_cv=f"{MAX_STABLE_CV:.0%}",
            figures=[rendered(f) for f in figures],
            resources=data.resources,
            resources_source=data.resources_source,
            resources_note=data.resources_note,
            link_rows=link_rows,
        )
    )


def write_report(data: ReportData, out: Path) -> Path:
    """Write the page (via a temp file and rename: a browser never loads half of it)."""
    out = Path(out)
    if not out.parent.is_dir():
        raise UserInputError(
            f"cannot write the report: folder {out.parent} does not exist",
            key="--out",
            fix="create the folder or give another --out",
        )
    page = render_html(data)
    try:
        write_text_atomic(out, page)  # 0644; a browser never loads half of it
    except OSError as exc:  # a read-only copy of a run folder, a folder named like the file
        raise UserInputError(
            f"cannot write the report: {exc.strerror}",
            file=out,
            key="--out",
            fix="give --out a file (not a folder) in a folder you may write",
        ) from None
    return out
