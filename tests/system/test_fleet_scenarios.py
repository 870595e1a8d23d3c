"""The shipped fleet scenarios, run for real at small sizes: every copy verified and the
fleet's figures asserted from the records (summary.json's fleet section is built from them).
"""

from __future__ import annotations

import copy
import json
import os
import tomllib
from pathlib import Path
from typing import Any

import pytest

from harness import spec
from harness.report.data import load_report_data
from harness.results.folder import read_run
from harness.run.runner import run_scenario

pytestmark = [
    pytest.mark.root,
    pytest.mark.netns,
    pytest.mark.servers,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for namespaces"),
]

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


def shipped(name: str, change: Any) -> spec.LoadedScenario:
    """A shipped scenario as written, then made small by `change(raw)`."""
    path = SCENARIOS / name
    raw = tomllib.loads(path.read_text())
    raw.setdefault("name", path.stem)
    small = copy.deepcopy(raw)
    change(small)
    base, cases = spec.expand(small, path)
    return spec.LoadedScenario(path, small, base, spec.spec_hash(base), cases)


def test_fleet_toml_with_four_secondaries_on_two_sites(tmp_path: Path) -> None:
    def small(raw: dict[str, Any]) -> None:
        raw |= {"repeats": 2, "timeout": "120s", "xfr": ["axfr", "ixfr"]}
        # 10 k records: enough packets through seoul's 1 % that no drop at all is a
        # 1-in-10^8 event, not a flaky test.
        raw["zones"] |= {"records": 10000, "ixfr_changes": 20}
        frankfurt, _, seoul, *_ = raw["secondaries"]
        seoul["count"] = 2
        seoul["link"] = {"delay": "50ms", "loss": "1%"}  # long and lossy, kept short
        raw["secondaries"] = [frankfurt, seoul]

    loaded = shipped("fleet.toml", small)
    run_dir = run_scenario(loaded, results_root=tmp_path / "results")
    _, records = read_run(run_dir)
    assert len(records) == 2 * 2 * 4  # xfr kinds x repeats x secondaries
    for record in records:
        assert record.ok and record.verified, (record.host, record.error)
    hosts = {(r.host, r.site) for r in records}
    assert hosts == {
        ("frankfurt-1", "frankfurt"),
        ("frankfurt-2", "frankfurt"),
        ("seoul-1", "seoul"),
        ("seoul-2", "seoul"),
    }
    # The far site's link shows in its durations: at least its 100 ms round trip.
    by_site = {
        site: [r.duration_s for r in records if r.site == site] for site in ("frankfurt", "seoul")
    }
    assert min(by_site["seoul"]) > 0.1 > min(by_site["frankfurt"])
    fleet = json.loads((run_dir / "summary.json").read_text())["fleet"]
    assert set(fleet) == {r.case for r in records}
    for case, figures in fleet.items():
        mine = [r for r in records if r.case == case]
        assert figures["secondaries"] == 4 and len(figures["repeats"]) == 2
        for repeat in figures["repeats"]:
            these = [r for r in mine if r.repeat == repeat["repeat"]]
            origin = min(r.phases["notify_sent"] for r in these)
            times = sorted(r.duration_s + r.phases["notify_sent"] - origin for r in these)
            assert repeat["served"] == 4
            assert repeat["first_s"] == pytest.approx(times[0], abs=1e-5)
            assert repeat["last_s"] == pytest.approx(times[-1], abs=1e-5)
            assert repeat["last_site"] == "seoul"
        assert {s["site"] for s in figures["sites"]} == {"frankfurt", "seoul"}
        cost = figures["primary"]
        assert len(cost) == 2 and all(c["tx_bytes"] and c["cpu_s"] is not None for c in cost)
    # The configured loss happened, as the report's link check reads it from the records:
    # seoul's packets were dropped, at a rate consistent with its 1 %; frankfurt has no loss
    # to check.
    checks = load_report_data(run_dir).links

    def ways(site: str) -> list[Any]:
        return [way for check in checks if check.path == site for way in check.directions]

    seoul = ways("seoul")
    assert seoul and sum(way.dropped for way in seoul) > 0
    assert all(way.verdict in ("ok", "too few packets") for way in seoul), seoul
    assert any(way.verdict == "ok" for way in seoul)
    assert ways("frankfurt") and all(way.verdict is None for way in ways("frankfurt"))


def test_fanout_toml_with_one_and_eight_secondaries(tmp_path: Path) -> None:
    def small(raw: dict[str, Any]) -> None:
        raw |= {"repeats": 2, "timeout": "120s"}
        raw["zones"] |= {"records": 2000}
        raw["matrix"] = {"secondaries.edge.count": [1, 8]}

    loaded = shipped("fanout.toml", small)
    run_dir = run_scenario(loaded, results_root=tmp_path / "results")
    _, records = read_run(run_dir)
    assert len(records) == 2 * (1 + 8)
    assert all(r.ok and r.verified for r in records), [r.error for r in records if not r.ok]
    fleet = json.loads((run_dir / "summary.json").read_text())["fleet"]
    sizes = {figures["secondaries"] for figures in fleet.values()}
    assert sizes == {1, 8}
    for case, figures in fleet.items():
        mine = [r for r in records if r.case == case]
        for repeat in figures["repeats"]:
            these = [r for r in mine if r.repeat == repeat["repeat"]]
            assert repeat["served"] == len(these) == figures["secondaries"]
            # Every secondary was seen asking for the SOA and connecting to the primary.
            assert all("connect" in r.phases and "soa_query" in r.phases for r in these)
