"""`xfrbench compare` as an upgrade gate: besides durations it compares each role's CPU,
memory, connections and TIME_WAIT sockets left, per transfer, and failure counts; any
regression is exit 1, a figure missing in B is exit 4, the one memory peak per run is
reported and never gated. Synthetic runs whose records and samples are written here, with
one figure changed."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from harness.cli import main
from harness.compare.figures import MEMORY, Values, figure_name
from harness.compare.gate import (
    FAILING_IN_BOTH,
    MISSING_IN_B,
    MORE_FAILURES,
    NEW_FAILURES,
    NO_CHANGE,
    REGRESSION,
    gate_values,
    load_and_compare,
)
from harness.core.terms import SERVER_TO_SERVER
from harness.results import RunStore, TransferRecord

CASE = "bind-bind/tcp/axfr"
OTHER = "bind-bind/xot/axfr"
DURATIONS = [0.070, 0.071, 0.069, 0.072, 0.068, 0.0705]
MIB = 1024 * 1024
META = {
    "scenario_name": "synthetic",
    "spec_hash": "ab" * 32,
    "servers": {"bind@/usr/sbin/named": {"kind": "bind", "path": "/usr/sbin/named",
                                         "version": "9.18.49"}},
    "link_backend": "linkem",
    "host": {"hostname": "vm", "kernel": "6.1.0"},
}  # fmt: skip
# per role, per transfer: CPU seconds, the namespace's TIME_WAIT sockets at the transfer's
# end (no transfer's figure: never compared), peak RSS
BASE = {
    "primary": {"cpu": [0.0020, 0.0021, 0.0019, 0.0022, 0.0020, 0.0021], "tw": 20, "rss": 24},
    "secondary": {"cpu": [0.0023, 0.0024, 0.0022, 0.0025, 0.0023, 0.0024], "tw": 30, "rss": 67},
}
# per role: connections opened and TIME_WAIT sockets left by each transfer on its own pair
# (records' extra["sockets"], measure/watch.py)
SOCKETS = {"primary": {"connections": 1, "time_wait_left": 0},
           "secondary": {"connections": 1, "time_wait_left": 1}}  # fmt: skip


def record(
    name: str,
    case: str,
    repeat: int,
    duration: float | None,
    sockets: dict[str, Any] | None = SOCKETS,
    **changes: Any,
):
    fields: dict[str, Any] = {
        "run_id": name, "case": case, "repeat": repeat, "primary_kind": "bind",
        "secondary_kind": "bind", "host": "secondary", "site": None,
        "transport": case.split("/")[1], "xfr": "axfr", "zone": "q.", "serial": repeat + 1,
        "records": 3, "bytes": 200, "messages": 1, "duration_s": duration,
        "started_at": 1000.0 + repeat, "ok": duration is not None,
        "error": None if duration is not None else "timeout after 60 s: never served",
        "verified": duration is not None, "trigger": "notify",
        "extra": {"sockets": sockets} if sockets is not None else {},
    }  # fmt: skip
    fields.update(changes)
    return TransferRecord(**fields)


def samples(case: str, figures: dict[str, dict[str, Any]], t0: float) -> list[dict[str, Any]]:
    """transfer-start and -end marks per role and repeat, as harness/observe/sampler.py
    writes them: cumulative CPU, TIME_WAIT and memory at each mark."""
    out = []
    for role, pid in (("primary", 1), ("secondary", 2)):
        mine = figures[role]
        cpu = 1.0
        for repeat, spent in enumerate(mine["cpu"], 1):
            t = t0 + 2 * repeat
            for event, tw in (("transfer-start", 0), ("transfer-end", mine["tw"] + repeat % 2)):
                out.append({
                    "t": t, "event": event, "case": case, "repeat": repeat, "role": role,
                    "host": role, "server": "bind", "pid": pid, "source": "cgroup-v2",
                    "cpu_user_s": cpu, "cpu_system_s": 0.0,
                    "rss_bytes": mine["rss"] * MIB, "peak_rss_bytes": mine["rss"] * MIB,
                    "tcp": {"time_wait": tw}, "ephemeral_ports_in_use": 0,
                    "retrans_segs": 0, "tcp_timeouts": 0,
                })  # fmt: skip
                cpu += spent
                t += 0.5
            # A periodic sample between transfers: the case's memory peak may come from one,
            # outside every transfer's marks (`peak`; default: the transfers' own).
            out.append({
                "t": t + 0.2, "case": case, "role": role, "host": role, "server": "bind",
                "pid": pid, "source": "cgroup-v2", "cpu_user_s": cpu, "cpu_system_s": 0.0,
                "rss_bytes": mine.get("peak", mine["rss"]) * MIB,
                "peak_rss_bytes": mine.get("peak", mine["rss"]) * MIB,
                "tcp": {"time_wait": 0}, "ephemeral_ports_in_use": 0,
                "retrans_segs": 0, "tcp_timeouts": 0,
            })  # fmt: skip
    return out


def make_run(
    root: Path,
    name: str,
    durations: dict[str, list[float | None]] | None = None,
    resources: dict[str, Any] | None = None,
    sockets: dict[str, Any] | None = SOCKETS,
    with_samples: bool = True,
) -> Path:
    durations = durations or {CASE: list(DURATIONS)}
    lines = []
    with RunStore.create(root, name, None, json.loads(json.dumps(META))) as store:
        for index, (case, values) in enumerate(durations.items()):
            for repeat, duration in enumerate(values, 1):
                store.append(record(name, case, repeat, duration, sockets))
            lines += samples(case, resources or BASE, 100.0 * index)
        if with_samples:
            text = "".join(json.dumps(s) + "\n" for s in lines)
            (store.folder / "samples.jsonl").write_text(text)
    return store.folder


def changed(role: str, **figures: Any) -> dict[str, Any]:
    out = json.loads(json.dumps(BASE))
    out[role].update(figures)
    return out


def figures(result: Any) -> dict[str, Any]:
    return {item.label: item for item in result.cases}


def run_cli(capsys: pytest.CaptureFixture[str], *args: Any) -> tuple[int, str]:
    status = main(["compare", *map(str, args)])
    return status, capsys.readouterr().out


def test_a_run_against_itself_compares_every_figure(tmp_path: Path) -> None:
    a = make_run(tmp_path, "a")
    result = load_and_compare(a, a)
    assert sorted(figures(result)) == sorted([
        CASE,
        f"{CASE}: CPU per transfer, primary",
        f"{CASE}: CPU per transfer, secondary",
        f"{CASE}: connections per transfer, primary",
        f"{CASE}: connections per transfer, secondary",
        f"{CASE}: TIME_WAIT left per transfer, primary",
        f"{CASE}: TIME_WAIT left per transfer, secondary",
        f"{CASE}: memory per transfer, primary",
        f"{CASE}: memory per transfer, secondary",
        f"{CASE}: peak memory, primary",
        f"{CASE}: peak memory, secondary",
    ])  # fmt: skip
    assert result.identical and result.exit_status == 0
    # one connection per transfer in every transfer of both runs: no test can find a
    # difference in it, so it is not one of Holm's m (Tarone)
    connections = figures(result)[f"{CASE}: connections per transfer, primary"]
    assert not connections.in_family and connections.verdict == NO_CHANGE
    assert result.not_recorded == []  # every figure the gate knows was recorded


def test_a_cpu_only_regression_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    a = make_run(tmp_path, "a")
    doubled = [2 * v for v in BASE["secondary"]["cpu"]]
    b = make_run(tmp_path, "b", resources=changed("secondary", cpu=doubled))
    result = load_and_compare(a, b)
    items = figures(result)
    cpu = items[f"{CASE}: CPU per transfer, secondary"]
    assert cpu.verdict == REGRESSION and cpu.change == pytest.approx(1.0)
    assert cpu.p_value is not None and cpu.p_value < 1e-6
    assert [c.label for c in result.regressions] == [cpu.label]
    assert items[CASE].verdict == NO_CHANGE  # the durations did not move
    status, out = run_cli(capsys, a, b)
    assert status == 1
    assert "CPU per transfer, secondary" in out
    assert "tcp/axfr, secondary │ 2.35 ms ± 5% │ 4.70 ms ± 5% │ +100.0% [+" in out


def test_the_peak_memory_per_run_is_reported_not_gated(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One peak per case and run has no spread, and two runs' processes differ by more
    than a threshold in it: shown, never a regression."""
    a = make_run(tmp_path, "a")
    b = make_run(tmp_path, "b", resources=changed("secondary", peak=134))
    result = load_and_compare(a, b)
    memory = figures(result)[f"{CASE}: peak memory, secondary"]
    assert memory.single and memory.p_value is None and memory.change == pytest.approx(1.0)
    assert memory.verdict == "reported" and not memory.regression
    assert result.exit_status == 0
    status, out = run_cli(capsys, a, b)
    assert status == 0
    assert "67 MiB │ 134 MiB │ +100.0% (one value per run: reported, not gated)" in out


def _memory(values: list[float]) -> dict[Any, Values]:
    key = (CASE, SERVER_TO_SERVER, None, figure_name(MEMORY, "secondary"))
    return {key: Values(values, len(values), {"": values})}


def test_memory_per_transfer_is_gated_above_its_floor() -> None:
    """Memory per transfer is compared like CPU: +30 % on 40 MiB is a regression; +1.8 MiB
    (a process-level offset the reference run showed between two processes of one server
    and config) is under the 4 MiB floor's half and is not."""
    mib = 1024 * 1024
    base = [(41.4 + 0.1 * (i % 5)) * mib for i in range(12)]
    judged = gate_values(_memory(base), _memory([1.3 * v for v in base]))
    (item,) = judged.cases
    assert item.verdict == REGRESSION and item.threshold == pytest.approx(0.10)
    offset = gate_values(_memory(base), _memory([v + 1.8 * mib for v in base]))
    (item,) = offset.cases
    assert item.p_value is not None and item.p_value < 1e-6  # sure, and too small to count
    assert item.verdict == NO_CHANGE and not item.regression


def test_time_wait_left_per_transfer_regression_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every transfer of B leaves a TIME_WAIT socket on the primary where A's left none: a
    count's difference of 1, its floor, with no spread at all."""
    a = make_run(tmp_path, "a")
    more = json.loads(json.dumps(SOCKETS))
    more["primary"]["time_wait_left"] = 1
    b = make_run(tmp_path, "b", sockets=more)
    result = load_and_compare(a, b)
    tw = figures(result)[f"{CASE}: TIME_WAIT left per transfer, primary"]
    assert tw.verdict == REGRESSION and tw.change == 1.0 and tw.scale == "absolute"
    assert [c.label for c in result.regressions] == [tw.label]
    status, out = run_cli(capsys, a, b)
    assert status == 1 and "TIME_WAIT left per transfer" in out and "+1 [+1, +1]" in out


def test_a_figure_missing_in_b_cannot_tell(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """B without samples (no CPU) or without sockets: the figures A had are named, and the
    verdict is cannot tell, never a silent pass; a run that recorded neither says so."""
    a = make_run(tmp_path, "a")
    b = make_run(tmp_path, "b", with_samples=False, sockets=None)
    result = load_and_compare(a, b)
    missing = [c for c in result.cases if c.verdict == MISSING_IN_B]
    assert {c.figure for c in missing} >= {"CPU per transfer, secondary",
                                           "TIME_WAIT left per transfer, primary"}  # fmt: skip
    assert result.exit_status == 4
    status, out = run_cli(capsys, a, b)
    assert status == 4 and "cannot tell: not recorded in B" in out
    c = make_run(tmp_path, "c", with_samples=False, sockets=None)
    result = load_and_compare(c, c)
    assert "CPU per transfer" in result.not_recorded and result.exit_status == 0


def test_a_new_failure_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One of six transfers failed in B, none in A: no test can call 1 of 6 significant,
    but a case that failed in B and not in A is a regression."""
    a = make_run(tmp_path, "a")
    b = make_run(tmp_path, "b", {CASE: [*DURATIONS[:5], None]})
    result = load_and_compare(a, b)
    failures = figures(result)[f"{CASE}: failures"]
    assert failures.verdict == NEW_FAILURES and failures.regression
    assert failures.p_value is not None and failures.p_value > 0.05
    assert failures.failure_kinds["b"] == {"timed out": 1}
    status, out = run_cli(capsys, a, b)
    assert status == 1
    assert "0 of 6 │ 1 of 6 │ new failures: 1 timed out (p=0.387) regression" in out


def test_more_failures_by_the_exact_test(tmp_path: Path) -> None:
    a = make_run(tmp_path, "a", {CASE: [0.07] * 10 + [None] * 2})
    b = make_run(tmp_path, "b", {CASE: [0.07] * 2 + [None] * 10})
    failures = figures(load_and_compare(a, b))[f"{CASE}: failures"]
    assert failures.verdict == MORE_FAILURES and failures.regression and failures.in_family
    assert failures.p_value is not None and failures.p_value < 0.01


def test_a_case_failing_in_both_runs_is_listed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = {CASE: list(DURATIONS), OTHER: [None] * 6}
    a = make_run(tmp_path, "a", runs)
    b = make_run(tmp_path, "b", runs)
    result = load_and_compare(a, b)
    failing = figures(result)[f"{OTHER}: failures"]
    assert failing.verdict == FAILING_IN_BOTH and not failing.regression
    assert [c.case_label for c in result.failing_in_both] == [OTHER]
    # the same values, failures included: a run compared with its twin says so
    assert result.identical
    status, out = run_cli(capsys, a, b)
    assert status == 0
    assert "(a run compared with itself?)" in out
    assert f"1 case(s) failing in both runs: {OTHER}" in out


def test_the_table_is_benchstat_like(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    a = make_run(tmp_path, "a", {CASE: list(DURATIONS), OTHER: list(DURATIONS)})
    slower = [1.3 * v for v in DURATIONS]
    b = make_run(tmp_path, "b", {CASE: list(DURATIONS), OTHER: slower})
    status, out = run_cli(capsys, a, b)
    lines = out.splitlines()
    assert status == 1
    start = lines.index("duration (trigger to served)")
    table = "\n".join(lines[start : start + 8])
    assert "│ tcp            │ 70.1 ms ± 3% │ 70.1 ms ± 3% │ ~ (identical)" in table
    assert "│ xot            │ 70.1 ms ± 3% │ 91.2 ms ± 3% │ +30.0% [+" in table
    assert "│ all cases (2)  │      70.1 ms │      80.0 ms │ +14.0% [+" in table
    assert "2 regression(s): bind-bind/xot/axfr, all cases: duration (exit 1)" in out
    assert "failures: none in either run" in out


def test_json_keeps_its_shape_and_adds_the_figures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = make_run(tmp_path, "a")
    b = make_run(tmp_path, "b", {CASE: [*DURATIONS[:5], None]},
                 resources=changed("secondary", peak=134))  # fmt: skip
    status, out = run_cli(capsys, a, b, "--json")
    data = json.loads(out)
    assert status == 1 and data["exit_status"] == 1
    for key in ("run_a", "run_b", "threshold", "resource_threshold", "alpha", "families",
                "same_scenario", "differences", "cases", "only_in_a", "only_in_b", "warnings",
                "issues", "regressions", "cannot_tell", "not_recorded", "identical"):  # fmt: skip
        assert key in data, key
    by_label = {c["label"]: c for c in data["cases"]}
    assert by_label[CASE]["a"]["n"] == 6 and by_label[CASE]["unit"] == "s"
    memory = by_label[f"{CASE}: peak memory, secondary"]
    assert memory["unit"] == "bytes" and memory["b"]["median_s"] == 134 * MIB
    assert data["regressions"] == [f"{CASE}: failures"]
    assert math.isclose(by_label[CASE]["mde"], by_label[CASE]["mde"])


def test_runs_that_differ_only_in_their_servers_compare(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An upgrade gate compares the same experiment on two server versions: scenarios that
    differ only in servers.*.suite or binary compare without --allow-different-scenario."""
    scenario = {"name": "quick", "repeats": 6, "servers": {"secondary": {"kind": "bind"}}}
    upgraded = json.loads(json.dumps(scenario))
    upgraded["servers"]["secondary"]["suite"] = "bookworm-backports"
    upgraded["name"] = "quick-9.20"  # a scenario's name (its file's, by default) may differ
    other = json.loads(json.dumps(scenario)) | {"repeats": 3}
    a = make_run(tmp_path, "a")
    b = make_run(tmp_path, "b")
    c = make_run(tmp_path, "c")
    for folder, content, digest in ((a, scenario, "ab"), (b, upgraded, "cd"), (c, other, "ef")):
        meta = json.loads((folder / "run.json").read_text())
        meta["scenario"], meta["spec_hash"] = content, digest * 32
        (folder / "run.json").write_text(json.dumps(meta))
    result = load_and_compare(a, b)
    assert not result.warnings
    assert [str(d) for d in result.differences] == [
        "servers.secondary.suite: (default) -> bookworm-backports"
    ]
    status, out = run_cli(capsys, a, b)
    assert status == 0
    assert "the runs differ in:\n  servers.secondary.suite: (default) -> bookworm-backports" in out
    status, out = run_cli(capsys, a, c)
    assert status == 2  # repeats differ: another experiment
