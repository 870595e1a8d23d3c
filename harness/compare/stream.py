"""What `xfrbench compare` compares of two change-stream runs, beside the per-record
latencies every case compares (pure):

- per case and site (and the fleet), each serial's load time there: when ceil(0.95 n) of
  the site's n secondaries served it (its p95 publication latency, nearest rank), one value
  per serial, compared like any figure (harness/compare/gate.py: medians, bootstrap
  intervals, Mann-Whitney); a serial that did not reach 95 % is a failed value;
- per case, the share of serials whose fleet load time met the SLA, A's [stream] sla
  applied to both runs: a lower share in B is a regression when it is lower by more than
  the threshold (in share points) and Fisher's exact test of the two counts gives p < alpha.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from harness.compare.case import CaseComparison, compare_sides, side_of
from harness.compare.figures import Values
from harness.core.terms import SERVER_TO_SERVER
from harness.results.model import TransferRecord
from harness.results.stream import FLEET, serial_loads, sla_targets, stream_records

LOAD_FIGURE = "stream load time"  # the figure name of per-site load times


def load_samples(records: list[TransferRecord]) -> dict[tuple[str, str], list[float | None]]:
    """(case, site) -> each serial's load time at that site in the order published (None:
    it never reached 95 % of the site); site FLEET is the whole fleet."""
    out: dict[tuple[str, str], list[float | None]] = {}
    for load in sorted(serial_loads(records), key=lambda x: (x.repeat, x.serial)):
        out.setdefault((load.case, load.site), []).append(load.load_s)
    return out


@dataclass
class SlaComparison:
    case: str
    sla_s: float
    met_a: int
    serials_a: int
    met_b: int
    serials_b: int
    share_a: float | None
    share_b: float | None
    change: float | None  # share B - share A, in share points (0.01 = 1 point)
    p_value: float | None  # Fisher's exact test, two-sided
    regression: bool
    verdict: str  # "regression", "improvement" or "no change"

    @property
    def label(self) -> str:
        return f"{self.case}: serials within the SLA ({self.sla_s:g} s)"

    def to_json(self) -> dict[str, Any]:
        return asdict(self) | {"label": self.label}


def _met(records: list[TransferRecord], case: str, sla: float) -> tuple[int, int]:
    loads = [x for x in serial_loads(records) if x.case == case and x.site == FLEET]
    return sum(1 for x in loads if x.load_s is not None and x.load_s <= sla), len(loads)


def sla_comparisons(
    records_a: list[TransferRecord],
    records_b: list[TransferRecord],
    *,
    threshold: float,
    alpha: float,
) -> list[SlaComparison]:
    """Per stream case of A with an SLA and present in B (module docstring)."""
    from scipy.stats import fisher_exact

    chosen_a, chosen_b = stream_records(records_a), stream_records(records_b)
    in_b = {r.case for r in chosen_b}
    out = []
    for case, sla in sla_targets(chosen_a).items():
        if case not in in_b:
            continue
        met_a, n_a = _met(chosen_a, case, sla)
        met_b, n_b = _met(chosen_b, case, sla)
        share_a = met_a / n_a if n_a else None
        share_b = met_b / n_b if n_b else None
        change = p = None
        if share_a is not None and share_b is not None:
            change = share_b - share_a
            table = [[met_a, n_a - met_a], [met_b, n_b - met_b]]
            p = float(fisher_exact(table, alternative="two-sided").pvalue)
        significant = change is not None and p is not None and abs(change) > threshold and p < alpha
        regression = significant and change is not None and change < 0
        verdict = "regression" if regression else "improvement" if significant else "no change"
        out.append(
            SlaComparison(
                case, sla, met_a, n_a, met_b, n_b, share_a, share_b, change, p, regression, verdict
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
        a, b = (side_of(Values([v for v in values if v is not None], len(values)), threshold)
                for values in (values_a, samples_b[(case, site)]))  # fmt: skip
        figure = LOAD_FIGURE if site else f"{LOAD_FIGURE}, fleet"
        out.append(compare_sides(case, SERVER_TO_SERVER, a, b, site=site or None, figure=figure,
                                 threshold=threshold, alpha=options["alpha"]))  # fmt: skip
    return out
