"""A capacity campaign as a page (capacity.html in the campaign folder): the answer first,
then the curve (load against the SLA's figure, each step's interval, pass and fail
marked, the SLA as a line), then each search's curve and evidence tables, the same rows
the terminal prints (answer.py). Drawn from capacity.json alone, so a finished or a
half-run campaign can be drawn again (`xfrbench capacity --show FOLDER`).
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from harness.capacity import answer as text
from harness.core import fmt
from harness.report.figures import prefix_ids
from harness.report.figures_common import POINT_COLOUR, seconds_formatter
from harness.results.campaign import CAPACITY_HTML

VERDICT_MARKS = {"pass": "o", "fail": "x", "noisy": "s"}
SEARCH_COLOURS = (POINT_COLOUR, "#dd8452")  # the SLA line is red


def curve_points(search: dict[str, Any]) -> list[dict[str, Any]]:
    """One point per step, by load (pure): a fail with no figure (the SLA was not reached
    at all) has none, and is drawn on the SLA line."""
    return [
        {
            "load": step["load"],
            "verdict": step["verdict"],
            "figure": step.get("figure"),
            "low": step.get("low"),
            "high": step.get("high"),
        }
        for step in sorted(search["result"]["steps"], key=lambda s: s["load"])
    ]


def draw_curve(data: dict[str, Any]) -> str | None:
    """The searches' curves as inline SVG; None when no step has run."""
    searches = [s for s in data["searches"] if s["result"]["steps"]]
    if not searches:
        return None
    import matplotlib
    from matplotlib.figure import Figure as MplFigure

    sla = data["sla"]
    timed = sla["kind"] != "no-failures"
    fig = MplFigure(figsize=(9, 4), layout="constrained")
    ax = fig.add_subplot()
    loads: list[float] = []
    for colour, search in zip(SEARCH_COLOURS, searches, strict=False):
        points = curve_points(search)
        loads += [p["load"] for p in points]
        line = [(p["load"], p["figure"]) for p in points if p["figure"] is not None]
        if line:
            ax.plot(*zip(*line, strict=True), color=colour, alpha=0.5, label=search["label"])
        for p in points:
            y = p["figure"] if p["figure"] is not None else (sla["seconds"] or 0)
            if p["low"] is not None and p["figure"] is not None:
                high = p["high"] if p["high"] is not None else p["figure"]
                ax.vlines(p["load"], p["low"], high, color=colour, alpha=0.6)
            ax.scatter([p["load"]], [y], marker=VERDICT_MARKS.get(p["verdict"], "o"),
                       color=colour, zorder=3)  # fmt: skip
    if timed and sla.get("seconds"):
        ax.axhline(sla["seconds"], color="#c0392b", linestyle="--", label=f"SLA: {sla['text']}")
        ax.yaxis.set_major_formatter(seconds_formatter())
    if loads and max(loads) >= 4 * min(loads):
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(
            lambda v, _: text.load_text(round(v, 6))))  # fmt: skip
    ax.set_xlabel(f"{data['key']} ({data['unit']})")
    ax.set_ylabel(sla["text"] if timed else "failed or unverified transfers")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize="small")
    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "capacity"}):
        fig.savefig(buffer, format="svg", metadata={"Date": None})
    svg = buffer.getvalue()
    svg = svg[svg.index("<svg") :]
    label = f"{data['key']} against {sla['text']}: o pass, x fail, square too noisy to call"
    return prefix_ids(svg, "capacity").replace("<svg ", f'<svg role="img" aria-label="{label}" ', 1)


PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>capacity {{ data.campaign }}</title>
<style>
body { font-family: sans-serif; max-width: 70em; margin: 1em auto; padding: 0 1em; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.6em; text-align: left; }
.answer { font-size: 1.2em; font-weight: bold; }
.how { color: #555; font-size: 0.9em; }
</style></head><body>
<h1>Capacity: {{ data.key }} within {{ data.sla.text }}</h1>
{% for one in data.searches %}<p class="answer" id="answer-{{ loop.index }}">{{ one.answer }}</p>
{% endfor %}{% if moved %}<p class="answer" id="moved">{{ moved }}</p>{% endif %}
<p class="how">Scenario {{ data.scenario }}; load stepped up by {{ data.factor }} from
{{ data.get("from") }} to at most {{ data.max }}, then bisected between the last pass and the
first fail. Each step is a real run (its folder named in the curve); a step passes when the
interval of its median over the repeats lies within the SLA, fails when it lies outside, and
is too noisy to call otherwise. See docs/capacity.md.</p>
{% if svg %}<figure id="curve">{{ svg | safe }}<figcaption class="how">{{ data.key }} against
{{ data.sla.text }}: o passed, x failed (drawn on the SLA line when the SLA was not reached at
all), a square too noisy to call; each bar the step's interval.</figcaption></figure>{% endif %}
{% for one in data.searches %}
<h2>Curve ({{ one.label }})</h2>
<table id="curve-{{ loop.index }}"><tr><th>load</th><th>verdict</th><th>figure</th><th>interval</th>
<th>repeats</th><th>run</th></tr>
{% for row in curves[loop.index0] %}<tr>{% for cell in row %}<td>{{ cell }}</td>{% endfor %}</tr>
{% endfor %}</table>
<h2>What binds ({{ one.label }})</h2>
<table id="evidence-{{ loop.index }}"><tr><th>candidate</th><th>at the last pass</th>
<th>at the first fail</th><th>moved with the load</th></tr>
{% for row in evidence[loop.index0] %}<tr>{% for cell in row %}<td>{{ cell }}</td>{% endfor %}</tr>
{% endfor %}</table>
<p class="how">wall {{ wall(one.wall_s) }}</p>
{% endfor %}
</body></html>
"""


def render_page(data: dict[str, Any]) -> str:
    from jinja2 import Environment

    searches = data["searches"]
    moved = None
    if len(searches) == 2 and all(s["finished"] for s in searches):
        moved = text.moved_text(searches[0], searches[1], data["unit"])
    page = Environment(autoescape=True).from_string(PAGE)
    return page.render(
        data=data,
        moved=moved,
        svg=draw_curve(data),
        curves=[text.curve_rows(one, data["sla"]) for one in searches],
        evidence=[text.evidence_rows(one) for one in searches],
        wall=lambda s: "-" if s is None else fmt.duration(s),
    )


def write_page(folder: Path, data: dict[str, Any]) -> Path:
    path = Path(folder) / CAPACITY_HTML
    path.write_text(render_page(data))
    return path
