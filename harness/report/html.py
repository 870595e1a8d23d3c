"""report.html: one self-contained page (inline SVG, inline CSS, no script that runs, no
external URL) rendered from ``ReportData`` with the Jinja template next to this module."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from harness.core import fmt
from harness.core.errors import UserInputError
from harness.core.stats import min_two_sided_p, repeats_for_alpha
from harness.core.terms import TRANSPORTS
from harness.report.case_rows import CLOCK_MARK, clock_note
from harness.report.data import ReportData, RunInfo
from harness.report.faultview import cell_text
from harness.report.figures import build_figures, render_svg
from harness.report.figures_common import TRANSPORT_COLOURS, Figure
from harness.report.labels import readable
from harness.report.link_checks import first_rows
from harness.report.outliers import MARK as OUTLIER_MARK
from harness.report.phases import SEEN, XOT_NOTE, XOT_WHY
from harness.report.throughput_bound import STEADY_BDPS
from harness.report.transport_costs import ALPHA, CONFIDENCE, TransportCost, TransportGroup
from harness.results.access import write_text_atomic
from harness.results.fleet import refused_text
from harness.results.resources import MEMORY_NOTE, SOCKETS_NOTE
from harness.results.summary import MAX_STABLE_CV, MIN_STABLE_N

TEMPLATE = "report.html.j2"


# What "CPU per transfer" covers (README, "What a transfer costs"): the report says it
# beside the figure, so that nobody reads it as the transfer alone.
CPU_WINDOW = (
    "CPU per transfer is what each server's cgroup used between a sample taken just before "
    "the harness puts the new zone version on the primary and asks it to reload, and one "
    "taken when the secondary first answers the new serial, before verification. For the "
    "primary it includes loading the new version, answering the harness's SOA polls (every "
    "5 ms) until it serves it, sending NOTIFY, the secondary's SOA query and the transfer "
    "out; for the secondary, the NOTIFY (or the control command), its SOA query, the "
    "transfer in, applying it and answering the harness's SOA polls. Work a server defers "
    "past that moment (writing a zone file or a journal) is not in it. Cold start: from "
    "just after the secondary starts until it serves every zone. Client pulls: the pull "
    "alone."
)
TRANSPORT_NAMES = {"tcp": "TCP", "tcp-tsig": "TCP+TSIG", "xot": "XoT", "xot-tsig": "XoT+TSIG"}


def significance(cost: TransportCost) -> str:
    """The Mann-Whitney verdict against TCP in a few words ("p 0.002 *")."""
    if cost.p_value is None:
        return ""
    if cost.significant:
        return f"p {cost.p_value:.2g} *"
    return f"p {cost.p_value:.2g}" + ("" if cost.testable else " (n too small)")


def transport_notes(groups: list[TransportGroup]) -> list[str]:
    """The lines under the transport table: counts, and why nothing can be significant."""
    costs = [c for g in groups for c in g.costs if c.p_value is not None]
    counts = sorted(
        {c.n for g in groups for c in g.costs if c.n}
        | {g.baseline_n for g in groups if g.baseline_n}
    )
    notes = [
        f"n = {', '.join(map(str, counts))} verified transfers per case; * = significant "
        f"(p < {ALPHA:g})."
    ]
    fleets = [g.key for g in groups if g.per != "transfer"]
    if fleets:  # n counts repeats there: a fleet's secondaries are not independent samples
        notes.append(
            f"{len(fleets)} fleet group(s): n counts repeats, one value each (when the "
            "fleet's last secondary served), not one per secondary."
        )
    untestable = [c for c in costs if not c.testable]
    if untestable:
        smallest = min(min_two_sided_p(g.baseline_n, c.n) for g in groups for c in g.costs
                       if c in untestable)  # fmt: skip
        notes.append(
            f"{len(untestable)} of {len(costs)} comparisons have too few transfers for any "
            f"p below {ALPHA:g} (the smallest possible is {smallest:.2g}): run at least "
            f"{repeats_for_alpha(ALPHA)} repeats per case to tell a real cost from noise."
        )
    far = {o.case: o for g in groups for c in g.costs for o in c.outliers}
    notes += [o.line(readable(o.case)) for o in far.values()]
    drifting = [c.case for g in groups for c in g.costs if c.drift]
    if drifting:
        notes.append(f"{len(drifting)} case(s) drift: their medians move while they run.")
    return notes


def index_text(cost: TransportCost) -> str:
    """ "111 ±3" as the CZ.NIC table writes it."""
    if cost.index is None:
        return fmt.NONE
    text = f"{cost.index:.0f}"
    text = text if cost.spread is None else f"{text} ±{cost.spread:.0f}"
    return text + (OUTLIER_MARK if cost.outliers else "")


@dataclass
class RenderedFigure:
    id: str
    title: str
    caption: str
    points: int
    series_count: int  # cases (or roles for a time series) in the series
    section: str
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
        section=figure.section,
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
        *([("zone", run.zone)] if run.zone else []),
        ("CPU placement", run.cpu_placement or "-"),
        ("CPU used", run.cpu_split or "-"),
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
        extensions=["jinja2.ext.loopcontrols"],
    )
    env.filters.update(
        dur=fmt.duration,
        rate=fmt.rate,
        pct=fmt.percent,
        count=fmt.count,
        size=fmt.size,
        ratio=fmt.ratio,
        value=lambda v: "" if v is None else v,
        index=index_text,
        significance=significance,
        refused=refused_text,
    )
    return env


def lede(data: ReportData) -> str:
    """One line under the title: what ran, where, on which link, and whether it finished."""
    run = data.run
    servers = ", ".join(f"{s.kind} {s.version or '?'}" for s in run.servers) or "no server"
    state = {"complete": "complete", "interrupted": "interrupted (Ctrl-C)"}.get(
        run.state, "unfinished (no end time)"
    )
    parts = [
        f"run {run.run_id}",
        servers,
        f"link {data.uniform_link}" if data.uniform_link else "links per case",
        f"{run.link_backend or '?'} link emulation",
        f"run {state}",
        f"host {run.hostname or '?'} ({run.kernel or '?'})",
    ]
    return " · ".join(parts)


def render_html(data: ReportData, figures: list[Figure] | None = None) -> str:
    figures = build_figures(data) if figures is None else figures
    link_rows = [
        (item.case, direction, counts)
        for item in data.resources
        for direction, counts in item.link.items()
    ]
    uniform_link = data.uniform_link
    rendered_figures = [rendered(f) for f in figures]
    shown = [
        t for t in TRANSPORTS if any(c.transport == t for g in data.transports for c in g.costs)
    ]
    transport_shared, transport_short = data.transport_labels.shared, data.transport_labels.short
    shared, short = data.labels.shared, data.labels.short
    short_rows = [row for row in data.bounds if not row.steady and row.bound_bps]
    return (
        environment()
        .get_template(TEMPLATE)
        .render(
            data=data,
            screen=data.screen,
            link_first_rows=first_rows(data.links),
            lede=lede(data),
            shared=shared,
            short=short,
            transports_shown=shown,
            transport_names=TRANSPORT_NAMES,
            transport_colours=TRANSPORT_COLOURS,
            transport_shared=transport_shared,
            transport_short=transport_short,
            confidence=f"{CONFIDENCE:.0%}",
            alpha=ALPHA,
            steady_bdps=f"{STEADY_BDPS:g}",
            seen=SEEN,
            xot_why=XOT_WHY if any(XOT_NOTE in p.notes for p in data.phases) else None,
            cpu_window=CPU_WINDOW,
            memory_note=MEMORY_NOTE,
            sockets_note=SOCKETS_NOTE,
            transport_notes=[*transport_notes(data.transports), *data.compare_plan],
            steady_bounds=[row for row in data.bounds if row.steady],
            short_bounds=short_rows,
            unbounded=[row for row in data.bounds if not row.bound_bps],
            longest_short=max(
                (row for row in short_rows if row.bdps is not None),
                key=lambda row: row.bdps or 0.0,
                default=None,
            ),
            figures_by_section={
                section: [f for f in rendered_figures if f.section == section]
                for section in ("answers", "fleet", "faults", "stream", "details")
            },
            run=data.run,
            warnings=data.warnings,
            meta_rows=meta_rows(data.run, uniform_link),
            cases=data.cases,
            uniform_link=uniform_link,
            clock_mark=CLOCK_MARK,
            clock_note=clock_note(data.cases),
            min_stable_n=MIN_STABLE_N,
            max_cv=f"{MAX_STABLE_CV:.0%}",
            figures=rendered_figures,
            resources=data.resources,
            resources_source=data.resources_source,
            resources_note=data.resources_note,
            link_rows=link_rows,
            fault_cell=cell_text,
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
