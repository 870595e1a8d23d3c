"""One fault scenario, as a user writes it, run by the one case engine on netns and on a
lab of hosts reached over SSH (`xfrbench run` and `xfrbench run --inventory`), asserted
alike in both records: a reset armed on every secondary's link (linkem's own account of the
cut: its reset events, both resets sent) and a secondary killed and started again (the
pids), every secondary healed, or named stuck with its own account and freed by one new
NOTIFY, every copy verified, and nothing left behind. On the lab, each secondary host's
linkem takes the fault through its agent (remote/linkctl.py), its times on the
controller's clock.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from harness.lab import Lab
from harness.link import linkem
from harness.results.folder import read_run
from harness.results.model import TransferRecord
from tests.system.test_inventory_lab import XFRBENCH, _left_on_controller
from tests.system.test_inventory_link import assert_nothing_left
from tests.system.test_inventory_link import lab as link_lab

pytestmark = [
    pytest.mark.root,
    pytest.mark.netns,
    pytest.mark.servers,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for namespaces"),
]

REPOSITORY = Path(__file__).resolve().parents[2]
lab = link_lab  # its lab fixture (near and far), built for this module's group
# A small fleet on two sites behind a 10 ms link (so that a transfer takes round trips):
# a reset once 100 kB crossed each secondary's link, every link's rate down to 400 kbit/s
# for 2 s (linkem's own bottleneck, on a host too), and the far secondary killed 0.3 s
# after the NOTIFY and started again 2 s later. Each fault is a case of its own.
SCENARIO = """
repeats = 1
timeout = "5s"
transports = ["tcp"]
xfr = ["axfr"]
trigger = "notify"
[zones]
preset = "tld"
records = 20000
origin = "faults.example."
[servers.primary]
kind = "bind"
[servers.secondary]
kind = "bind"
[link]
delay = "10ms"
[[secondaries]]
name = "near"
[[secondaries]]
name = "far"
[[faults]]
kind = "reset"
after_bytes = "100kB"
[[faults]]
kind = "slow-primary"
at = "0.05s"
rate = "400kbit"
duration = "2s"
[[faults]]
kind = "secondary-kill"
at = "0.3s"
duration = "2s"
target = "far"
"""


def _run(tmp_path: Path, inventory: Path | None) -> tuple[Path, list[TransferRecord]]:
    """The scenario run by the CLI, on netns or on the inventory's hosts (a secondary a
    fault left stuck fails its record: asserted below, not by the exit status)."""
    scenario = tmp_path / "faults.toml"
    scenario.write_text(SCENARIO)
    where = [] if inventory is None else ["--inventory", str(inventory)]
    result = subprocess.run(
        [*XFRBENCH, "run", *where, str(scenario), "--results", str(tmp_path), "--run-id",
         "faults", "--allow-failures"],
        cwd=REPOSITORY, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    meta, records = read_run(tmp_path / "faults")
    assert meta.interrupted is False
    return tmp_path / "faults", records


def _healed_or_named_stuck(record: TransferRecord) -> None:
    """Healed, or stuck and named so with its own account (its zone's status) and freed by
    one new NOTIFY (BIND retries a reset transfer at its SOA's retry, minutes away)."""
    fault = record.extra["fault"]
    assert fault["not_as_asked"] is None and fault["error"] is None, record.error
    assert "failures" in fault["server"]  # its log read on its host, either way
    if fault["stuck"]:
        assert record.failure == "timeout" and "stuck" in (record.error or ""), record.error
        assert "faults.example" in fault["account"]["status"], fault["account"]
        assert fault["renotify"]["evidence"]["status"] == 0 and fault["freed_by_notify"]
    else:
        assert record.ok and fault["served_s"] is not None, record.error


def _log(run: Path, host: str) -> str:
    (visit,) = sorted((run / "cases").iterdir())  # the two faults' cases share one visit
    return (visit / host / "named.log").read_text()


def _assert_faults(run: Path, records: list[TransferRecord]) -> None:
    """What both places must show, from the records and the servers' logs alone."""
    by = {(r.extra["fault"]["kind"], r.site): r for r in records}
    kinds = ("reset", "secondary-kill", "slow-primary")
    assert sorted(by) == [(k, s) for k in kinds for s in ("far", "near")]
    host = {site: by[("reset", site)].host for site in ("near", "far")}
    for record in records:
        _healed_or_named_stuck(record)
        assert record.verified, record.error  # the copy read back at the end is right
    # The reset: linkem's own account, each secondary's link cut by two resets once its
    # 100 kB had crossed (the fault began with the first: its event is the record's
    # evidence; each link's is in its linkem's stats, on netns the router's, on the lab
    # each host's), and BIND saying its transfer was reset.
    (visit,) = sorted((run / "cases").iterdir())
    stats = [json.loads(p.read_text()) for p in visit.rglob("linkem-stats.json")]
    for site in ("near", "far"):
        fault = by[("reset", site)].extra["fault"]
        assert fault["targeted"] and fault["fired_s"] is not None
        assert fault["fired_s"] >= fault["began_s"] >= 0, fault
        assert _events(fault["evidence"], "reset"), fault["evidence"]
        (cut,) = [e for e in _events(stats, "reset") if e["direction"] == f"{host[site]} forward"]
        assert len(cut["detail"]["resets"]) == 2 and not cut["detail"]["failed"], cut
        assert "failed while receiving responses: connection reset" in _log(run, host[site])
    # The slow primary: each forward way limited to 400 kbit/s and back to none, and no
    # more crossing while it lasted than 2 s at that rate (and the bottleneck's queue).
    rates = [e for e in _events(stats, "applied") if "rate_bps" in e["detail"]["state"]]
    for site in ("near", "far"):
        mine = [e["detail"]["state"]["rate_bps"] for e in rates
                if e["direction"] == f"{host[site]} forward"]  # fmt: skip
        assert 400_000 in mine and mine[-1] == 0, mine  # (the visit's other cases' too)
        slow = by[("slow-primary", site)].extra["fault"]
        assert slow["bytes"]["during"] <= 100_000 * 1.2 + 5_000, slow["bytes"]
    # The kill: the far secondary's processes killed, a new one started, which served the
    # serial after its restart; the near one untouched.
    far = by[("secondary-kill", "far")].extra["fault"]
    killed = far["evidence"]["begin"]["killed"][host["far"]]
    started = far["evidence"]["end"]["started"][host["far"]]
    assert killed and started not in killed
    assert far["ended_s"] - far["began_s"] == pytest.approx(2.0, abs=0.6)
    assert far["served_s"] >= far["ended_s"]
    assert _log(run, host["far"]).count("general: notice: running") >= 2
    assert not by[("secondary-kill", "near")].extra["fault"]["targeted"]


def _events(evidence: Any, kind: str) -> list[dict[str, Any]]:
    """linkem's events of `kind` anywhere in a fault's evidence or linkem's stats."""
    found: list[dict[str, Any]] = []

    def walk(part: Any) -> None:
        if isinstance(part, dict):
            if part.get("event") == kind and "direction" in part:
                found.append(part)
            for value in part.values():
                walk(value)
        elif isinstance(part, list):
            for value in part:
                walk(value)

    walk(evidence)
    return found


def test_the_faults_on_netns(tmp_path: Path) -> None:
    run, records = _run(tmp_path, None)
    _assert_faults(run, records)
    case = json.loads(next((run / "cases").glob("*/*/case.json")).read_text())
    testbed_id = case["testbed"]["testbed_id"]
    assert not [n for n in os.listdir("/run/netns") if n.startswith(f"xfb-{testbed_id}-")]
    assert not (linkem.CONTROL_DIR / f"{testbed_id}.sock").exists()


@pytest.mark.xdist_group("lab-faults")  # the worker that builds the lab; netns's elsewhere
def test_the_same_faults_on_lab_hosts(lab: Lab, tmp_path: Path) -> None:
    run, records = _run(tmp_path, lab.inventory)
    _assert_faults(run, records)
    # Each secondary host's linkem took them: every direction, its control socket.
    cases = [json.loads(p.read_text()) for p in run.glob("cases/*/*/case.json")]
    hosts = cases[0]["testbed"]["emulation"]["hosts"]
    assert set(hosts) == {h.name for h in lab.hosts if h.role == "secondary"}
    for name, emulated in hosts.items():
        config = emulated["linkem_config"]
        assert config["control_path"].endswith("/ctl/linkem.sock")
        assert [d["name"] for d in config["directions"]] == [f"{name} forward", f"{name} reverse"]
    assert_nothing_left(lab)  # no process but sshd, no file, no NFQUEUE rule on any host
    assert _left_on_controller("faults") == []
