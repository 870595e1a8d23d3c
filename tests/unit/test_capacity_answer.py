"""A capacity search told in words, the what-if's move, the campaign folder, and the key
paths --vary and --then take."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness import spec
from harness.capacity import answer as text
from harness.capacity.command import parse_then, value_of
from harness.capacity.evidence import Reading, binding, lines
from harness.core.errors import ScenarioError, UserInputError
from harness.results.campaign import link_step, new_campaign, read_campaign, write_campaign

SLA = {"kind": "load", "seconds": 30.0, "percentile": 95.0, "text": "p95 load time 30 s"}


def step(load: float, verdict: str, figure: float | None, run: str = "r") -> dict[str, Any]:
    return {
        "load": load,
        "verdict": verdict,
        "figure": figure,
        "low": figure,
        "high": figure,
        "repeats": 3,
        "run": run,
        "note": "",
    }


def searched(
    steps: list[dict[str, Any]],
    capacity: float | None,
    fail: float | None,
    reached_max: bool = False,
    bound: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "label": "as written",
        "result": {
            "capacity": capacity,
            "first_fail": fail,
            "reached_max": reached_max,
            "noisy": [],
            "steps": steps,
        },
        "binding": bound,
        "evidence": [],
    }


def quota_line(refusals: int) -> dict[str, Any]:
    reading = {
        "title": "BIND transfers-out 10",
        "text": f"{refusals:,} refusals logged",
        "closeness": 1.0,
    }
    return {
        "candidate": "quota",
        "title": "BIND transfers-out 10",
        "at_fail": reading,
        "at_pass": None,
        "moved": True,
    }


def test_the_answer_names_the_capacity_the_failing_figure_and_the_binding_limit() -> None:
    one = searched(
        [
            step(32, "pass", 20.0),
            step(64, "fail", None),
            step(48, "pass", 29.0),
            step(49, "fail", 52.3),
        ],
        48,
        49,
        bound=quota_line(1214),
    )
    assert text.answer(one, "secondaries", SLA) == (
        "capacity: 48 secondaries within p95 load time 30 s (49 fails: 52.3 s); "
        "binding: BIND transfers-out 10 (1,214 refusals logged at 49)"
    )
    rows = text.curve_rows(one, SLA)
    assert [r[0] for r in rows] == ["32", "48", "49", "64"]
    assert rows[-1][1:3] == ["fail", "not reached"]


def test_a_search_that_never_failed_says_so_and_one_without_a_cause_says_none() -> None:
    top = searched([step(8, "pass", 1.0), step(16, "pass", 2.0)], 16, None, reached_max=True)
    assert text.answer(top, "secondaries", SLA) == (
        "capacity: at least 16 secondaries within p95 load time 30 s (nothing failed up to "
        "--max 16); no limit came close"
    )
    low = searched([step(4, "fail", 40.0)], None, 4)
    assert text.answer(low, "zones", SLA) == (
        "capacity: below 4 zones within p95 load time 30 s (4 fails: 40.0 s); "
        "binding: none stood out"
    )


def test_the_what_if_says_how_far_the_capacity_moved_and_the_next_limit() -> None:
    before = searched([], 2, 3, bound=quota_line(6))
    after = searched([], 16, None, reached_max=True) | {"label": "transfers-out=20"}
    assert text.moved_text(before, after, "secondaries") == (
        "what if transfers-out=20: capacity 2 -> 16 secondaries (+14), at least: --max 16 "
        "passed; next limit: none stood out"
    )


def reading(name: str, closeness: float | None, level: float) -> Reading:
    return Reading(name, name, closeness, level, f"{name} at {level:g}")


def test_the_binding_limit_is_the_closest_that_moved_with_the_load() -> None:
    at_pass = [
        reading("quota", 0.0, 0),
        reading("primary-cpu", 0.85, 1.7),
        reading("ports", 0.1, 0.1),
    ]
    at_fail = [
        reading("quota", 1.0, 14),
        reading("primary-cpu", 0.86, 1.72),
        reading("ports", 0.2, 0.2),
    ]
    table = lines(at_pass, at_fail)
    assert [(line.candidate, line.moved) for line in table] == [
        ("quota", True),
        ("primary-cpu", False),
        ("ports", True),
    ]
    chosen = binding(table)
    assert chosen is not None and chosen.candidate == "quota"
    # Nothing near its limit: none stood out.
    assert binding(lines(at_pass[2:], at_fail[2:])) is None


def test_then_values_are_read_as_toml_and_a_wrong_one_names_the_flag() -> None:
    assert parse_then(["servers.primary.options.transfers-out=20", "zones.preset=tld"]) == {
        "servers.primary.options.transfers-out": 20,
        "zones.preset": "tld",
    }
    with pytest.raises(UserInputError) as caught:
        parse_then(["transfers-out"])
    assert caught.value.key == "--then" and caught.value.exit_status == 2


def test_a_stream_interval_is_varied_as_serials_a_minute() -> None:
    assert value_of("stream.interval", 12) == "5s"
    assert value_of("secondaries.edge.count", 7.0) == 7
    assert text.unit_of("stream.interval") == "serials a minute"
    assert text.unit_of("secondaries.edge.count") == "secondaries"


SCENARIO = """
transports = ["tcp"]
xfr = ["axfr"]
[servers.primary]
kind = "bind"
[servers.secondary]
kind = "knot"
[[secondaries]]
name = "edge"
count = 2
"""


def test_key_paths_set_a_site_by_name_and_a_quoted_sysctl(tmp_path: Path) -> None:
    path = tmp_path / "cap.toml"
    path.write_text(SCENARIO)
    loaded = spec.load(path)
    key = 'hosts.secondary.sysctl."net.ipv4.tcp_tw_reuse"'
    changed = spec.with_values(loaded, {"secondaries.edge.count": 9, key: 1}, "--then")
    assert changed.scenario.fleet[0].count == 9
    assert changed.raw["hosts"]["secondary"]["sysctl"] == {"net.ipv4.tcp_tw_reuse": 1}
    assert loaded.raw["secondaries"][0]["count"] == 2  # the loaded scenario is left as it was
    with pytest.raises(ScenarioError, match="--vary secondaries.far.count: .* not a table path"):
        spec.with_values(loaded, {"secondaries.far.count": 3}, "--vary")
    assert spec.key_parts('a."b.c".d') == ["a", "b.c", "d"]


def test_a_campaign_links_its_steps_run_folders(tmp_path: Path) -> None:
    campaign = new_campaign(tmp_path, "capacity-1")
    run = tmp_path / "capacity-1-01"
    run.mkdir()
    link = link_step(campaign, 1, "4", run)
    assert link.resolve() == run.resolve() and not Path(link.readlink()).is_absolute()
    write_campaign(campaign, {"key": "secondaries.edge.count"})
    assert read_campaign(campaign) == {"key": "secondaries.edge.count"}
    with pytest.raises(UserInputError, match="not a capacity campaign"):
        read_campaign(run)


def test_two_campaigns_compared_say_how_far_the_capacity_moved() -> None:
    def campaign(name: str, capacity: float) -> dict[str, Any]:
        one = searched([], capacity, capacity + 1, bound=quota_line(3))
        one["answer"] = text.answer(one, "secondaries", SLA)
        return {"campaign": name, "unit": "secondaries", "searches": [one]}

    lines_out = text.compare_lines(campaign("old", 4), campaign("new", 9))
    assert lines_out[0].startswith("A old (as written): capacity: 4 secondaries")
    assert lines_out[-1].startswith("from A to B (new): capacity 4 -> 9 secondaries (+5)")
