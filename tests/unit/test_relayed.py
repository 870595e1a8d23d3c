"""What inventory hosts observe, as the engine gets it (remote/relayed.py), and where a
host keeps the visit's folder (remote/place.py `AgentPlace.here`)."""

from __future__ import annotations

from pathlib import Path

from harness.observe.sampler import Target
from harness.remote.channel import ClockReading
from harness.remote.place import AgentPlace, HostClock
from harness.remote.relayed import directions_of, on_controller, sample_target, stamped_directions
from harness.spec import LinkSpec


def test_a_hosts_sample_lines_are_put_on_the_controllers_clock() -> None:
    lines = [{"t": 1795631351.5, "host": "ns1", "cpu_s": 0.25}, {"t": 1795631352.0}]
    shifted = on_controller(lines, offset_s=0.002)
    assert [line["t"] for line in shifted] == [1795631351.498, 1795631351.998]
    assert shifted[0]["cpu_s"] == 0.25 and lines[0]["t"] == 1795631351.5  # a copy


def test_a_server_is_sampled_by_the_pid_its_agent_spawned() -> None:
    target = Target(role="secondary", server="nsd", pid=4242, cgroup=None, host="ns3",
                    site="far")  # fmt: skip
    assert sample_target(target) == {"pid": 4242, "role": "secondary", "server": "nsd",
                                     "host": "ns3", "site": "far"}  # fmt: skip


def test_a_secondary_hosts_link_gives_its_directions_by_the_netns_names() -> None:
    delayed = LinkSpec.model_validate({"delay": "40ms"})
    lossy_back = LinkSpec.model_validate({"reverse": {"loss": "1%"}})
    found = directions_of({"ns3": delayed, "ns1": LinkSpec(), "ns2": lossy_back})
    assert [(d.name, d.endpoint) for d in found] == [
        ("ns3 forward", "ns3"), ("ns3 reverse", "ns3"), ("ns2 reverse", "ns2"),
    ]  # fmt: skip
    assert found[0].spec.delay == 0.040


def test_a_hosts_folder_mirrors_the_runs_results_folder(tmp_path: Path) -> None:
    results = tmp_path / "results" / "run-1"
    clock = HostClock(lambda: ClockReading(0.0, 0.001, 0.002, 0.0, 5))
    host = AgentPlace("ns1", "192.0.2.11", None, "/var/tmp/xfrbench/run-1", clock,  # type: ignore[arg-type]
                      results)  # fmt: skip
    assert host.here(results / "cases" / "000" / "ns1") == Path(
        "/var/tmp/xfrbench/run-1/cases/000/ns1"
    )
    alone = AgentPlace("ns1", "192.0.2.11", None, "/r", clock)  # type: ignore[arg-type]
    assert alone.here(results / "x") == results / "x"  # an agent sharing this file system


def test_files_of_this_machine_reach_a_host_by_one_rsync_per_folder(tmp_path: Path) -> None:
    synced: list[tuple[dict[str, Path], str]] = []
    clock = HostClock(lambda: ClockReading(0.0, 0.001, 0.002, 0.0, 5))
    host = AgentPlace("ns0", "192.0.2.10", None, "/r", clock, tmp_path,  # type: ignore[arg-type]
                      lambda files, dest: synced.append((files, dest)))  # fmt: skip
    zones = {Path(f"/r/cases/000/ns0/zones/z{n}.zone"): tmp_path / f"z{n}" for n in range(3)}
    host.copy_in(zones | {Path("/r/cases/000/ns0/diff"): tmp_path / "diff"})
    assert synced == [
        ({f"z{n}.zone": tmp_path / f"z{n}" for n in range(3)}, "/r/cases/000/ns0/zones"),
        ({"diff": tmp_path / "diff"}, "/r/cases/000/ns0"),
    ]


def test_a_hosts_link_counters_carry_their_snapshots_time_on_the_controllers_clock() -> None:
    """As the netns testbed's do: the engine waits for counters written after the
    transfers ended by that stamp (a missing one made it wait its whole second)."""
    stats = {"updated_at_unix": 1795631351.5, "directions": {
        "ns3 forward": {"passed": 10, "dropped_loss": 0},
        "ns3 reverse": {"passed": 8, "dropped_loss": 1}}}  # fmt: skip
    found = stamped_directions(stats, offset_s=0.25)  # the host is 0.25 s ahead
    assert found == {
        "ns3 forward": {"passed": 10, "dropped_loss": 0, "updated_at_unix": 1795631351.25},
        "ns3 reverse": {"passed": 8, "dropped_loss": 1, "updated_at_unix": 1795631351.25},
    }
    assert stamped_directions({}, 0.0) == {}  # before linkem's first snapshot
