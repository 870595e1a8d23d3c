"""`xfrbench capacity SCENARIO --vary KEY`: the search with real runs, one run folder per
step, linked in a campaign folder (results/campaign.py), and the answer printed first.

Each step sets KEY (a key path as [matrix] names it) to the step's load and runs the
scenario as `xfrbench run` would (run/runner.py), with the scenario's repeats; a step too
noisy to call runs again with twice as many, and its call takes both runs' repeats. With
--then KEY=VALUE the search is repeated with those keys changed too, and the two curves and
how far the capacity moved are printed.
"""

from __future__ import annotations

import io
import json
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from harness.capacity import answer as text
from harness.capacity import evidence
from harness.capacity.report import write_page
from harness.capacity.search import SearchResult, StepOutcome, search
from harness.capacity.sla import Sla, call, parse_sla, repeat_figures, scenario_sla
from harness.core import ui
from harness.core.errors import UserInputError
from harness.results.campaign import link_step, new_campaign, write_campaign
from harness.results.folder import open_run
from harness.run.runner import run_scenario
from harness.spec import LoadedScenario, key_parts, load, with_values

FORMAT = 1
DEFAULT_MAX = 64
DEFAULT_REPEATS = 3  # for a scenario with repeats = "auto"
RunFn = Callable[[LoadedScenario, str], Path]  # (scenario, run id) -> its run folder


@dataclass
class Options:
    scenario: Path
    key: str
    start: float | None = None
    maximum: float | None = None
    sla: str | None = None
    then: list[str] = field(default_factory=list)
    factor: float = 2.0
    resolution: float | None = None
    results: Path = Path("results")
    campaign_id: str | None = None


def value_of(key: str, load: float) -> Any:
    """KEY's value at a load: a count as it is; a stream's interval from serials a minute."""
    if key.rsplit(".", 1)[-1] == "interval":
        return f"{60.0 / load:g}s"
    return int(load)


def _current(loaded: LoadedScenario, key: str) -> Any:
    node: Any = loaded.raw
    for part in key_parts(key):
        if isinstance(node, list):
            node = next((t for t in node if isinstance(t, dict) and t.get("name") == part), None)
        elif isinstance(node, dict):
            node = node.get(part)
        else:
            return None
    return node


def parse_then(items: list[str]) -> dict[str, Any]:
    """--then KEY=VALUE, VALUE read as TOML (20, true, "1gbit"), else as a string."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, written = item.partition("=")
        if not sep or not key.strip() or not written.strip():
            raise UserInputError(
                f"{item!r} is not KEY=VALUE",
                key="--then",
                fix="e.g. --then servers.primary.options.transfers-out=20",
            )
        try:
            value = tomllib.loads(f"v = {written.strip()}")["v"]
        except tomllib.TOMLDecodeError:
            value = written.strip()
        out[key.strip()] = value
    return out


def check(options: Options) -> tuple[LoadedScenario, Sla, float, float, dict[str, Any]]:
    """Every check that needs no run: the scenario, KEY at both ends, the SLA, --then."""
    loaded = load(options.scenario)
    if len(loaded.cases) != 1:
        raise UserInputError(
            f"the scenario has {len(loaded.cases)} cases; a capacity search runs one",
            file=options.scenario,
            fix="give one transport and one xfr kind, and no [matrix] or [[faults]]",
        )
    current = _current(loaded, options.key)
    integer = options.key.rsplit(".", 1)[-1] != "interval"
    start = options.start
    if start is None:
        start = float(current) if isinstance(current, int) and integer else 1.0
    maximum = options.maximum if options.maximum is not None else max(start, DEFAULT_MAX)
    if not (0 < start <= maximum) or (integer and not float(start).is_integer()):
        raise UserInputError(
            f"--from {start:g} --max {maximum:g} is no range of loads",
            key="--from",
            fix="give whole loads with 0 < --from <= --max, e.g. --from 2 --max 64",
        )
    then = parse_then(options.then)
    for end in (start, maximum):
        with_values(loaded, {options.key: value_of(options.key, end)}, "--vary")
    if then:
        with_values(loaded, {options.key: value_of(options.key, maximum)} | then, "--then")
    sla = parse_sla(options.sla) if options.sla else scenario_sla(loaded.scenario)
    return loaded, sla, start, maximum, then


def _repeats(loaded: LoadedScenario) -> int:
    repeats = loaded.scenario.repeats
    return int(repeats) if repeats != "auto" else DEFAULT_REPEATS


@dataclass
class Searcher:
    """One search's steps: runs, calls, readings, and the campaign's record of them."""

    loaded: LoadedScenario
    key: str
    sla: Sla
    then: dict[str, Any]
    label: str
    run: RunFn
    campaign: Path
    progress: Callable[[str], None]
    save: Callable[[], None]
    figures: dict[float, list[float]] = field(default_factory=dict)
    readings: dict[float, list[evidence.Reading]] = field(default_factory=dict)
    result: SearchResult | None = None
    steps: list[StepOutcome] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    wall_s: float = 0.0

    def step(self, load: float, attempt: int) -> StepOutcome:
        repeats = _repeats(self.loaded) * (2 if attempt else 1)
        values = {self.key: value_of(self.key, load), "repeats": repeats} | self.then
        loaded = with_values(self.loaded, values, "--vary/--then")
        index = len(self.steps) + 1
        run_id = f"{self.campaign.name}-{self.label_slug}{index:02d}"
        self.progress(f"{self.label}: step {index}: {self.key} = {values[self.key]} "
                      f"({repeats} repeats) -> results/{run_id}")  # fmt: skip
        run_dir = self.run(loaded, run_id)
        label = f"{self.label_slug}{text.load_text(load)}"
        link_step(self.campaign, len(list((self.campaign / "steps").iterdir())) + 1, label, run_dir)
        folder = open_run(run_dir)
        figures = repeat_figures(self.sla, folder.records)
        pooled = (self.figures.get(load, []) if attempt else []) + figures
        self.figures[load] = pooled
        self.readings[load] = evidence.readings(folder, self.sla)
        called = call(self.sla, pooled)
        outcome = StepOutcome(
            load, called.verdict, called.figure, called.low, called.high, called.repeats,
            run=run_dir.name, note=called.note(self.sla),
        )  # fmt: skip
        self.steps.append(outcome)
        self.progress(f"  {text.load_text(load)}: {called.verdict}: {outcome.note}")
        self.wall_s = time.monotonic() - self.started
        self.save()
        return outcome

    @property
    def label_slug(self) -> str:
        return "" if self.label == "as written" else "then-"

    def to_dict(self) -> dict[str, Any]:
        result = self.result or SearchResult(steps=list(self.steps))
        at_pass = self.readings.get(result.capacity) if result.capacity is not None else None
        at_fail = self.readings.get(result.first_fail) if result.first_fail is not None else None
        if result.reached_max:  # nothing failed: the top step against the one below it
            below = sorted(load for load in self.readings if load < (result.capacity or 0))
            at_pass, at_fail = (self.readings.get(below[-1]) if below else None), at_pass
        table = evidence.lines(at_pass, at_fail)
        bound = evidence.binding(table)
        return {
            "label": self.label,
            "then": self.then,
            "result": result.to_dict(),
            "evidence": [line.to_dict() for line in table],
            "binding": bound.to_dict() if bound else None,
            "readings": {
                text.load_text(k): [r.to_dict() for r in v] for k, v in self.readings.items()
            },
            "wall_s": round(self.wall_s, 1),
            "finished": self.result is not None,
        }


def run_capacity(options: Options, console: Console, run: RunFn | None = None) -> dict[str, Any]:
    """The whole command but its printing: the searches, capacity.json after every step."""
    loaded, sla, start, maximum, then = check(options)
    campaign = new_campaign(options.results, options.campaign_id)
    quiet = Console(file=io.StringIO())
    run = run or (lambda scenario, run_id: run_scenario(
        scenario, results_root=options.results, run_id=run_id, console=quiet))  # fmt: skip
    unit = text.unit_of(options.key)
    data: dict[str, Any] = {
        "format": FORMAT,
        "campaign": campaign.name,
        "scenario": str(options.scenario),
        "key": options.key,
        "unit": unit,
        "sla": sla.to_dict(),
        "from": start,
        "max": maximum,
        "factor": options.factor,
        "searches": [],
    }
    searchers: list[Searcher] = []

    def save() -> None:
        data["searches"] = [s.to_dict() for s in searchers]
        for one in data["searches"]:
            steps = len(one["result"]["steps"])
            one["answer"] = (
                text.answer(one, unit, data["sla"])
                if one["finished"]
                else f"searching: {steps} step(s) run so far"
            )
        write_campaign(campaign, data)

    def progress(line: str) -> None:
        console.print(escape(line), soft_wrap=True)

    labels = [("as written", {})]
    if then:
        labels.append((", ".join(f"{k}={v}" for k, v in then.items()), then))
    integer = options.key.rsplit(".", 1)[-1] != "interval"
    for label, changed in labels:
        searcher = Searcher(loaded, options.key, sla, changed, label, run, campaign, progress, save)
        searchers.append(searcher)
        searcher.result = search(
            searcher.step, start, maximum, factor=options.factor,
            resolution=options.resolution, integer=integer,
        )  # fmt: skip
        searcher.wall_s = time.monotonic() - searcher.started
        save()
    data["folder"] = str(campaign)
    return data


def print_answer(data: dict[str, Any], console: Console) -> None:
    """The answer first, then the curve, then the evidence table; per search."""
    unit, sla = data["unit"], data["sla"]
    searches = data["searches"]
    for one in searches:
        console.print(f"[bold]{escape(one['answer'])}[/]", soft_wrap=True)
    if len(searches) == 2:
        console.print(escape(text.moved_text(searches[0], searches[1], unit)), soft_wrap=True)
    for one in searches:
        table = ui.folding_table(
            f"curve ({one['label']}): {data['key']} against {sla['text']}, "
            "the median over repeats and its interval",
            ["load", "verdict", "figure", "interval", "repeats", "run"],
            left=2,
            trailing=1,
        )
        for row in text.curve_rows(one, sla):
            table.add_row(*(escape(c) for c in row))
        ui.print_table(console, table)
        table = ui.folding_table(
            f"evidence ({one['label']}): each candidate limit at the last pass and the first fail",
            ["candidate", "last pass", "first fail", "moved with load"],
            left=3,
        )
        for row in text.evidence_rows(one):
            table.add_row(*(escape(c) for c in row))
        ui.print_table(console, table)
        noisy = one["result"]["noisy"]
        if noisy:
            console.print(escape(f"too noisy to call, counted as not passing: "
                                 f"{', '.join(text.load_text(x) for x in noisy)}"))  # fmt: skip
        console.print(escape(f"wall {one['wall_s']:.0f} s"))
    console.print(escape(f"campaign: {data['folder']}"), soft_wrap=True)


def main(options: Options, as_json: bool) -> int:
    import os

    if os.geteuid() != 0:
        check(options)  # a wrong flag says so first
        raise UserInputError(
            "xfrbench capacity runs the scenario and needs root (namespaces, iptables)",
            fix="run it with sudo",
        )
    console = ui.console(stderr=as_json)
    data = run_capacity(options, console)
    print_answer(data, console)
    console.print(escape(f"page: {write_page(Path(data['folder']), data)}"), soft_wrap=True)
    if as_json:
        print(json.dumps(data, indent=2, allow_nan=False))
    return 0
