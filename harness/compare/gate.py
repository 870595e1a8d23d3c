"""`xfrbench compare RUN_A RUN_B` (or `compare RUN --axis KEY`, the two sides of one
interleaved A/B run): did B (an upgrade, a new suite, a binary, a config) make transfers
slower or costlier than A, and could this comparison have seen it?

Cases are matched by (case, method), and in a fleet by site as well (a far site's transfers
are not a near one's). Per case it compares (harness/compare/figures.py): durations; each
server role's CPU, memory, connections and TIME_WAIT sockets left, per transfer; failures
(Boschloo's exact test; a failure new in B is a regression whatever p says); a fleet's
propagation and a stream's load times, one value per repeat. Each figure is also compared
over all the cases at once. The statistics are Yuen's trimmed Welch test and its detectable
change (harness/core/power.py); the family's verdicts, Holm's correction and what must be
decidable are in harness/compare/family.py.

Exit status (`Comparison.exit_status`):
- 1, a regression: some figure is significantly worse after Holm's correction, by at least
  half the threshold; or a failure is new in B, a fleet did not converge in B;
- 4, cannot tell: no regression, but a required comparison could not have seen a change of
  the threshold (it says how many repeats would), a case or figure of A is missing in B,
  a case is unsupported only in B, or a run was interrupted;
- 0, no regression at the stated power.
A CI job that must not pass on too little data treats 4 as a failure.

Two separate runs carry a run-to-run component (another process's memory, the machine's
state) that neither run's spread shows; the interleaved A/B run (harness/compare/ab.py)
puts both sides on one testbed, slot by slot, so that drift reaches both alike: it is the
recommended gate, and two-run comparisons say so.

Everything but ``load_and_compare`` is pure.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness.compare.case import (  # the verdicts, for callers of the gate
    CANNOT_TELL,
    DEFAULT_ALPHA,
    DEFAULT_THRESHOLD,
    FAILED_IN_B,
    FAILING_IN_BOTH,
    FEWER_FAILURES,
    IMPROVEMENT,
    MISSING_IN_A,
    MISSING_IN_B,
    MORE_FAILURES,
    NEW_FAILURES,
    NEW_IN_B,
    NO_CHANGE,
    NO_DATA,
    NOT_CONVERGED_IN_B,
    REGRESSION,
    REGRESSIONS,
    UNSUPPORTED_IN_B,
    CaseComparison,
    compare_case,
    compare_failures,
    compare_sides,
    fleet_comparisons,
    side_of,
)
from harness.compare.catalog import catalog_comparisons
from harness.compare.family import Family, judge, overall_comparisons, power_words, undecided
from harness.compare.figures import (
    DEFAULT_RESOURCE_THRESHOLD,
    KINDS,
    RECORDED_KINDS,
    FailureCount,
    Key,
    Thresholds,
    Values,
    failure_counts,
    figure_kind,
    resource_values,
    scale_of_figure,
)
from harness.compare.meta import Difference, metadata_differences, run_state, server_changes
from harness.compare.stream import stream_comparisons
from harness.core.errors import UserInputError
from harness.results.folder import RUN_JSON, RunFolder, open_run
from harness.results.model import TransferRecord
from harness.results.summary import case_label

__all__ = [
    "CANNOT_TELL",
    "DEFAULT_ALPHA",
    "DEFAULT_THRESHOLD",
    "EXIT_CANNOT_TELL",
    "FAILED_IN_B",
    "FAILING_IN_BOTH",
    "FEWER_FAILURES",
    "IMPROVEMENT",
    "MISSING_IN_A",
    "MISSING_IN_B",
    "MORE_FAILURES",
    "NEW_FAILURES",
    "NEW_IN_B",
    "NOT_CONVERGED_IN_B",
    "NO_CHANGE",
    "NO_DATA",
    "REGRESSION",
    "REGRESSIONS",
    "UNSUPPORTED_IN_B",
    "CaseComparison",
    "Difference",
    "compare_case",
    "compare_runs",
    "gate_values",
    "load_and_compare",
]

EXIT_REGRESSION = 1
EXIT_CANNOT_TELL = 4  # 2 is bad input and 3 a missing host feature, as for every command
TWO_RUNS = (
    "two separate runs: each carries a run-to-run component (its processes' memory, the "
    "machine's state) that neither run's spread shows; an interleaved A/B run of both "
    "versions as one matrix axis (compare RUN --axis KEY) puts it on both sides alike"
)


def exit_status(cases: list[CaseComparison], issues: list[str], strict: bool = False) -> int:
    """1 on any regression; else 4 when a required comparison (any, when strict) cannot
    tell or the runs have issues (a missing case, an interrupted run); else 0."""
    if any(c.regression for c in cases):
        return EXIT_REGRESSION
    if undecided(cases, strict) or issues:
        return EXIT_CANNOT_TELL
    return 0


@dataclass
class Comparison:
    run_a: str
    run_b: str
    run_id_a: str
    run_id_b: str
    threshold: float
    resource_threshold: float
    alpha: float
    spec_hash_a: str | None
    spec_hash_b: str | None
    differences: list[Difference]
    cases: list[CaseComparison]
    only_in_a: list[str]
    only_in_b: list[str]
    warnings: list[str]
    notes: list[str] = field(default_factory=list)  # what the reader should know of the kind
    servers_a: str = ""  # "bind 9.18.49"
    servers_b: str = ""
    families: list[Family] = field(default_factory=list)  # Holm's, with m and alpha each
    strict: bool = False
    issues: list[str] = field(default_factory=list)  # run-level reasons it cannot tell
    not_recorded: list[str] = field(default_factory=list)  # figures neither run recorded
    axis: str | None = None  # an A/B run's axis: "servers.primary.options: default -> x"

    @property
    def regressions(self) -> list[CaseComparison]:
        return [c for c in self.cases if c.regression]

    @property
    def undecided(self) -> list[CaseComparison]:
        """The comparisons that keep "no regression" from being said."""
        return undecided(self.cases, self.strict)

    @property
    def unjudged(self) -> list[CaseComparison]:
        """Comparisons that cannot tell but are not required (without --strict)."""
        return [c for c in self.cases if c.undecided and not c.required and not self.strict]

    @property
    def failing_in_both(self) -> list[CaseComparison]:
        return [c for c in self.cases if c.verdict == FAILING_IN_BOTH]

    @property
    def identical(self) -> bool:
        """Every compared figure has the same values in both runs (a run against itself)."""
        return bool(self.cases) and all(c.identical for c in self.cases)

    @property
    def exit_status(self) -> int:
        return exit_status(self.cases, self.issues, self.strict)

    @property
    def power(self) -> str:
        return power_words(self.families, self.alpha)

    def to_json(self) -> dict[str, Any]:
        cases = []
        for item in self.cases:
            data = asdict(item)
            data.pop("effect", None)
            data["label"] = item.label
            data["regression"] = item.regression
            cases.append(data)
        return {
            "run_a": self.run_a,
            "run_b": self.run_b,
            "run_id_a": self.run_id_a,
            "run_id_b": self.run_id_b,
            "axis": self.axis,
            "threshold": self.threshold,
            "resource_threshold": self.resource_threshold,
            "alpha": self.alpha,
            "procedure": "holm",
            "families": [asdict(f) | {"level": f.level} for f in self.families],
            "power": 0.8,
            "strict": self.strict,
            "spec_hash_a": self.spec_hash_a,
            "spec_hash_b": self.spec_hash_b,
            "same_scenario": self.spec_hash_a == self.spec_hash_b,
            "differences": [asdict(d) for d in self.differences],
            "cases": cases,
            "only_in_a": self.only_in_a,
            "only_in_b": self.only_in_b,
            "warnings": self.warnings,
            "notes": self.notes,
            "issues": self.issues,
            "not_recorded": self.not_recorded,
            "regressions": [c.label for c in self.regressions],
            "cannot_tell": [c.label for c in self.undecided],
            "failing_in_both": [c.case_label for c in self.failing_in_both],
            "identical": self.identical,
            "exit_status": self.exit_status,
        }


Group = tuple[str, str, str | None]  # case, method, site (None outside fleets)


def _label(key: Group) -> str:
    case, method, site = key
    label = case_label(case, method)
    return label if site is None else f"{label} @ {site}"


def _groups(records: list[TransferRecord]) -> dict[Group, list[TransferRecord]]:
    """Records by case and method, and by site in a fleet: a fleet case's sites are
    compared one by one (a slower far site hides in a fleet-wide median). A stream's
    records are compared per repeat (compare/stream.py), a catalog's per repeat and
    consumer (compare/catalog.py)."""
    groups: dict[Group, list[TransferRecord]] = {}
    for record in records:
        if record.trigger not in ("stream", "catalog"):
            groups.setdefault((record.case, record.method, record.site), []).append(record)
    return groups


def check_options(
    threshold: float, alpha: float, resource_threshold: float = DEFAULT_RESOURCE_THRESHOLD
) -> None:
    for value, key in ((threshold, "--threshold"), (resource_threshold, "--resource-threshold")):
        if not (math.isfinite(value) and 0 < value < 1):
            raise UserInputError(
                f"threshold {value:g} is outside 0..1 (exclusive)",
                key=key,
                fix="give a fraction: 0.05 means a 5 % change",
            )
    if not (math.isfinite(alpha) and 0 < alpha < 1):
        raise UserInputError(
            f"alpha {alpha:g} is outside 0..1", key="--alpha", fix="give e.g. 0.05 or 0.01"
        )


def _check_scenarios(a: RunFolder, b: RunFolder, allow: bool) -> tuple[list[str], list[Difference]]:
    """Warnings, and what differs in the servers: two runs of one scenario compare; so do
    two runs whose scenarios differ only in their servers' binaries or suites (the upgrade
    being gated). Others only when allowed."""
    hash_a, hash_b = a.meta.spec_hash, b.meta.spec_hash
    if hash_a and hash_b and hash_a != hash_b:
        upgrade = server_changes(a.meta, b.meta)
        if upgrade is not None:
            return [], upgrade
        if not allow:
            raise UserInputError(
                f"the runs ran different scenarios (spec_hash {str(hash_a)[:16]} in "
                f"{a.path / RUN_JSON}, {str(hash_b)[:16]} here): their figures are not "
                "comparable",
                file=b.path / RUN_JSON,
                key="spec_hash",
                fix="compare two runs of one scenario (servers.*.binary and suite may "
                "differ), or pass --allow-different-scenario to compare the cases they "
                "share anyway",
            )
        return [
            f"different scenarios (spec hash {str(hash_a)[:16]} vs {str(hash_b)[:16]}), "
            "compared because of --allow-different-scenario"
        ], []
    if not hash_a or not hash_b:
        return ["a run has no spec_hash in run.json: cannot check the scenarios match"], []
    return [], []


def _servers(folder: RunFolder) -> str:
    return ", ".join(f"{s.kind} {s.version or '?'}" for s in folder.meta.servers.values())


@dataclass
class Judged:
    """The comparisons of a gate and its family, before the runs' descriptions."""

    cases: list[CaseComparison]
    families: list[Family]
    issues: list[str]
    not_recorded: list[str]

    def exit_status(self, strict: bool = False) -> int:
        return exit_status(self.cases, self.issues, strict)


def _missing(key: Key, values: Values, threshold: float, alpha: float, verdict: str):
    """A figure recorded in one run only: named, and it cannot tell."""
    case, method, site, figure = key
    side = side_of(values, threshold, scale_of_figure(figure))
    empty = side_of(Values([], 0), threshold)
    a, b = (side, empty) if verdict == MISSING_IN_B else (empty, side)
    item = compare_sides(case, method, a, b, threshold=threshold, alpha=alpha, site=site,
                         figure=figure)  # fmt: skip
    item.verdict = verdict
    item.required = True  # a figure gone from B hides whatever it would have shown
    item.reasons.append("not recorded in " + ("B" if verdict == MISSING_IN_B else "A"))
    return item


def gate_values(
    values_a: dict[Key, Values],
    values_b: dict[Key, Values],
    *,
    threshold: float = DEFAULT_THRESHOLD,
    resource_threshold: float = DEFAULT_RESOURCE_THRESHOLD,
    alpha: float = DEFAULT_ALPHA,
    failures: tuple[dict[Key, FailureCount], dict[Key, FailureCount]] | None = None,
    extra: list[CaseComparison] | None = None,
) -> Judged:
    """The gate on figures already read (pure): each (case, method, site, figure) of A
    against B's, the overall comparisons, the family's verdicts. `extra`: comparisons made
    elsewhere (durations from records, fleets, streams) that join the family."""
    thresholds = Thresholds(threshold, resource_threshold)
    cases = list(extra or [])
    recorded_a = {figure_kind(k[3]) for k in values_a}
    recorded_b = {figure_kind(k[3]) for k in values_b}
    not_recorded = []
    for key, value_a in values_a.items():
        value_b = values_b.get(key)
        case, method, site, figure = key
        if value_b is None:
            if figure_kind(figure) not in recorded_b:  # B recorded the kind nowhere
                cases.append(_missing(key, value_a, thresholds.of(figure), alpha, MISSING_IN_B))
            continue  # the case itself is missing in B: only_in_a says so
        scale, limit = scale_of_figure(figure), thresholds.of(figure)
        cases.append(
            compare_sides(case, method, side_of(value_a, limit, scale),
                          side_of(value_b, limit, scale), threshold=limit,
                          alpha=alpha, site=site, figure=figure, single=value_a.single)
        )  # fmt: skip
    for key, value_b in values_b.items():
        if key not in values_a and figure_kind(key[3]) not in recorded_a:
            cases.append(_missing(key, value_b, thresholds.of(key[3]), alpha, MISSING_IN_A))
    for kind in RECORDED_KINDS:
        if kind not in recorded_a and kind not in recorded_b:
            not_recorded.append(kind)
    if failures is not None:
        failures_a, failures_b = failures
        for key, count_a in failures_a.items():
            count_b = failures_b.get(key)
            if count_b is not None and (count_a.failed or count_b.failed):
                cases.append(compare_failures(key, count_a, count_b, alpha=alpha))
    cases += overall_comparisons(cases, thresholds)
    families = judge(cases, alpha)
    order = {kind: index for index, kind in enumerate(KINDS)}
    cases.sort(key=lambda c: (order.get(figure_kind(c.figure), len(order)), c.figure,
                              c.overall))  # fmt: skip
    return Judged(cases, families, [], not_recorded)


def _duration_comparisons(a: RunFolder, b: RunFolder, threshold: float, alpha: float):
    groups_a, groups_b = _groups(a.records), _groups(b.records)
    common = [key for key in groups_a if key in groups_b]
    out = [
        compare_case(case, method, groups_a[key], groups_b[key],
                     threshold=threshold, alpha=alpha, site=site)
        for key in common
        for case, method, site in [key]
    ]  # fmt: skip
    return out, groups_a, groups_b


def compare_runs(
    a: RunFolder,
    b: RunFolder,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    resource_threshold: float = DEFAULT_RESOURCE_THRESHOLD,
    alpha: float = DEFAULT_ALPHA,
    allow_different_scenario: bool = False,
    strict: bool = False,
    same_run: bool = False,
) -> Comparison:
    """`same_run`: A and B are the two sides of one interleaved A/B run (compare/ab.py)."""
    check_options(threshold, alpha, resource_threshold)
    warnings, servers = ([], []) if same_run else _check_scenarios(a, b, allow_different_scenario)
    issues = []
    for name, folder in (("A", a), ("B", b)):
        state = run_state(folder.meta)
        if state:
            issues.append(f"run {name} ({folder.path}) {state}: its missing cases hide "
                          "what they would have shown")  # fmt: skip
        if same_run:
            break
    durations, groups_a, groups_b = _duration_comparisons(a, b, threshold, alpha)
    if not durations and not any(r.trigger in ("stream", "catalog") for r in a.records):
        raise UserInputError(
            f"no case of {a.path} ({len(groups_a)} cases) is in {b.path} "
            f"({len(groups_b)} cases): nothing to compare",
            fix="compare two runs of the same scenario",
        )
    extra = durations + fleet_comparisons(a.records, b.records, threshold=threshold, alpha=alpha)
    extra += stream_comparisons(a.records, b.records, threshold=threshold, alpha=alpha)
    extra += catalog_comparisons(a.records, b.records, threshold=threshold, alpha=alpha)
    judged = gate_values(
        resource_values(a),
        resource_values(b),
        threshold=threshold,
        resource_threshold=resource_threshold,
        alpha=alpha,
        failures=(failure_counts(a.records), failure_counts(b.records)),
        extra=extra,
    )
    only_in_a = [_label(k) for k in groups_a if k not in groups_b]
    if only_in_a:
        issues.append(f"{len(only_in_a)} case(s) of A have no result in B")
    return Comparison(
        run_a=str(a.path),
        run_b=str(b.path),
        run_id_a=a.meta.run_id or a.path.name,
        run_id_b=b.meta.run_id or b.path.name,
        threshold=threshold,
        resource_threshold=resource_threshold,
        alpha=alpha,
        spec_hash_a=str(a.meta.spec_hash) if a.meta.spec_hash else None,
        spec_hash_b=str(b.meta.spec_hash) if b.meta.spec_hash else None,
        differences=servers + ([] if same_run else metadata_differences(a.meta, b.meta)),
        cases=judged.cases,
        only_in_a=only_in_a,
        only_in_b=[_label(k) for k in groups_b if k not in groups_a],
        warnings=warnings,
        notes=[] if same_run else [TWO_RUNS],
        servers_a=_servers(a),
        servers_b=_servers(b),
        families=judged.families,
        strict=strict,
        issues=issues,
        not_recorded=judged.not_recorded,
    )


def load_and_compare(
    run_a: Path,
    run_b: Path,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    resource_threshold: float = DEFAULT_RESOURCE_THRESHOLD,
    alpha: float = DEFAULT_ALPHA,
    allow_different_scenario: bool = False,
    strict: bool = False,
) -> Comparison:
    check_options(threshold, alpha, resource_threshold)
    return compare_runs(
        open_run(run_a),
        open_run(run_b),
        threshold=threshold,
        resource_threshold=resource_threshold,
        alpha=alpha,
        allow_different_scenario=allow_different_scenario,
        strict=strict,
    )
