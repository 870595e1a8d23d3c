"""A fleet that does not converge says so, on real servers: one site cut off by 100 % loss
after its first copy, and the fleet's figures from the records of that repeat."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from harness import spec
from harness.measure.protocol import prepare_updates
from harness.plan.case import GroupPlan, plan_case
from harness.results.folder import read_run
from harness.results.store import RunStore
from harness.run.runner import NETNS, resolve_binaries
from harness.run.session import GroupSession, RunContext

pytestmark = [
    pytest.mark.root,
    pytest.mark.netns,
    pytest.mark.servers,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for namespaces"),
]

SCENARIO = """
repeats = 1
timeout = "20s"
transports = ["tcp"]
xfr = ["axfr"]
trigger = "notify"
[zones]
preset = "tld"
records = 500
origin = "lost.example."
[servers.primary]
kind = "bind"
[servers.secondary]
kind = "bind"
[[secondaries]]
name = "near"
count = 2
link = { delay = "2ms" }
[[secondaries]]
name = "far"
link = { delay = "20ms" }
"""


def test_a_site_behind_total_loss_leaves_the_fleet_2_of_3_served(tmp_path: Path) -> None:
    path = tmp_path / "lost.toml"
    path.write_text(SCENARIO)
    loaded = spec.load(path)
    plan = plan_case(loaded.cases[0])
    binaries = resolve_binaries([plan], NETNS, loaded.path)[0][plan.name]
    lost_host = next(h.name for h in plan.secondaries if h.site == "far")
    near = sorted(h.name for h in plan.secondaries if h.site == "near")
    with RunStore.create(tmp_path / "results", "lost", None, {}) as store:
        run = RunContext(store.run_id, store.append, {plan.name: binaries}, NETNS)
        with GroupSession(GroupPlan((plan,)), store.folder / "cases" / "000", run) as session:
            assert session.live is not None and session.bed is not None
            session.serial = prepare_updates(session.live)  # every site has its first copy
            # From here on the far site is behind 100 % loss: the router drops every packet
            # to or from it (the rules go with the router's namespace).
            far = session.bed.hosts[lost_host].address
            for way in ("-s", "-d"):
                session.bed.router.run(["iptables", "-I", "FORWARD", "1", way, far, "-j", "DROP"])
            session.run(0, 1, 1, 0)
    _, records = read_run(store.folder)
    assert sorted((r.host, r.counts) for r in records) == sorted(
        [(lost_host, False), *((host, True) for host in near)]
    )
    lost = next(r for r in records if r.host == lost_host)
    assert lost.failure == "timeout" and f"{lost_host} never served" in (lost.error or "")
    # The primary's NOTIFY to it left (the wire saw it): the repeat's origin may be it.
    assert "notify_sent" in lost.phases
    origin = min(r.phases["notify_sent"] for r in records)
    (case,) = json.loads((store.folder / "summary.json").read_text())["fleet"].values()
    (repeat,) = case["repeats"]
    assert repeat["served_of"] == "2 of 3 served" and not repeat["converged"]
    assert repeat["last_s"] is None and repeat["p95_s"] is None and repeat["last_site"] is None
    assert [m["host"] for m in repeat["missing"]] == [lost_host]
    assert "timed out" in repeat["missing"][0]["failure"]
    served = sorted(r.duration_s + r.phases["notify_sent"] - origin for r in records if r.counts)
    assert repeat["first_s"] == pytest.approx(served[0], abs=1e-5)
    assert repeat["p50_s"] == pytest.approx(served[1], abs=1e-5)  # rank 2 of 3
    assert case["median_last_s"] is None and case["converged"] == "0 of 1 repeats converged"
