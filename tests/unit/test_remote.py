"""The inventory backend's pure parts: the clock exchange, a record's clock error, the
real path's ping summary, a plan on the inventory's hosts, and what it refuses."""

from __future__ import annotations

import multiprocessing
import subprocess
import tarfile
from pathlib import Path

import pytest

from harness import spec
from harness.core.errors import UserInputError
from harness.inventory import load_inventory, match_sites
from harness.measure.watch import wire_facts
from harness.plan.case import plan_case
from harness.remote.bundle import build_bundle, python_tag
from harness.remote.channel import ClockReading, best_exchange
from harness.remote.paths import parse_ping
from harness.remote.place import on_bench, wire_window
from harness.remote.record import remove_work
from harness.results.model import TransferRecord
from harness.run.remote import check_scenario, on_inventory, with_clock
from harness.spec import FaultSpec, fault_targets
from harness.testbed import registry as reg

INVENTORY = """
[primary]
ns0 ansible_host=192.0.2.10
[secondaries]
ns1 ansible_host=192.0.2.11 site=near
ns2 ansible_host=192.0.2.12 site=near
ns3 ansible_host=192.0.2.13 site=far
"""
FLEET = """
transports = ["tcp", "tcp-tsig"]
xfr = ["axfr", "ixfr"]
[[secondaries]]
name = "near"
[[secondaries]]
name = "far"
count = 4
"""


def test_the_offset_comes_from_the_shortest_round_trip_and_is_bound_by_half_of_it() -> None:
    # The host's clock runs 2 s ahead; the second exchange was the quickest.
    exchanges = [(100.0, 102.004, 100.010), (101.0, 103.0005, 101.001), (102.0, 104.05, 102.1)]
    reading = best_exchange(exchanges)
    assert reading.offset_s == pytest.approx(2.0)
    assert reading.error_s == pytest.approx(0.0005)
    assert reading.rtt_s == pytest.approx(0.001)
    with pytest.raises(ValueError):
        best_exchange([])


class _Fleet:
    def __init__(self, errors: dict[str, float]) -> None:
        self.errors = errors

    def clock(self, host: str) -> ClockReading:
        return ClockReading(0.0001, self.errors[host], 2 * self.errors[host], 0.0, 9)


def _record(duration: float, trigger: str = "notify", method: str = "server-to-server"):
    return TransferRecord(
        run_id="r", case="c", repeat=1, primary_kind="bind", secondary_kind="bind",
        host="ns1", site="near", transport="tcp", xfr="axfr", zone="lab.", serial=2,
        records=1, bytes=1, messages=1, duration_s=duration, started_at=0.0, ok=True,
        error=None, verified=True, trigger=trigger, method=method, duration_error_s=0.004,
    )  # fmt: skip


def test_a_duration_across_two_hosts_carries_both_clock_errors() -> None:
    record = with_clock(_record(0.5), _Fleet({"ns0": 0.001, "ns1": 0.002}), "ns0")  # type: ignore[arg-type]
    assert record.duration_error_s == pytest.approx(0.004 + 0.003)
    clock = record.extra["clock"]
    assert clock["poll_error_s"] == 0.004 and clock["clock_error_s"] == pytest.approx(0.003)
    assert clock["primary"]["host"] == "ns0" and clock["secondary"]["host"] == "ns1"
    assert clock["secondary"]["offset_s"] == 0.0001
    assert clock["clock_error_over_10pct"] is False
    short = with_clock(_record(0.02), _Fleet({"ns0": 0.001, "ns1": 0.002}), "ns0")  # type: ignore[arg-type]
    assert short.extra["clock"]["clock_error_over_10pct"] is True


def test_a_retransfer_is_timed_from_the_controller_and_one_host() -> None:
    record = with_clock(_record(0.5, "retransfer"), _Fleet({"ns1": 0.002}), "ns0")  # type: ignore[arg-type]
    assert "primary" not in record.extra["clock"]
    assert record.duration_error_s == pytest.approx(0.006)


def test_a_failed_transfer_or_a_pull_gets_no_clock() -> None:
    failed = _record(0.5)
    failed.duration_s = None
    assert "clock" not in with_clock(failed, _Fleet({}), "ns0").extra  # type: ignore[arg-type]


def test_ping_summaries_are_read_in_seconds() -> None:
    text = (
        "--- 198.18.0.2 ping statistics ---\n"
        "5 packets transmitted, 4 received, 20% packet loss, time 801ms\n"
        "rtt min/avg/max/mdev = 0.027/0.043/0.055/0.010 ms\n"
    )
    assert parse_ping(text) == {
        "sent": 5, "received": 4, "rtt_min_s": 0.000027, "rtt_avg_s": 0.000043,
        "rtt_max_s": 0.000055, "rtt_mdev_s": 0.00001,
    }  # fmt: skip
    assert parse_ping("connect: Network is unreachable")["error"]


def test_a_plan_on_the_inventory_takes_its_hosts_names_and_counts(tmp_path: Path) -> None:
    (tmp_path / "lab.ini").write_text(INVENTORY)
    (tmp_path / "s.toml").write_text(FLEET)
    loaded = spec.load(tmp_path / "s.toml")
    inventory = load_inventory(tmp_path / "lab.ini")
    matched = match_sites(inventory, loaded)
    plan = on_inventory(plan_case(loaded.cases[0]), matched, inventory.primary.name)
    assert [(h.name, h.role, h.site) for h in plan.hosts] == [
        ("ns0", "primary", ""),
        ("ns1", "secondary", "near"),
        ("ns2", "secondary", "near"),
        ("ns3", "secondary", "far"),  # the scenario's count = 4 does not matter
    ]
    # A fault targeting a site acts on the inventory's hosts there.
    assert plan.sites == {"near": ["ns1", "ns2"], "far": ["ns3"]}
    kill = FaultSpec(kind="secondary-kill", duration=2.0, target="near")
    assert fault_targets(kill, plan.sites) == ["ns1", "ns2"]
    check_scenario(loaded)  # nothing refused
    # TCP settings, XoT and client pulls are run on the hosts too
    (tmp_path / "tuned.toml").write_text(
        'client_pulls = ["own", "kdig"]\n'
        + FLEET.replace('"tcp-tsig"]', '"tcp-tsig", "xot"]')
        + '[hosts.secondary]\ncongestion_control = "bbr"\n'
    )
    check_scenario(spec.load(tmp_path / "tuned.toml"))
    # A site's delay and loss are emulated on its secondary hosts.
    (tmp_path / "linked.toml").write_text(FLEET + '[link]\ndelay = "20ms"\nloss = "1%"\n')
    check_scenario(spec.load(tmp_path / "linked.toml"))
    # PowerDNS's database rows are a script its start applies on its host (servers/pdns.py).
    (tmp_path / "pdns.toml").write_text(FLEET + '[servers.secondary]\nkind = "pdns"\n')
    check_scenario(spec.load(tmp_path / "pdns.toml"))
    # Faults: linkem on each secondary host takes the link's, its agent stops and starts
    # the servers; a slow primary's rate is linkem's own bottleneck, not a shaper.
    for fault in ('kind = "primary-restart"', 'kind = "slow-primary"\nrate = "1mbit"\n'
                  'duration = "2s"', 'kind = "reset"\nafter_bytes = "10kB"'):  # fmt: skip
        (tmp_path / "faults.toml").write_text(FLEET + "[[faults]]\n" + fault + "\n")
        check_scenario(spec.load(tmp_path / "faults.toml"))


@pytest.mark.parametrize(
    ("extra", "key"),
    [
        # A site's delay and loss are emulated on its hosts (remote/hostlink.py), not a rate.
        ('[link]\nrate = "10mbit"\n', "secondaries.near.link.rate"),
        ('[link]\ndelay = "10ms"\nbackend = "netem"\n', "secondaries.near.link.backend"),
        ('[uplink]\nrate = "10mbit"\n', "uplink"),
        ('[uplink]\ndelay = "10ms"\n', "uplink"),
        # Faults are linkem's commands on each secondary host (remote/linkctl.py).
        (
            '[link]\nbackend = "netem"\n[[faults]]\nkind = "primary-restart"\n',
            "secondaries.near.link.backend",
        ),
        # A fault's target is a site: the hosts are the inventory's, not the scenario's.
        (
            '[[faults]]\nkind = "secondary-kill"\nduration = "2s"\ntarget = "near-2"\n',
            "faults[0].target",
        ),
        # The copies are read back on their hosts; their files stay there (remote/agent.py).
        ('verify = "disk"\n', "verify"),
    ],
)
def test_what_the_inventory_backend_does_not_do_is_refused(
    tmp_path: Path, extra: str, key: str
) -> None:
    text = extra + FLEET if not extra.startswith("[") else FLEET + extra
    (tmp_path / "s.toml").write_text(text)
    with pytest.raises(UserInputError) as caught:
        check_scenario(spec.load(tmp_path / "s.toml"))
    assert f"s.toml: {key}:" in str(caught.value)
    assert caught.value.exit_status == 2


def test_a_change_stream_runs_on_inventory_hosts(tmp_path: Path) -> None:
    """Each host's agent follows its own servers' serials (remote/relayed.py)."""
    text = ('trigger = "stream"\n' + FLEET.replace('"axfr", ', "")
            + '[stream]\ninterval = "1s"\nupdates = 5\n')  # fmt: skip
    (tmp_path / "s.toml").write_text(text)
    check_scenario(spec.load(tmp_path / "s.toml"))


@pytest.mark.parametrize(
    ("text", "key"),
    [
        # A cold start timed by the logs alone reads them on this machine (served_log.py).
        ('trigger = "cold-start"\ncold_start_poll = "off"\n' + FLEET.replace(', "ixfr"', ""),
         "cold_start_poll"),
    ],
)  # fmt: skip
def test_triggers_the_inventory_backend_does_not_run_are_refused(
    tmp_path: Path, text: str, key: str
) -> None:
    """Refused before the hosts are deployed, rather than failing once they are."""
    (tmp_path / "s.toml").write_text(text)
    with pytest.raises(UserInputError) as caught:
        check_scenario(spec.load(tmp_path / "s.toml"))
    assert f"s.toml: {key}:" in str(caught.value)
    assert caught.value.exit_status == 2


def test_a_runs_controller_folder_goes_and_the_shared_one_when_empty(tmp_path: Path) -> None:
    shared = tmp_path / "remote"
    first, second = shared / "run1-abc", shared / "run2-def"
    for work in (first, second):
        (work / "cp").mkdir(parents=True)
        (work / "deploy.vars.json").write_text("{}")
    remove_work(first)
    assert sorted(shared.iterdir()) == [second]  # another run's is left alone
    remove_work(second)
    assert not shared.exists()


def test_a_killed_runs_record_goes_with_the_lab_its_hosts_were(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run killed on a lab whose teardown could not run, and the lab then taken down
    (its namespaces, processes and roots with it): `clean` removes the run's record and
    its folder here, instead of asking for an inventory that no longer exists."""
    directory = tmp_path / "testbeds"
    directory.mkdir()
    monkeypatch.setenv("XFRBENCH_REGISTRY_DIR", str(directory))
    (directory / "abc123.json").write_text("{}")  # the lab is up (its registry)
    work = tmp_path / "remote" / "killed-def456"
    (work / "cp").mkdir(parents=True)
    registry = reg.Registry.create(directory, "def456", label="remote run killed", remote=True)
    registry.add("remote_run", inventory=str(tmp_path / "gone.yml"), run="killed", hosts={},
                 work=str(work), logs=str(tmp_path), lab="abc123")  # fmt: skip
    done, notes, problems = reg.undo(registry)
    assert "inventory" in " ".join(notes) and "is gone" in " ".join(notes)
    assert "`xfrbench clean --forget killed`" in " ".join(notes)
    assert work.exists()  # the lab's hosts may still hold what the run left
    (directory / "abc123.json").unlink()  # lab down
    done, notes, problems = reg.undo(reg.Registry.load(directory / "def456.json"))
    assert problems == [] and "its lab abc123 is gone" in " ".join(done)
    assert not work.exists() and not work.parent.exists()
    assert not (directory / "def456.json").exists()


HOST_PYTHON = Path("/usr/bin/python3")


def _host_tag() -> str:
    code = "import platform, sys; print('%d.%d %s' % (*sys.version_info[:2], platform.machine()))"
    return subprocess.run([HOST_PYTHON, "-c", code], capture_output=True, text=True).stdout.strip()


@pytest.mark.skipif(
    not HOST_PYTHON.exists() or _host_tag() != python_tag(),
    reason="needs a python3 the bundle is built for",
)
def test_the_bundle_alone_runs_the_agent_and_its_metrics(tmp_path: Path) -> None:
    """What deploy.yml unpacks is all a host's python3 gets: the agent, the exporter that
    serves its samples, and every library they import come from the bundle."""
    bundle = build_bundle(tmp_path / "cache")
    unpacked = tmp_path / "agent"
    with tarfile.open(bundle) as archive:
        archive.extractall(unpacked, filter="data")
    code = (
        "import harness.remote.agent, harness.metrics.exporter, prometheus_client, pydantic\n"
        "print(harness.__file__, prometheus_client.__file__, pydantic.__file__)"
    )
    done = subprocess.run(
        ["env", "-i", f"PYTHONPATH={unpacked}", str(HOST_PYTHON), "-c", code],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert all(path.startswith(str(unpacked)) for path in done.stdout.split()), done.stdout


def _build(cache: str) -> str:
    return str(build_bundle(Path(cache)))


def test_runs_started_together_build_one_whole_bundle(tmp_path: Path) -> None:
    """The lab tests of a fresh clone start on four workers at once, each building the
    agent's bundle: a partial file shared by name had one build rename the file another
    was still writing (FileNotFoundError there, a torn archive on the hosts)."""
    cache = tmp_path / "cache"
    with multiprocessing.get_context("fork").Pool(3) as pool:
        built = pool.map(_build, [str(cache)] * 3)
    (bundle,) = set(built)
    with tarfile.open(bundle) as archive:
        names = archive.getnames()
    assert "harness/remote/agent.py" in names and len(names) == len(set(names))
    assert [p.name for p in cache.iterdir()] == [Path(bundle).name]  # no partial left


def test_wire_events_read_with_the_notify_count_in_its_transfer() -> None:
    """A lab record saw no SOA query and no connection although the secondary's log had
    them: read in one batch with the NOTIFY on the primary's host, they shared its time,
    and t0 put on the controller's clock and back came out 0.3 µs later than them."""
    offset, shift_then, shift_now = 2.5e-5, 1795631300.123456, 1795631300.1234563
    notify_at = 1795631351.470123  # the primary's host clock, unix seconds
    t0 = notify_at - offset - shift_then  # on the controller's monotonic clock
    since, until = wire_window(t0, t0 + 0.003, lambda at: at + offset + shift_now)
    assert since <= notify_at <= until
    raw = [
        {"at": notify_at, "kind": kind, "peer": "198.18.7.66", "serial": serial, "port": port}
        for kind, serial, port in (("soa_query", None, 40000), ("connect", None, 40001))
    ]
    seen = on_bench(raw, t0, lambda at: at - offset - shift_now)
    assert all(event.at >= t0 for event in seen)  # never before the NOTIFY
    facts = wire_facts(seen, t0)
    assert (facts["soa_queries"], facts["connections"]) == (1, 1)
    assert facts["soa_query_s"] >= 0 and facts["connect_s"] >= 0
