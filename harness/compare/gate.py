"""`xfrbench compare RUN_A RUN_B`: is run B slower than run A, case by case?

Cases are matched by (case, method), and in a fleet by site as well (a far site's transfers
are not a near one's); a fleet case also compares its propagation figures per repeat (the
last secondary's and the 95th percentile's time to serve the new serial). For each: the
median of each run with a percentile-bootstrap confidence interval, the relative change of B
against A with its own bootstrap interval, and a two-sided Mann-Whitney U test. A change is
significant only when it is larger than the threshold AND p < alpha: a small but consistent
shift is noise for an operator, and a large shift on three transfers is luck. A change whose
whole interval lies within the threshold is "no change"; one whose interval is wider is "~":
not significant, and not shown to be absent either.

A significant slow-down is a regression, and so is a case whose transfers all failed in B but
not in A; either makes the exit status 1, so the command can gate a server upgrade in CI. A
slow-down in a case whose repeats drift (harness/core/stats.py drift_check: a trend, or a slow
first repeat) is not called a regression: the rank test assumes values that do not drift,
so it is reported as "drifting" and named, for a re-run to settle.

Everything but ``load_and_compare`` is pure; the statistics live in harness/core/stats.py, and the
bootstrap uses a fixed seed per case so the same two runs always print the same intervals.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness.compare.stream import LOAD_FIGURE, SlaComparison, load_samples, sla_comparisons
from harness.core.errors import UserInputError
from harness.core.stats import (
    DRIFT_VERDICTS,
    bootstrap_intervals,
    coefficient_of_variation,
    drift_check,
    drift_messages,
    mann_whitney_p,
    min_two_sided_p,
    repeats_for_alpha,
)
from harness.core.terms import SERVER_TO_SERVER
from harness.results.fleet import fleet_repeats
from harness.results.folder import RUN_JSON, open_run
from harness.results.meta import RunMeta
from harness.results.model import TransferRecord
from harness.results.summary import case_label

DEFAULT_THRESHOLD = 0.05
DEFAULT_ALPHA = 0.05
MIN_N = 5  # fewer transfers per case and run: a single outlier moves the median
MAX_CV = 0.10

REGRESSION = "regression"
IMPROVEMENT = "improvement"
NO_CHANGE = "no-change"
DRIFTING = "drifting"  # significantly slower, but a side drifts: not called a regression
FAILED_IN_B = "failed-in-b"
NEW_IN_B = "new-in-b"
NO_DATA = "no-data"
REGRESSIONS = (REGRESSION, FAILED_IN_B)
DURATION = "duration"  # what a comparison compares: transfer durations...
FLEET_FIGURES = ("fleet last", "fleet p95")  # ...or a fleet's propagation per repeat

# Kinds of warning, so that the terminal prints one line per kind, not one per case.
FEW = "few transfers"
SPREAD = "wide spread"
FAILURES = "failures differ"
DRIFT = "drift"


# --- one case -----------------------------------------------------------------------------


@dataclass
class Side:
    attempts: int
    n: int  # transfers that count (ok and verified)
    failed: int  # not ok or not verified, unsupported included
    median_s: float | None
    ci_s: tuple[float, float] | None
    cv: float | None
    durations_s: list[float]  # in the order they ran
    drift: list[str] = field(default_factory=list)  # drift_check's lines, [] when steady
    drifting: bool = False  # a trend that adds up to the threshold or more over the run


@dataclass
class CaseComparison:
    case: str
    method: str
    a: Side
    b: Side
    change: float | None  # median B / median A - 1
    change_ci: tuple[float, float] | None
    p_value: float | None
    min_p: float  # the smallest p these sample sizes allow
    significant: bool
    verdict: str
    warnings: list[str] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)  # the kind of each warning
    site: str | None = None  # a fleet's site
    figure: str = DURATION
    within: bool = False  # the change's whole interval lies within the threshold
    identical: bool = False  # A's and B's values are the same

    @property
    def label(self) -> str:
        label = case_label(self.case, self.method)
        if self.site is not None:
            label += f" @ {self.site}"
        return label if self.figure == DURATION else f"{label}: {self.figure}"

    @property
    def regression(self) -> bool:
        return self.verdict in REGRESSIONS


def _drift(series: dict[str, list[float]], threshold: float) -> tuple[list[str], bool]:
    """drift_check's lines for each series (one per fleet host: a site's hosts take turns,
    and a near-first host beside a late one is no trend), and whether any trends by the
    threshold or more over its run: then it, not the other run, may be what the change
    measures. A slow first repeat is said, but moves a median little."""
    lines: list[str] = []
    drifting = False
    for host, values in series.items():
        prefix = f"{host}: " if len(series) > 1 else ""
        lines += [prefix + line for line in drift_messages(values)]
        check = drift_check(values)
        trend = check.trend
        if check.verdict in DRIFT_VERDICTS and trend is not None:
            drifting |= abs(trend.relative_slope * (trend.n - 1)) >= threshold
    return lines, drifting


def _values_side(
    values: list[float],
    attempts: int,
    threshold: float,
    series: dict[str, list[float]] | None = None,
) -> Side:
    drift, drifting = _drift(series if series is not None else {"": values}, threshold)
    return Side(
        attempts=attempts,
        n=len(values),
        failed=attempts - len(values),
        median_s=statistics.median(values) if values else None,
        ci_s=None,
        cv=coefficient_of_variation(values),
        durations_s=values,
        drift=drift,
        drifting=drifting,
    )


def _side(records: list[TransferRecord], threshold: float) -> Side:
    counted = [r for r in records if r.counts and r.duration_s is not None]
    series: dict[str, list[float]] = {}
    for record in counted:
        series.setdefault(record.host, []).append(float(record.duration_s or 0))
    durations = [float(r.duration_s or 0) for r in counted]
    return _values_side(durations, len(records), threshold, series)


def stability_warnings(a: Side, b: Side, alpha: float) -> list[str]:
    return [text for _, text in _stability(a, b, alpha)]


def _stability(a: Side, b: Side, alpha: float) -> list[tuple[str, str]]:
    """(kind, text) of each reason not to trust the comparison of these two sides."""
    warnings = []
    smallest = min(a.n, b.n)
    if 0 < smallest < MIN_N:
        floor = min_two_sided_p(a.n, b.n)
        needed = max(MIN_N, repeats_for_alpha(alpha))
        if floor >= alpha:
            warnings.append((
                FEW,
                f"unstable: n={a.n} vs {b.n}: the smallest two-sided Mann-Whitney p possible "
                f"is {floor:.3g}, so no change can be significant at alpha {alpha:g}; run at "
                f"least {needed} transfers per case in each run (scenario repeats)",
            ))  # fmt: skip
        else:
            warnings.append((
                FEW,
                f"unstable: n={a.n} vs {b.n}: fewer than {MIN_N} transfers, one slow transfer "
                f"moves the median; run at least {needed} transfers per case in each run",
            ))  # fmt: skip
    for name, side in (("A", a), ("B", b)):
        if side.cv is not None and side.cv > MAX_CV:
            warnings.append((
                SPREAD,
                f"unstable: run {name} spread is wide (CV {side.cv:.1%} > {MAX_CV:.0%}): "
                "a busy host or a noisy link; its median is not a reliable figure",
            ))  # fmt: skip
    if a.failed != b.failed and (a.attempts or b.attempts):
        warnings.append((
            FAILURES,
            f"failed or unverified transfers: {a.failed} of {a.attempts} in A, "
            f"{b.failed} of {b.attempts} in B",
        ))  # fmt: skip
    for name, side in (("A", a), ("B", b)):
        for line in side.drift:
            warnings.append((DRIFT, f"run {name}: {line}"))
    return warnings


def compare_sides(
    case: str,
    method: str,
    a: Side,
    b: Side,
    *,
    threshold: float,
    alpha: float,
    site: str | None = None,
    figure: str = DURATION,
) -> CaseComparison:
    """The comparison of two samples of one figure (durations, or a fleet's per repeat)."""
    a.ci_s, b.ci_s, change_ci = bootstrap_intervals(a.durations_s, b.durations_s, 1 - alpha)
    change = None
    if a.median_s and b.median_s is not None:
        change = b.median_s / a.median_s - 1
    p = mann_whitney_p(a.durations_s, b.durations_s)
    significant = change is not None and p is not None and abs(change) > threshold and p < alpha
    identical = bool(a.durations_s) and sorted(a.durations_s) == sorted(b.durations_s)
    if a.n and b.n:
        if significant and change is not None and change > 0:
            verdict = DRIFTING if (a.drifting or b.drifting) else REGRESSION
        elif significant:
            verdict = IMPROVEMENT
        else:
            verdict = NO_CHANGE
    elif a.n:
        verdict = FAILED_IN_B
    elif b.n:
        verdict = NEW_IN_B
    else:
        verdict = NO_DATA
    if change_ci is not None:
        within = -threshold <= change_ci[0] and change_ci[1] <= threshold
    else:
        within = change is not None and abs(change) <= threshold
    stability = [] if identical else _stability(a, b, alpha)
    return CaseComparison(
        case=case,
        method=method,
        a=a,
        b=b,
        change=change,
        change_ci=change_ci,
        p_value=p,
        min_p=min_two_sided_p(a.n, b.n),
        significant=significant,
        verdict=verdict,
        warnings=[text for _, text in stability],
        kinds=[kind for kind, _ in stability],
        site=site,
        figure=figure,
        within=within or identical,
        identical=identical,
    )


def compare_case(
    case: str,
    method: str,
    records_a: list[TransferRecord],
    records_b: list[TransferRecord],
    *,
    threshold: float,
    alpha: float,
    site: str | None = None,
) -> CaseComparison:
    return compare_sides(
        case,
        method,
        _side(records_a, threshold),
        _side(records_b, threshold),
        threshold=threshold,
        alpha=alpha,
        site=site,
    )


def fleet_comparisons(
    records_a: list[TransferRecord],
    records_b: list[TransferRecord],
    *,
    threshold: float,
    alpha: float,
) -> list[CaseComparison]:
    """Per fleet case in both runs: the last secondary's and the 95th percentile's time to
    serve the new serial, one value per repeat (harness/results/fleet.py)."""
    repeats_a, repeats_b = fleet_repeats(records_a), fleet_repeats(records_b)
    out = []
    for case in dict.fromkeys(r.case for r in repeats_a):
        mine_a = [r for r in repeats_a if r.case == case]
        mine_b = [r for r in repeats_b if r.case == case]
        if not mine_b:
            continue
        for figure, name in zip(FLEET_FIGURES, ("last_s", "p95_s"), strict=True):
            values_a = [getattr(r, name) for r in mine_a if getattr(r, name) is not None]
            values_b = [getattr(r, name) for r in mine_b if getattr(r, name) is not None]
            out.append(
                compare_sides(
                    case,
                    SERVER_TO_SERVER,
                    _values_side(values_a, len(mine_a), threshold),
                    _values_side(values_b, len(mine_b), threshold),
                    threshold=threshold,
                    alpha=alpha,
                    figure=figure,
                )
            )
    return out


def stream_load_comparisons(
    records_a: list[TransferRecord], records_b: list[TransferRecord], **options: float
) -> list[CaseComparison]:
    """Per stream case and site (and fleet): each serial's load time there (compare/stream.py)."""
    samples_a, samples_b = load_samples(records_a), load_samples(records_b)
    threshold, out = options["threshold"], []
    for (case, site), values_a in samples_a.items():
        if (case, site) not in samples_b:
            continue
        a, b = (_values_side([v for v in values if v is not None], len(values), threshold)
                for values in (values_a, samples_b[(case, site)]))  # fmt: skip
        figure = LOAD_FIGURE if site else f"{LOAD_FIGURE}, fleet"
        out.append(compare_sides(case, SERVER_TO_SERVER, a, b, site=site or None, figure=figure,
                                 threshold=threshold, alpha=options["alpha"]))  # fmt: skip
    return out


# --- two runs -----------------------------------------------------------------------------


@dataclass
class Difference:
    what: str
    a: str
    b: str

    def __str__(self) -> str:
        return f"{self.what}: {self.a} -> {self.b}"


def _server_versions(meta: RunMeta) -> dict[str, str]:
    versions: dict[str, str] = {}
    for key, server in meta.servers.items():
        name = server.kind if server.kind not in versions else key  # two builds of one server
        versions[name] = server.version or "?"
    return versions


def metadata_differences(meta_a: RunMeta, meta_b: RunMeta) -> list[Difference]:
    """What differs between the two runs' environments (spec hash aside): server versions,
    kernel, host, CPU, OS, link backend, harness commit."""
    out = []
    versions_a, versions_b = _server_versions(meta_a), _server_versions(meta_b)
    for kind in sorted(set(versions_a) | set(versions_b)):
        va, vb = versions_a.get(kind, "(absent)"), versions_b.get(kind, "(absent)")
        if va != vb:
            out.append(Difference(f"{kind} version", va, vb))
    for key, what in (
        ("kernel", "kernel"),
        ("hostname", "host"),
        ("cpu_model", "CPU"),
        ("cpu_count", "CPU count"),
        ("os", "OS"),
        ("git_commit", "harness commit"),
    ):
        va, vb = getattr(meta_a.host, key), getattr(meta_b.host, key)
        if key == "git_commit":  # as git prints it
            va, vb = (str(v)[:12] if v else v for v in (va, vb))
        if va != vb:
            out.append(Difference(what, str(va or "(unknown)"), str(vb or "(unknown)")))
    if meta_a.link_backend != meta_b.link_backend:
        out.append(Difference("link backend", str(meta_a.link_backend), str(meta_b.link_backend)))
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
    stream_sla: list[SlaComparison] = field(default_factory=list)  # compare/stream.py

    @property
    def regressions(self) -> list[CaseComparison]:
        return [c for c in self.cases if c.regression]

    @property
    def drifting(self) -> list[CaseComparison]:
        """Slower beyond the threshold with p < alpha, in a case that drifts."""
        return [c for c in self.cases if c.verdict == DRIFTING]

    @property
    def identical(self) -> bool:
        """Every compared figure has the same values in both runs (a run against itself)."""
        return bool(self.cases) and all(c.identical for c in self.cases)

    @property
    def exit_status(self) -> int:
        return 1 if self.regressions or any(s.regression for s in self.stream_sla) else 0

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
            "only_in_a": self.only_in_a,
            "only_in_b": self.only_in_b,
            "warnings": self.warnings,
            "stream_sla": [item.to_json() for item in self.stream_sla],
            "regressions": [c.label for c in self.regressions]
            + [s.label for s in self.stream_sla if s.regression],
            "drifting": [c.label for c in self.drifting],
            "identical": self.identical,
            "exit_status": self.exit_status,
        }


Key = tuple[str, str, str | None]  # case, method, site (None outside fleets)


def _label(key: Key) -> str:
    case, method, site = key
    label = case if method == SERVER_TO_SERVER else f"{case} [{method.removeprefix('client-')}]"
    return label if site is None else f"{label} @ {site}"


def _groups(records: list[TransferRecord]) -> dict[Key, list[TransferRecord]]:
    """Records by case and method, and by site in a fleet: a fleet case's sites are
    compared one by one (a slower far site hides in a fleet-wide median)."""
    groups: dict[Key, list[TransferRecord]] = {}
    for record in records:
        key = (record.case, record.method, record.site)
        groups.setdefault(key, []).append(record)
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


def _run_state(meta: RunMeta) -> str | None:
    if meta.state == "interrupted":
        return "was interrupted (Ctrl-C)"
    if meta.state == "unfinished":
        return "never finished (no end time in run.json)"
    return None


def compare_runs(
    meta_a: RunMeta,
    records_a: list[TransferRecord],
    meta_b: RunMeta,
    records_b: list[TransferRecord],
    *,
    path_a: Path,
    path_b: Path,
    threshold: float = DEFAULT_THRESHOLD,
    alpha: float = DEFAULT_ALPHA,
    allow_different_scenario: bool = False,
) -> Comparison:
    check_options(threshold, alpha)
    warnings = []
    hash_a, hash_b = meta_a.spec_hash, meta_b.spec_hash
    if hash_a and hash_b and hash_a != hash_b:
        if not allow_different_scenario:
            raise UserInputError(
                f"the runs ran different scenarios (spec_hash {str(hash_a)[:16]} in "
                f"{Path(path_a) / RUN_JSON}, {str(hash_b)[:16]} here): their medians are not "
                "comparable",
                file=Path(path_b) / RUN_JSON,
                key="spec_hash",
                fix="compare two runs of one scenario, or pass --allow-different-scenario "
                "to compare the cases they share anyway",
            )
        warnings.append(
            f"different scenarios (spec hash {str(hash_a)[:16]} vs {str(hash_b)[:16]}), "
            "compared because of --allow-different-scenario"
        )
    elif not hash_a or not hash_b:
        warnings.append("a run has no spec_hash in run.json: cannot check the scenarios match")
    for name, path, meta in (("A", path_a, meta_a), ("B", path_b, meta_b)):
        state = _run_state(meta)
        if state:
            warnings.append(f"run {name} ({path}) {state}: some cases may be missing")
    groups_a, groups_b = _groups(records_a), _groups(records_b)
    common = [key for key in groups_a if key in groups_b]
    if not common:
        raise UserInputError(
            f"no case of {path_a} ({len(groups_a)} cases) is in {path_b} "
            f"({len(groups_b)} cases): nothing to compare",
            fix="compare two runs of the same scenario",
        )
    cases = [
        compare_case(
            case,
            method,
            groups_a[(case, method, site)],
            groups_b[(case, method, site)],
            threshold=threshold,
            alpha=alpha,
            site=site,
        )
        for case, method, site in common
    ]
    cases += fleet_comparisons(records_a, records_b, threshold=threshold, alpha=alpha)
    cases += stream_load_comparisons(records_a, records_b, threshold=threshold, alpha=alpha)
    return Comparison(
        run_a=str(path_a),
        run_b=str(path_b),
        run_id_a=meta_a.run_id or Path(path_a).name,
        run_id_b=meta_b.run_id or Path(path_b).name,
        threshold=threshold,
        alpha=alpha,
        spec_hash_a=str(hash_a) if hash_a else None,
        spec_hash_b=str(hash_b) if hash_b else None,
        differences=metadata_differences(meta_a, meta_b),
        cases=cases,
        only_in_a=[_label(k) for k in groups_a if k not in groups_b],
        only_in_b=[_label(k) for k in groups_b if k not in groups_a],
        warnings=warnings,
        stream_sla=sla_comparisons(records_a, records_b, threshold=threshold, alpha=alpha),
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
    folder_a, folder_b = open_run(run_a), open_run(run_b)
    meta_a, records_a = folder_a.meta, folder_a.records
    meta_b, records_b = folder_b.meta, folder_b.records
    return compare_runs(
        meta_a,
        records_a,
        meta_b,
        records_b,
        path_a=Path(run_a),
        path_b=Path(run_b),
        threshold=threshold,
        alpha=alpha,
        allow_different_scenario=allow_different_scenario,
    )
