"""Running shipped scenarios from the benches, changed where a bench needs it.

`run_changed` runs a scenario file through harness.run.runner.run_scenario (what `xfrbench run`
calls) in a child process of its own, so the run's recorded driver RSS and CPU are the
run's alone, with `changes` applied to the file's table first: dotted keys
("zones.records", "secondaries.edge.count" for the site named edge, "matrix") to values.
Lines printed by the run go to the terminal as they would from `xfrbench run`.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from harness import spec  # noqa: E402
from harness.run.runner import run_scenario  # noqa: E402


def apply_changes(raw: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """`raw` with each dotted key set; a key through `secondaries` names a site."""
    for dotted, value in changes.items():
        parts = dotted.split(".")
        table: Any = raw
        for part in parts[:-1]:
            if isinstance(table, list):  # [[secondaries]]: pick the site by name
                table = next(t for t in table if t.get("name") == part)
            else:
                table = table.setdefault(part, {})
        table[parts[-1]] = value
    return raw


def run_changed(
    scenario: Path, changes: dict[str, Any], results: Path, run_id: str
) -> tuple[Path, float]:
    """Run `scenario` with `changes`; returns the run folder and the wall seconds it took."""
    started = time.monotonic()
    argv = [sys.executable, __file__, str(scenario), json.dumps(changes), str(results), run_id]
    subprocess.run(argv, check=True, cwd=REPO)
    return results / run_id, time.monotonic() - started


def _child(path: str, changes: str, results: str, run_id: str) -> None:
    scenario = Path(path)
    raw = apply_changes(tomllib.loads(scenario.read_text()), json.loads(changes))
    raw.setdefault("name", scenario.stem)
    base, cases = spec.expand(raw, scenario)
    loaded = spec.LoadedScenario(scenario, raw, base, spec.spec_hash(base), cases)
    run_scenario(loaded, results_root=Path(results), run_id=run_id)


if __name__ == "__main__":
    _child(*sys.argv[1:])
