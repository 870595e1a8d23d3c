"""`run --json` and `report --json`: the first screen's figures as one JSON object (pure).

The same numbers the terminal summary and report.html's first screen show, from the same
``ReportData``: failed of counted with the reasons, what each transport costs, where the
time went, whether the link did what was asked, how close to the bound, the cases, the
resources and a fleet's figures. Seconds, bytes and bit/s, as in transfers.jsonl; a figure
that cannot be a number (an infinite bound) is null.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from harness.report.data import ReportData

JSON_VERSION = 1  # bumps when a key changes meaning


def _plain(value: Any) -> Any:
    """Dataclasses as dicts, tuples as lists, and no NaN or infinity (JSON has none)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def first_screen(data: ReportData) -> dict[str, Any]:
    run = data.run
    cases = []
    for row in data.cases:
        entry = _plain(row)
        entry["label"] = row.label
        entry["model_bound_bps"] = row.model_bound_bps
        entry["failures"] = data.failures.case_notes(row.label)
        cases.append(entry)
    return {
        "json_version": JSON_VERSION,
        "run": {
            "run_id": run.run_id,
            "run_dir": run.run_dir,
            "scenario": run.scenario,
            "spec_hash": run.spec_hash,
            "state": run.state,
            "started": run.started,
            "finished": run.finished,
            "servers": _plain(run.servers),
            "link_backend": run.link_backend,
            "link": data.uniform_link,
            "host": run.hostname,
            "kernel": run.kernel,
            "git_commit": run.git_commit,
        },
        "headline": data.failures.headline,
        "failures": data.failures.to_json(),
        "warnings": data.warnings,
        "transports": _plain(data.transports),
        "phases": _plain(data.phases),
        "links": _plain(data.links),
        "bounds": [_plain(row) | {"ratio": row.ratio} for row in data.bounds],
        "bounds_missing": _plain(data.bounds_missing),
        "cases": cases,
        "resources": _plain(data.resources),
        "resources_source": data.resources_source,
        "fleet": _plain(data.fleet),
    }
