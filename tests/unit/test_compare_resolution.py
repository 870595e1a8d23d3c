"""CPU read in coarse steps (a host where no cgroup could be made: /proc's 10 ms clock
ticks) against CPU read from a cgroup (µs): a difference within one step is "cannot tell",
never a regression. A hand-made pair of runs, as a lab run against a netns run was."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.compare.case import CANNOT_TELL, NO_CHANGE, REGRESSION
from harness.compare.family import resolution_problem
from harness.compare.gate import load_and_compare
from harness.core.power import LOG
from harness.results.resources import per_transfer
from tests.unit.test_compare_gate import CASE, changed, make_run

SECONDARY_CPU = "CPU per transfer, secondary"
NETNS = [0.0066, 0.0068, 0.0067, 0.0069, 0.0065, 0.0067]  # cgroup usage: µs steps
TICKS = [0.010] * 6  # /proc: the same work read in 10 ms ticks


def run_of(root: Path, name: str, cpu: list[float], source: str, stated: bool = True) -> Path:
    """A run whose secondary spent `cpu` per transfer, as its sampler read it from
    `source` ("proc": /proc, its lines saying their 10 ms step unless `stated` is False,
    as lines from before the step was written)."""
    folder = make_run(root, name, resources=changed("secondary", cpu=cpu))
    path = folder / "samples.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    for line in lines:
        if line.get("role") == "secondary" and source == "proc":
            line["source"] = "proc"
            if stated:
                line["cpu_resolution_s"] = 0.01
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return folder


def verdict(a: Path, b: Path) -> Any:
    """The gate's result and its secondary's CPU comparison (one case: the figure's own)."""
    result = load_and_compare(a, b)
    (item,) = [c for c in result.cases if c.figure == SECONDARY_CPU]
    return result, item


def test_the_steps_of_each_transfers_cpu_are_kept(tmp_path: Path) -> None:
    folder = run_of(tmp_path, "lab", TICKS, "proc")
    lines = [json.loads(x) for x in (folder / "samples.jsonl").read_text().splitlines()]
    roles = per_transfer(lines)[CASE]
    assert roles["secondary"]["cpu_resolution"] == [0.01] * 6
    assert roles["primary"]["cpu_resolution"] == [1e-6] * 6  # cgroup-v2 lines, unstated


def test_a_difference_within_a_tick_is_cannot_tell_not_a_regression(tmp_path: Path) -> None:
    netns = run_of(tmp_path, "netns", NETNS, "cgroup-v2")
    for stated in (True, False):  # said by the line, or known from its source
        lab = run_of(tmp_path / str(stated), "lab", TICKS, "proc", stated)
        result, item = verdict(netns, lab)
        assert item.verdict == CANNOT_TELL, item.reasons
        assert any("within the values' resolution (10.0 ms steps)" in r for r in item.reasons)
        assert item.b.resolution == 0.01
        assert result.exit_status != 1  # no regression called
    # The same figures both read from cgroups: 6.7 ms against 10 ms is a regression.
    both = run_of(tmp_path / "cgroup", "b", TICKS, "cgroup-v2")
    assert verdict(netns, both)[1].verdict == REGRESSION


def test_a_change_of_many_ticks_is_still_a_regression(tmp_path: Path) -> None:
    netns = run_of(tmp_path, "netns", NETNS, "cgroup-v2")
    lab = run_of(tmp_path / "lab", "lab", [0.040, 0.050, 0.040, 0.050, 0.040, 0.040], "proc")
    assert verdict(netns, lab)[1].verdict == REGRESSION


def test_no_change_is_not_claimed_below_one_step() -> None:
    """10 % of 6.7 ms is under a 10 ms tick: such values could not show the threshold."""
    assert resolution_problem(NO_CHANGE, 0.0067, 0.0068, 0.10, LOG, 0.01) is not None
    assert resolution_problem(NO_CHANGE, 0.5, 0.51, 0.10, LOG, 0.01) is None
    assert resolution_problem(REGRESSION, 0.0067, 0.010, 0.10, LOG, 1e-6) is None
    assert resolution_problem(REGRESSION, 0.0067, 0.010, 0.10, LOG, None) is None
