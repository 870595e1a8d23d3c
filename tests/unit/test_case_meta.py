"""case.json has one builder (results.meta.case_meta) and one writer (results.store): the
namespace session and the inventory session write the same keys for the same plan, the
model bound included."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness import spec
from harness.compose.backend import Backend
from harness.plan.case import GroupPlan, plan_case
from harness.results.folder import open_run
from harness.results.store import RunStore
from harness.run.remote import RemoteSession
from harness.run.session import GroupSession, RunContext
from harness.servers.binaries import ServerBinary

SCENARIO = """\
name = "meta"
repeats = 1
transports = ["tcp", "xot-tsig"]
xfr = ["axfr"]
[servers]
primary = { kind = "knot" }
secondary = { kind = "bind" }
[link]
delay = "20ms"
rate = "100mbit"
"""
SYSCTLS = {
    "net.ipv4.tcp_rmem": "4096 131072 6291456",
    "net.ipv4.tcp_wmem": "4096 16384 4194304",
    "net.ipv4.tcp_congestion_control": "cubic",
}


class DescribedBed:
    """What a session asks of its testbed when it writes case.json: its description."""

    def describe(self) -> dict[str, Any]:
        return {"topology": "router", "hosts": {h: {"sysctls": SYSCTLS} for h in HOSTS}}


class DescribedFleet:
    """What a remote session asks of its fleet when it writes case.json."""

    def describe(self) -> dict[str, Any]:
        return {"hosts": sorted(HOSTS)}


HOSTS = ("primary", "secondary")


def test_local_and_remote_sessions_write_the_same_case_json_keys(tmp_path: Path) -> None:
    scenario = tmp_path / "meta.toml"
    scenario.write_text(SCENARIO)
    plans = [plan_case(case) for case in spec.load(scenario).cases]
    group = GroupPlan(tuple(plans))
    binaries = {
        "primary": ServerBinary("knot", Path("/usr/sbin/knotd"), "3.3.4"),
        "secondary": ServerBinary("bind", Path("/usr/sbin/named"), "9.18.24"),
    }
    per_case = {plan.name: binaries for plan in plans}
    written = {}
    for backend in ("netns", "inventory"):
        store = RunStore.create(tmp_path / backend, "run")
        run = RunContext("run", store.append, per_case, Backend())
        visit = store.folder / "cases" / "001-meta"
        if backend == "netns":
            session = GroupSession(group, visit, run)
            session.bed = DescribedBed()  # type: ignore[assignment]
            session._bounds()
        else:
            session = RemoteSession(group, visit, RunContext(**{**vars(run), "remote": None}))
            session.fleet = DescribedFleet()  # type: ignore[assignment]
        session._write_case_files()
        store.finish()
        written[backend] = {name: m for name, m in open_run(store.folder).case_metas.items()}
        files = sorted(visit.glob("*/case.json"))
        assert len(files) == 2  # one folder per case of the visit
        written[backend + " keys"] = {f.parent.name: set(json.loads(f.read_text())) for f in files}
    assert written["netns keys"] == written["inventory keys"]
    local, remote = written["netns"], written["inventory"]
    assert local.keys() == remote.keys() == {plan.name for plan in plans}
    for name, meta in local.items():
        assert meta.bound_bps["model"] > 0  # the emulated link's bound
        assert meta.backend == "netns" and remote[name].backend == "inventory"
        assert remote[name].bound_bps == {}  # a real path: no model to bound it
        assert (meta.transport, meta.axes) == (remote[name].transport, remote[name].axes)
        assert meta.servers == remote[name].servers
