"""`xfrbench compare RUN_A RUN_B`: did run B (an upgrade, a new suite, a new binary) get
worse than run A, case by case and figure by figure?

Cases are matched by (case, method), and in a fleet by site as well (a far site's transfers
are not a near one's). Per case it compares (harness/compare/figures.py):
- durations, CPU per transfer of each server role, and the TIME_WAIT sockets each role held
  during each transfer: samples of one value per transfer. The median of each run with a
  percentile-bootstrap confidence interval, the relative change of B against A with its own
  bootstrap interval, and a two-sided Mann-Whitney U test. A change is significant only
  when it is larger than the threshold AND p < alpha: a small but consistent shift is noise
  for an operator, and a large shift on three transfers is luck. A change whose whole
  interval lies within the threshold is "no change"; one whose interval is wider is "~".
- peak memory of each role: one peak per case and run, so there is nothing to test: a
  change beyond the threshold (and beyond 1 MiB) counts.
- failures: failed of counted in each run, by Boschloo's exact test (one-sided: does B fail
  more often?). A case that failed in B and never in A is a regression whatever p says;
  cases failing in both runs are listed.
- a fleet's propagation per repeat (the last secondary's and the 95th percentile's time to
  serve the new serial), from harness/results/fleet.py; a fleet's site is compared on one
  value per repeat too (when its last secondary served). A repeat of B that did not reach
  the whole fleet is a regression.

Any regression makes the exit status 1, so the command can gate a server upgrade in CI. A
slow-down in a case whose repeats drift (harness/core/stats.py drift_check: a trend, or a
slow first repeat) is not called a regression: the rank test assumes values that do not
drift, so it is reported as "drifting" and named, for a re-run to settle.

Everything but ``load_and_compare`` is pure; the statistics live in harness/core/stats.py,
and the bootstrap uses a fixed seed per case so the same two runs always print the same
intervals.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness.compare.case import (  # the verdicts, for callers of the gate
    DEFAULT_ALPHA,
    DEFAULT_THRESHOLD,
    DRIFTING,
    FAILED_IN_B,
    FAILING_IN_BOTH,
    FEWER_FAILURES,
    IMPROVEMENT,
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
from harness.compare.figures import (
    FAILURES,
    KINDS,
    failure_counts,
    figure_kind,
    resource_values,
)
from harness.compare.meta import Difference, metadata_differences, run_state, server_changes
from harness.compare.stream import SlaComparison, sla_comparisons, stream_load_comparisons
from harness.core.errors import UserInputError
from harness.results.folder import RUN_JSON, RunFolder, open_run
from harness.results.model import TransferRecord
from harness.results.summary import case_label

__all__ = [
    "DEFAULT_ALPHA",
    "DEFAULT_THRESHOLD",
    "DRIFTING",
    "FAILED_IN_B",
    "FAILING_IN_BOTH",
    "FEWER_FAILURES",
    "IMPROVEMENT",
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
    "load_and_compare",
]

# --- two runs -----------------------------------------------------------------------------


@dataclass
class Geomean:
    """A figure's geometric mean over the cases with a value in both runs."""

    figure: str
    unit: str
    cases: int
    a: float
    b: float

    @property
    def change(self) -> float:
        return self.b / self.a - 1


def geomeans(cases: list[CaseComparison]) -> list[Geomean]:
    out = []
    for figure in dict.fromkeys(c.figure for c in cases if c.figure != FAILURES):
        pairs = [
            (c.a.median_s, c.b.median_s)
            for c in cases
            if c.figure == figure and c.a.median_s and c.b.median_s
        ]
        if pairs:
            a = math.exp(statistics.fmean(math.log(x) for x, _ in pairs))
            b = math.exp(statistics.fmean(math.log(y) for _, y in pairs))
            unit = next(c.unit for c in cases if c.figure == figure)
            out.append(Geomean(figure, unit, len(pairs), a, b))
    return out


@dataclass
class Comparison:
    run_a: str
    run_b: str
    run_id_a: str
    run_id_b: str
    threshold: float
    alpha: float
    spec_hash_a: str | None
    spec_hash_b: str | None
    differences: list[Difference]
    cases: list[CaseComparison]
    only_in_a: list[str]
    only_in_b: list[str]
    warnings: list[str]
    servers_a: str = ""  # "bind 9.18.49"
    servers_b: str = ""
    stream_sla: list[SlaComparison] = field(default_factory=list)  # compare/stream.py

    @property
    def regressions(self) -> list[CaseComparison]:
        return [c for c in self.cases if c.regression]

    @property
    def drifting(self) -> list[CaseComparison]:
        """Worse beyond the threshold with p < alpha, in a case that drifts."""
        return [c for c in self.cases if c.verdict == DRIFTING]

    @property
    def failing_in_both(self) -> list[CaseComparison]:
        return [c for c in self.cases if c.figure == FAILURES and c.a.failed and c.b.failed]

    @property
    def identical(self) -> bool:
        """Every compared figure has the same values in both runs (a run against itself):
        cases with no result in either count, as long as their failures are the same."""
        return bool(self.cases) and all(c.identical for c in self.cases)

    @property
    def exit_status(self) -> int:
        return 1 if self.regressions or any(s.regression for s in self.stream_sla) else 0

    @property
    def geomeans(self) -> list[Geomean]:
        return geomeans(self.cases)

    def to_json(self) -> dict[str, Any]:
        cases = []
        for item in self.cases:
            data = asdict(item)
            data["label"] = item.label
            data["regression"] = item.regression
            cases.append(data)
        return {
            "run_a": self.run_a,
            "run_b": self.run_b,
            "run_id_a": self.run_id_a,
            "run_id_b": self.run_id_b,
            "threshold": self.threshold,
            "alpha": self.alpha,
            "spec_hash_a": self.spec_hash_a,
            "spec_hash_b": self.spec_hash_b,
            "same_scenario": self.spec_hash_a == self.spec_hash_b,
            "differences": [asdict(d) for d in self.differences],
            "cases": cases,
            "geomeans": [asdict(g) | {"change": g.change} for g in self.geomeans],
            "only_in_a": self.only_in_a,
            "only_in_b": self.only_in_b,
            "warnings": self.warnings,
            "stream_sla": [item.to_json() for item in self.stream_sla],
            "regressions": [c.label for c in self.regressions]
            + [s.label for s in self.stream_sla if s.regression],
            "drifting": [c.label for c in self.drifting],
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
    compared one by one (a slower far site hides in a fleet-wide median)."""
    groups: dict[Group, list[TransferRecord]] = {}
    for record in records:
        groups.setdefault((record.case, record.method, record.site), []).append(record)
    return groups


def check_options(threshold: float, alpha: float) -> None:
    if not (math.isfinite(threshold) and 0 <= threshold < 1):
        raise UserInputError(
            f"threshold {threshold:g} is outside 0..1",
            key="--threshold",
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
                f"{a.path / RUN_JSON}, {str(hash_b)[:16]} here): their medians are not "
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


def compare_runs(
    a: RunFolder,
    b: RunFolder,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    alpha: float = DEFAULT_ALPHA,
    allow_different_scenario: bool = False,
) -> Comparison:
    check_options(threshold, alpha)
    warnings, servers = _check_scenarios(a, b, allow_different_scenario)
    for name, folder in (("A", a), ("B", b)):
        state = run_state(folder.meta)
        if state:
            warnings.append(f"run {name} ({folder.path}) {state}: some cases may be missing")
    groups_a, groups_b = _groups(a.records), _groups(b.records)
    common = [key for key in groups_a if key in groups_b]
    if not common:
        raise UserInputError(
            f"no case of {a.path} ({len(groups_a)} cases) is in {b.path} "
            f"({len(groups_b)} cases): nothing to compare",
            fix="compare two runs of the same scenario",
        )
    cases = [
        compare_case(case, method, groups_a[key], groups_b[key],
                     threshold=threshold, alpha=alpha, site=site)
        for key in common
        for case, method, site in [key]
    ]  # fmt: skip
    cases += fleet_comparisons(a.records, b.records, threshold=threshold, alpha=alpha)
    resources_a, resources_b = resource_values(a), resource_values(b)
    for key, values_a in resources_a.items():
        values_b = resources_b.get(key)
        if values_b is None:
            continue
        case, method, site, figure = key
        cases.append(
            compare_sides(case, method, side_of(values_a, threshold),
                          side_of(values_b, threshold), threshold=threshold, alpha=alpha,
                          site=site, figure=figure, single=values_a.single)
        )  # fmt: skip
    failures_a, failures_b = failure_counts(a.records), failure_counts(b.records)
    for key, count_a in failures_a.items():
        count_b = failures_b.get(key)
        if count_b is not None and (count_a.failed or count_b.failed):
            cases.append(compare_failures(key, count_a, count_b, alpha=alpha))
    cases += stream_load_comparisons(a.records, b.records, threshold=threshold, alpha=alpha)
    order = {kind: index for index, kind in enumerate(KINDS)}
    cases.sort(key=lambda c: (order.get(figure_kind(c.figure), len(order)), c.figure))
    return Comparison(
        run_a=str(a.path),
        run_b=str(b.path),
        run_id_a=a.meta.run_id or a.path.name,
        run_id_b=b.meta.run_id or b.path.name,
        threshold=threshold,
        alpha=alpha,
        spec_hash_a=str(a.meta.spec_hash) if a.meta.spec_hash else None,
        spec_hash_b=str(b.meta.spec_hash) if b.meta.spec_hash else None,
        differences=servers + metadata_differences(a.meta, b.meta),
        cases=cases,
        only_in_a=[_label(k) for k in groups_a if k not in groups_b],
        only_in_b=[_label(k) for k in groups_b if k not in groups_a],
        warnings=warnings,
        servers_a=_servers(a),
        servers_b=_servers(b),
        stream_sla=sla_comparisons(a.records, b.records, threshold=threshold, alpha=alpha),
    )


def load_and_compare(
    run_a: Path,
    run_b: Path,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    alpha: float = DEFAULT_ALPHA,
    allow_different_scenario: bool = False,
) -> Comparison:
    check_options(threshold, alpha)
    return compare_runs(
        open_run(run_a),
        open_run(run_b),
        threshold=threshold,
        alpha=alpha,
        allow_different_scenario=allow_different_scenario,
    )
