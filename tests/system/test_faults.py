"""Faults on real servers, one test per kind, at small sizes: a BIND primary and a fleet of
BIND, Knot and NSD secondaries behind a 4 Mbit/s link (a 20,000-record AXFR takes about
1.5 s), each fault asserted from the records and the servers' logs: that it happened
(linkem's counters and events, the processes stopped and started), and that each secondary
healed or was named stuck with its own account. Nothing is left behind."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from harness import spec
from harness.link import linkem
from harness.results.folder import read_run
from harness.results.model import TransferRecord
from harness.run.runner import run_scenario
from harness.testbed import registry as reg

pytestmark = [
    pytest.mark.root,
    pytest.mark.netns,
    pytest.mark.servers,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for namespaces"),
]

FLEET = """
repeats = 1
passes = 1
timeout = "12s"
transports = ["tcp"]
xfr = ["axfr"]
trigger = "notify"
[zones]
preset = "tld"
records = 20000
origin = "faults.example."
[link]
rate = "4mbit"
[[secondaries]]
name = "b"
kind = "bind"
[[secondaries]]
name = "k"
kind = "knot"
[[secondaries]]
name = "n"
kind = "nsd"
"""
HOSTS = {"b": "bind", "k": "knot", "n": "nsd"}


class Run:
    def __init__(self, folder: Path, records: list[TransferRecord]) -> None:
        self.folder = folder
        self.records = {r.host: r for r in records}
        (self.visit,) = sorted((folder / "cases").iterdir())
        self.stats = json.loads((self.visit / "testbed" / "linkem-stats.json").read_text())

    def fault(self, host: str) -> dict[str, Any]:
        return self.records[host].extra["fault"]

    def log(self, host: str) -> str:
        name = {"bind": "named.log", "knot": "knot.log", "nsd": "nsd.log"}[HOSTS.get(host, "bind")]
        return (self.visit / host / name).read_text()

    def events(self, event: str) -> list[dict[str, Any]]:
        return [e for e in self.stats["events"] if e["event"] == event]

    def counter(self, host: str, way: str, name: str) -> int:
        return int(self.stats["directions"][f"{host} {way}"][name])


def run(tmp_path: Path, fault: str, *, as_asked: bool = True) -> Run:
    path = tmp_path / "faults.toml"
    path.write_text(FLEET + "[[faults]]\n" + fault + "\n")
    folder = run_scenario(spec.load(path), results_root=tmp_path / "results")
    meta, records = read_run(folder)
    assert meta.interrupted is False
    assert sorted(r.host for r in records) == ["b", "k", "n"]
    done = Run(folder, records)
    _nothing_left(done)
    for host, record in done.records.items():
        if as_asked:
            _healed_or_named_stuck(record)
        assert record.secondary_kind == HOSTS[host]
    return done


def _not_as_asked(done: Run, words: str) -> None:
    """Every record fails as the harness's, the fault's own error first: the transfers
    were ordinary ones and answer nothing about the fault."""
    for record in done.records.values():
        assert record.failure == "harness" and not record.counts, record.error
        assert (record.error or "").startswith(f"the reset fault did not happen as asked: {words}")
        assert record.extra["fault"]["not_as_asked"] == record.error


def test_a_fault_whose_bytes_never_crossed_answers_nothing(tmp_path: Path) -> None:
    done = run(tmp_path, 'kind = "reset"\nafter_bytes = "100MB"', as_asked=False)
    _not_as_asked(done, "never began: every secondary served the serial before the link")
    assert not done.events("reset")  # linkem never fired it
    for host in HOSTS:
        assert done.records[host].verified  # the copies themselves were right


def test_a_reset_after_the_transfer_ended_is_refused(tmp_path: Path) -> None:
    """At 6 s the 1.5 s transfers are over: the last connection with data on each link has
    closed, so there is nothing to reset, and linkem says so rather than sending resets to
    a connection that is gone (which the secondaries would never notice)."""
    done = run(tmp_path, 'kind = "reset"\nat = "6s"', as_asked=False)
    _not_as_asked(done, "linkem refused")
    assert "has closed (a FIN or a reset crossed): nothing to reset" in done.fault("b")["error"]
    assert not done.events("reset")
    assert all(done.counter(h, "forward", "resets_sent") == 0 for h in HOSTS)


def _healed_or_named_stuck(record: TransferRecord) -> None:
    fault = record.extra["fault"]
    if fault["stuck"]:
        assert record.failure == "timeout" and "stuck" in (record.error or ""), record.error
        # The server's own account of the zone, and one new NOTIFY from the primary.
        assert fault["account"]["status"] and fault["account"]["log"]
        assert fault["renotify"]["evidence"]["status"] == 0
        assert fault["renotify"]["freed"] == fault["freed_by_notify"]
    else:
        assert record.counts, (record.host, record.error)
        assert record.verified and fault["served_s"] is not None
        assert fault["heal_s"] is not None or fault["unaffected"] or fault["began_s"] is None


def _nothing_left(done: Run) -> None:
    """No namespace, registry entry, control socket or server process outlived the run."""
    case = json.loads((done.visit / "case.json").read_text())
    testbed_id = case["testbed"]["testbed_id"]
    assert not [n for n in os.listdir("/run/netns") if n.startswith(f"xfb-{testbed_id}-")]
    assert not (reg.registry_dir() / f"{testbed_id}.json").exists()
    assert not (linkem.CONTROL_DIR / f"{testbed_id}.sock").exists()
    for record in done.records.values():
        for pid in _pids(record.extra["fault"]["evidence"]):
            assert not Path(f"/proc/{pid}").exists() or _zombie(pid), f"pid {pid} left"


def _pids(evidence: dict[str, Any]) -> list[int]:
    """Every pid a fault's evidence names (stopped, started, killed)."""
    pids: list[int] = []
    for part in evidence.values():
        primary = part.get("primary", {}) if isinstance(part, dict) else {}
        pids += [v for k, v in primary.items() if k.endswith("pid")]
        pids += list(part.get("started", {}).values()) if isinstance(part, dict) else []
        for killed in (part.get("killed", {}) if isinstance(part, dict) else {}).values():
            pids += killed
    return pids


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    except OSError:
        return True


# Alone (tests/conftest.py): the fault begins and ends on time, to 0.2-0.3 s.
@pytest.mark.alone
def test_link_down_drops_everything_and_each_secondary_heals_or_is_stuck(tmp_path: Path) -> None:
    done = run(tmp_path, 'kind = "link-down"\nat = "0.3s"\nduration = "3s"')
    downs = done.events("applied")
    for host in HOSTS:
        fault = done.fault(host)
        assert fault["targeted"] and fault["began_s"] == pytest.approx(0.3, abs=0.2)
        assert fault["ended_s"] - fault["began_s"] == pytest.approx(3.0, abs=0.3)
        # linkem took the link down both ways and back, and dropped what came meanwhile.
        for way in ("forward", "reverse"):
            states = [
                e["detail"]["state"]["down"] for e in downs if e["direction"] == f"{host} {way}"
            ]
            # Down, up at the fault's end (and restored once more by the cleanup).
            assert states[:2] == [True, False] and not any(states[2:]), (host, way, states)
        assert done.counter(host, "forward", "dropped_down") > 0
        assert fault["bytes"]["during"] == 0
        assert fault["bytes"]["after"] > 0 or fault["unaffected"]


def test_reset_after_bytes_cuts_each_transfer_and_the_servers_say_so(tmp_path: Path) -> None:
    done = run(tmp_path, 'kind = "reset"\nafter_bytes = "100kB"')
    resets = {e["direction"]: e for e in done.events("reset")}
    assert set(resets) == {"b forward", "k forward", "n forward"}
    for host in HOSTS:
        fault = done.fault(host)
        event = resets[f"{host} forward"]["detail"]
        assert event["connection"].startswith(f"{fault_primary(done)}:53 > ")
        assert len(event["resets"]) == 2  # one to each end
        assert done.counter(host, "forward", "resets_sent") >= 1
        assert fault["fired_s"] is not None and fault["fired_s"] >= fault["began_s"]
    # Fired on the first link that carried 100 kB; the others fired on their own bytes.
    first = min(HOSTS, key=lambda h: done.fault(h)["fired_s"])
    assert done.fault(first)["bytes"]["before"] >= 100_000
    # In the servers' own words: BIND's failed transfer; Knot's failed refresh, or its
    # fallback to AXFR when the reset came while it still took the answer for an IXFR.
    assert "failed while receiving responses: connection reset" in done.log("b")
    assert "(connection reset)" in done.log("k")
    assert done.fault("b")["server"]["failures"]["other_failure"] >= 1
    assert done.fault("k")["server"]["failures"]["refused"] >= 1


def fault_primary(done: Run) -> str:
    case = json.loads((done.visit / "case.json").read_text())
    return case["testbed"]["hosts"]["primary"]["address"]


def test_slow_primary_limits_the_rate_while_it_lasts(tmp_path: Path) -> None:
    done = run(tmp_path, 'kind = "slow-primary"\nat = "0.2s"\nrate = "400kbit"\nduration = "3s"')
    for host in HOSTS:
        fault = done.fault(host)
        rates = [
            e["detail"]["state"]["rate_bps"]
            for e in done.events("applied")
            if e["direction"] == f"{host} forward"
        ]
        assert rates[:2] == [400_000, 0] and not any(rates[2:])
        # 3 s at 400 kbit/s is 150 kB; the bottleneck's queue holds 100 ms more.
        assert fault["bytes"]["during"] <= 150_000 * 1.2 + 5_000, fault["bytes"]


def test_link_degrade_on_one_site(tmp_path: Path) -> None:
    done = run(
        tmp_path,
        'kind = "link-degrade"\nat = "0.2s"\nduration = "4s"\ndelay = "100ms"\n'
        'loss = "10%"\ntarget = "n"',
    )
    assert done.fault("n")["targeted"] and not done.fault("b")["targeted"]
    assert done.counter("n", "forward", "dropped_fault") > 0
    assert done.counter("b", "forward", "dropped_fault") == 0
    impaired = [e["direction"] for e in done.events("applied") if e["detail"].get("impair")]
    assert sorted(impaired) == ["n forward", "n reverse"]


def test_primary_restart_is_a_new_process_and_the_secondaries_heal(tmp_path: Path) -> None:
    done = run(tmp_path, 'kind = "primary-restart"\nat = "0.3s"')
    evidence = done.fault("b")["evidence"]
    stopped = evidence["begin"]["primary"]["stopped_pid"]
    started = evidence["end"]["primary"]["started_pid"]
    assert stopped != started
    primary_log = (done.visit / "primary" / "named.log").read_text()
    assert primary_log.count("general: notice: running") >= 2  # started twice
    assert primary_log.count("general: notice: exiting") >= 1


# Alone (tests/conftest.py): the fault lasts its 3 s, to 0.5 s.
@pytest.mark.alone
def test_primary_stop_for_a_while(tmp_path: Path) -> None:
    done = run(tmp_path, 'kind = "primary-stop"\nat = "0.3s"\nduration = "3s"')
    fault = done.fault("k")
    assert fault["ended_s"] - fault["began_s"] == pytest.approx(3.0, abs=0.5)
    # (Bytes may still cross while it is down: its kernel sends what its sockets held.)
    evidence = fault["evidence"]
    assert evidence["begin"]["primary"]["stopped_pid"] != evidence["end"]["primary"]["started_pid"]
    primary_log = (done.visit / "primary" / "named.log").read_text()
    assert primary_log.count("general: notice: running") >= 2
    assert primary_log.count("general: notice: exiting") >= 1


def test_secondary_kill_restarts_it_and_counts_only_what_it_serves_after(tmp_path: Path) -> None:
    done = run(tmp_path, 'kind = "secondary-kill"\nat = "0.3s"\nduration = "2s"\ntarget = "k"')
    fault = done.fault("k")
    killed = fault["evidence"]["begin"]["killed"]["k"]
    started = fault["evidence"]["end"]["started"]["k"]
    assert killed and started not in killed
    assert done.log("k").count("Knot DNS 3.2.6 starting") >= 2
    assert not done.fault("b")["targeted"] and not done.fault("n")["targeted"]
    if not fault["stuck"]:
        assert fault["served_s"] >= fault["ended_s"]
