"""What `xfrbench compare` compares of two catalog runs (pure), one value per repeat and
consumer: a consumer's members of one repeat share its start, its primary and its moment,
so they are no independent samples (the rule every fleet and stream figure follows).

- per case, phase and consumer: the provisioning p95 and the last member's latency (a
  repeat in which the rank fell on a member never served has no value, and counts as an
  attempt without one);
- per case and consumer: the consumer's CPU seconds for the one-member add (what one
  change to a catalog of that size costs it; a zone change's, a rename's and a change of
  ownership's apart) and the members it transferred again after a restart, and after a
  change of ownership the moved members it transferred again ("..., coo") (counts:
  compared as a difference, at least one member).
Each is compared like every figure (compare/case.py) and drift is checked over repeats.
"""

from __future__ import annotations

from harness.compare.case import CaseComparison, compare_sides, side_of
from harness.compare.figures import (
    CATALOG_CPU,
    CATALOG_LAST,
    CATALOG_P95,
    CATALOG_RETRANSFERS,
    Values,
    figure_name,
    scale_of_figure,
)
from harness.core.terms import SERVER_TO_SERVER
from harness.results.catalog import catalog_records
from harness.results.model import TransferRecord

PER_CATALOG_REPEAT = "repeat and consumer: its members' p95 or last, its CPU or re-transfers"
# (figure kind, the phases it is read in (None: all; the first's figure is named by its
# kind alone, as before a change or a rename was measured), the key of extra.catalog)
_READ = (
    (CATALOG_P95, None, ("p95_s",)),
    (CATALOG_LAST, None, ("last_s",)),
    (CATALOG_CPU, ("add", "change", "rename", "coo"), ("consumer_cpu_s",)),
    # A change of ownership's re-transfers of the moved members: "..., coo".
    (CATALOG_RETRANSFERS, ("restart", "coo"), ("transfers_after_restart", "retransfers")),
)


def _values(records: list[TransferRecord]) -> dict[tuple[str, str, str], Values]:
    """(case, consumer, figure) -> one value per repeat, in the order they ran."""
    out: dict[tuple[str, str, str], Values] = {}
    for record in sorted(records, key=lambda r: r.repeat):
        facts = record.extra["catalog"]
        phase = str(facts["phase"])
        for kind, only, keys in _READ:
            if only is not None and phase.split()[0] not in only:  # "add 2": a version
                continue
            figure = kind if only is not None and phase == only[0] else figure_name(kind, phase)
            entry = out.setdefault((record.case, record.host, figure), Values([], 0))
            entry.attempts += 1
            value = next((v for k in keys if (v := facts.get(k)) is not None), None)
            if value is not None:
                entry.values.append(float(value))
                entry.series.setdefault(record.host, []).append(float(value))
    return out


def catalog_comparisons(
    records_a: list[TransferRecord], records_b: list[TransferRecord], **options: float
) -> list[CaseComparison]:
    """Per catalog case, consumer and figure in both runs (module docstring)."""
    chosen_a, chosen_b = catalog_records(records_a), catalog_records(records_b)
    if not chosen_a or not chosen_b:
        return []
    samples_a, samples_b = _values(chosen_a), _values(chosen_b)
    threshold, out = options["threshold"], []
    for (case, host, figure), values_a in samples_a.items():
        values_b = samples_b.get((case, host, figure))
        if values_b is None:
            continue
        scale = scale_of_figure(figure)
        a, b = side_of(values_a, threshold, scale), side_of(values_b, threshold, scale)
        item = compare_sides(case, SERVER_TO_SERVER, a, b, site=host, figure=figure,
                             threshold=threshold, alpha=options["alpha"])  # fmt: skip
        item.per = PER_CATALOG_REPEAT
        out.append(item)
    return out
