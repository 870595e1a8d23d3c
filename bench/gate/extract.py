"""Extract the calibration fixture of `xfrbench compare` from a real run folder: per case
and figure, the values the gate reads (compare/figures.py), in the order they ran.

    .venv/bin/python bench/gate/extract.py /work/data/quick20-a \
        > tests/fixtures/compare/quick20-a.json

The fixture is what tests/unit/test_compare_calibration.py draws its A/A splits from: the
durations of each case and each server role's CPU per transfer (and memory and sockets per
transfer, when the run recorded them), rounded to 4 significant digits (a microsecond of a
70 ms transfer; the gate's statistics see nothing finer).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from harness.compare.figures import duration_values, resource_values
from harness.results.folder import open_run


def _round(value: float) -> float:
    return float(f"{value:.4g}")


def extract(path: Path) -> dict[str, object]:
    folder = open_run(path)
    figures: dict[str, dict[str, list[float]]] = {}
    values = duration_values(folder.records) | resource_values(folder)
    for (case, _method, _site, figure), found in sorted(values.items()):
        if not found.single:
            figures.setdefault(case, {})[figure] = [_round(v) for v in found.values]
    return {
        "run": folder.meta.run_id,
        "scenario": folder.meta.name,
        "repeats": folder.meta.scenario.get("repeats"),
        "made_by": "bench/gate/extract.py " + path.name,
        "cases": figures,
    }


def dumps(data: dict[str, object]) -> str:
    """JSON with one line per case and figure: small, and a diff shows what changed."""
    cases = data["cases"]
    assert isinstance(cases, dict)
    head = {k: v for k, v in data.items() if k != "cases"}
    lines = [json.dumps(head)[:-1] + ', "cases": {']
    for index, (case, figures) in enumerate(cases.items()):
        lines.append(f"  {json.dumps(case)}: {{")
        rows = [f"    {json.dumps(f)}: {json.dumps(v)}" for f, v in figures.items()]
        lines.append(",\n".join(rows))
        lines.append("  }" + ("," if index < len(cases) - 1 else ""))
    return "\n".join(lines) + "\n}}\n"


if __name__ == "__main__":
    sys.stdout.write(dumps(extract(Path(sys.argv[1]))))
