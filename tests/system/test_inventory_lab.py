"""A fleet on inventory hosts, end to end: a lab of 1 primary + 3 secondaries on two sites
(namespaces with their own sshd), the shipped lab-fleet scenario through Ansible and the
agents over SSH only, every copy verified, and nothing left on any host afterwards, nor
after the driver is killed with SIGKILL and `xfrbench clean --inventory` runs. The fleet
and the stream are the engine's shared cases (tests/system/engine_cases.py), checked as on
netns (tests/system/test_engine_netns.py), with what only a lab of hosts has on top.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from harness import spec, zonegen
from harness.inventory import load_inventory
from harness.lab import Lab, lab_down, lab_up
from harness.lab.build import LabHost
from harness.metrics.promserver import PrometheusServer
from harness.plan.case import plan_case
from harness.remote.fleet import CONTROL_ROOT
from harness.results.folder import read_run
from harness.run.remote import PROMETHEUS_TARGETS
from harness.testbed import registry as reg
from tests.system import engine_cases as cases
from tests.system.engine_cases import FLEET as SCENARIO
from tests.system.engine_cases import SMALL_FLEET, STREAM
from tests.system.test_prometheus import ScrapedRun, empty_panels

pytestmark = [
    pytest.mark.root,
    pytest.mark.netns,
    pytest.mark.servers,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for namespaces"),
]
# Each group runs on one worker (--dist loadgroup), which builds its own lab (the module
# fixture: about a second); the groups run side by side. One group for the whole module
# was a serial chain of about 7 minutes, the longest of the suite: its tests wait on the
# remote runs' deploys and teardowns, not on the CPU. The two tests that read the one lab
# run share a group (its fixture), and so do the two that kill a run named "killed".
FLEET_RUN = pytest.mark.xdist_group("lab")
KILLED = pytest.mark.xdist_group("lab-killed")
RUNS = pytest.mark.xdist_group("lab-runs")

REPOSITORY = Path(__file__).resolve().parents[2]
XFRBENCH = [sys.executable, "-m", "harness"]
SCRAPE = 0.5  # seconds: Prometheus's scrapes and the agents' samples
SET = {"ns0": ("net.ipv4.tcp_wmem", "4096\t65536\t8388608"), "ns3": ("net.ipv4.tcp_tw_reuse", "1")}


LAB_SYSCTLS: dict[tuple[str, str], str] = {}  # the lab hosts' own values, before any run


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    folder = tmp_path_factory.mktemp("lab")
    built = lab_up(3, ["near", "far"], folder / "lab.yml")
    try:
        for host, (key, _) in SET.items():
            LAB_SYSCTLS[(host, key)] = _sysctl(built, host, key)
        yield built
    finally:
        lab_down(built.lab_id)


def _leftovers(lab: Lab) -> list[str]:
    """What is on the lab's hosts besides their sshd: processes in their namespaces (seen
    from outside, by the test only), and files under their roots."""
    found = _processes(lab)
    found += [str(path) for host in lab.hosts for path in (lab.roots / host.name).rglob("*")]
    for host, (key, _) in SET.items():
        if _sysctl(lab, host, key) != LAB_SYSCTLS[(host, key)]:
            found.append(f"{host}: {key} = {_sysctl(lab, host, key)}")
    return found


def _processes(lab: Lab) -> list[str]:
    """Processes in the lab's namespaces besides their sshd (seen from outside)."""
    found = []
    for host in lab.hosts:
        pids = subprocess.run(["ip", "netns", "pids", host.netns], capture_output=True,
                              text=True, check=True).stdout.split()  # fmt: skip
        for pid in pids:
            try:
                command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
            except OSError:
                continue
            if not command.startswith(b"/usr/sbin/sshd") and b"sshd:" not in command:
                found.append(f"{host.name}: pid {pid} {command.decode(errors='replace')}")
    return found


def _sysctl(lab: Lab, host: str, key: str) -> str:
    """A lab host's value, read from outside by the test only."""
    netns = next(h.netns for h in lab.hosts if h.name == host)
    argv = ["ip", "netns", "exec", netns, "sysctl", "-n", key]
    return " ".join(subprocess.run(argv, capture_output=True, text=True, check=True).stdout.split())


def _wait_clean(lab: Lab, limit: float = 15.0) -> list[str]:
    deadline = time.monotonic() + limit
    while (left := _leftovers(lab)) and time.monotonic() < deadline:
        time.sleep(0.5)  # an ssh session ending as its master closes
    return left


def _scenario(tmp_path: Path) -> Path:
    path = tmp_path / "lab-fleet.toml"
    path.write_text(SCENARIO)
    return path


def _run_on_lab(
    lab: Lab, scenario: Path, results: Path, run_id: str, inventory: Path | None = None
) -> tuple[Path, list[dict[str, Any]]]:
    """`xfrbench run --inventory` of the lab (its own, or `inventory` for its hosts), which
    must succeed: its folder, its records."""
    result = subprocess.run(
        [*XFRBENCH, "run", "--inventory", str(inventory or lab.inventory), str(scenario),
         "--results", str(results), "--run-id", run_id],
        cwd=REPOSITORY, capture_output=True, text=True, timeout=1200,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    run = results / run_id
    records = [json.loads(line) for line in (run / "transfers.jsonl").read_text().splitlines()]
    return run, records


def _left_on_controller(run_id: str) -> list[str]:
    """What the remote run `run_id` left on this machine: its registry record and its
    folders under CONTROL_ROOT. Only this run's count: another test's lab may run beside
    this one (pytest-xdist), with records and folders of its own."""
    records = [
        str(r.path)
        for r in reg.load_all()[0]
        if r.data.get("remote") and r.data.get("label") == f"remote run {run_id}"
    ]
    folders = [
        str(p)
        for p in (CONTROL_ROOT.glob(f"{run_id}-*") if CONTROL_ROOT.exists() else [])
        if re.fullmatch(rf"{re.escape(run_id)}-[0-9a-f]{{6}}", p.name)
    ]
    return records + folders


@dataclass
class LabRun:
    result: subprocess.CompletedProcess[str]
    folder: Path
    prom: PrometheusServer  # scraping the run's exporter and every host's agent
    start: float
    end: float


@pytest.fixture(scope="module")
def lab_run(lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabRun]:
    """The lab fleet run once, served to a Prometheus that takes its targets from the
    file the run writes (file_sd), as an operator's would."""
    root = tmp_path_factory.mktemp("run")
    targets = str(root / PROMETHEUS_TARGETS / "*.json")
    with PrometheusServer([], root / "prom", SCRAPE, file_sd=[targets]) as prom:
        start = time.time()
        result = subprocess.run(
            [*XFRBENCH, "run", "--inventory", str(lab.inventory), str(_scenario(root)),
             "--results", str(root), "--run-id", "lab", "--prometheus-port", "0",
             "--sample-interval", str(SCRAPE)],
            cwd=REPOSITORY, capture_output=True, text=True, timeout=900,
        )  # fmt: skip
        yield LabRun(result, root / "lab", prom, start, time.time())


@FLEET_RUN
def test_a_fleet_on_lab_hosts_is_measured_verified_and_leaves_nothing(
    lab: Lab, lab_run: LabRun
) -> None:
    result = lab_run.result
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    run = lab_run.folder
    records = cases.assert_fleet(run)  # as on netns (tests/system/test_engine_netns.py)
    # The inventory's names and sites, not the plan's near-1 / far.
    assert {(r["host"], r["site"]) for r in records} == {
        ("ns1", "near"), ("ns2", "near"), ("ns3", "far"),
    }  # fmt: skip
    for record in records:
        clock = record["extra"]["clock"]
        assert clock["primary"]["host"] == "ns0"
        assert clock["secondary"]["host"] == record["host"]
        # One kernel clock: the measured offset is within its own error bar (and small).
        for end in ("primary", "secondary"):
            assert abs(clock[end]["offset_s"]) <= clock[end]["error_s"] + 0.001
        assert record["duration_error_s"] == pytest.approx(
            clock["poll_error_s"] + clock["clock_error_s"], abs=2e-6
        )
        # sock_diag on each host, by its agent: what the transfer opened on its pair.
        sockets = record["extra"]["sockets"]
        assert "error" not in sockets and sockets["secondary"]["connections"] >= 1, sockets
    # A site's watched secondary (its last) had its connection sampled, as on netns.
    watched = [r["extra"]["tcp"] for r in records if r["host"] in ("ns2", "ns3")]
    assert all("error" not in tcp for tcp in watched), watched
    assert any(tcp.get("samples") and tcp.get("rtt_ms_min") for tcp in watched), watched
    resources = json.loads((run / "summary.json").read_text())["resources"]
    assert all(set(h) - {"link"} == {"ns0", "ns1", "ns2", "ns3"} for h in resources.values())
    table = result.stdout[result.stdout.index("resources per case") :]
    # Each row names its host (and a secondary its site); a narrow terminal folds the cell.
    words = set(table.replace(",", " ").split())
    assert {"primary", "secondary", "ns0", "ns1", "ns2", "ns3", "near", "far"} <= words
    meta = json.loads((run / "run.json").read_text())
    assert meta["backend"] == "inventory"
    remote = meta["remote"]
    assert set(remote["clocks"]) == {"ns0", "ns1", "ns2", "ns3"}
    assert all(len(readings) == 2 for readings in remote["clocks"].values())  # start, end
    assert set(remote["costs"]["deploy"]["per_host_s"]) == {"ns0", "ns1", "ns2", "ns3"}
    paths = remote["paths"]
    assert paths["ns3"]["received"] == paths["ns3"]["sent"]
    # The real path: each site's first secondary probed for bandwidth, every path's loss
    # seen as the primary's retransmits over the run's transfers (4 cases x 2 repeats).
    assert {h for h, p in paths.items() if "bandwidth" in p} == {"ns1", "ns3"}
    assert paths["ns3"]["bandwidth"]["bits_per_second"] > 0, paths["ns3"]["bandwidth"]
    for host in ("ns1", "ns2", "ns3"):
        totals = paths[host]["transfers"]
        assert totals["transfers"] == cases.FLEET_CASES * cases.FLEET_REPEATS, totals
        assert totals["data_segs_out"] > 0, totals
        assert 0 <= totals["retransmits"] <= totals["data_segs_out"]
    assert all(r["extra"]["path"]["data_segs_out"] > 0 for r in records)
    assert "The real paths" in result.stdout
    # The scenario's TCP settings were the hosts' during the run (read back there), and
    # are put back as they were (checked with the leftovers below).
    case = json.loads(next((run / "cases").glob("*/*/case.json")).read_text())
    for host, (key, value) in SET.items():
        assert case["testbed"]["hosts"][host]["sysctls"][key] == " ".join(value.split())
    assert case["testbed"]["hosts"]["ns1"]["sysctls"]["net.ipv4.tcp_tw_reuse"] != "1"
    # The servers' folders came back where the local backends put them.
    visits = sorted((run / "cases").iterdir())
    assert (visits[0] / "ns0" / "named.conf").exists()
    assert (visits[0] / "ns1" / "named.log").read_text().count("Transfer completed") >= 1
    assert oct((visits[0] / "ns0" / "named.conf").stat().st_mode & 0o777) == "0o600"
    samples = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]
    assert {(s["host"], s.get("site")) for s in samples if s.get("role") == "secondary"} == {
        ("ns1", "near"), ("ns2", "near"), ("ns3", "far"),
    }  # fmt: skip
    # Each host's agent reads its servers' cgroups (the lab's sshd mounts them again), in
    # µs as the netns sampler does: not /proc's 10 ms ticks.
    servers = [s for s in samples if s.get("role") in ("primary", "secondary")]
    assert {(s["source"], s["cpu_resolution_s"]) for s in servers} <= {
        ("cgroup-v1", 1e-6), ("cgroup-v2", 1e-6),
    }  # fmt: skip
    assert _wait_clean(lab) == []
    assert _left_on_controller("lab") == []  # no record, no folder of the run on the controller


@FLEET_RUN
def test_each_hosts_samples_are_scraped_where_its_server_runs(lab: Lab, lab_run: LabRun) -> None:
    """The run's Prometheus scrapes each host's agent for that host's servers (targets from
    the inventory), the run's exporter for its transfers; the dashboard shows them all."""
    assert lab_run.result.returncode == 0, lab_run.result.stdout[-3000:]
    prom, start, end = lab_run.prom, lab_run.start, lab_run.end
    inventory = load_inventory(lab.inventory)
    cpu = prom.query_range(
        'xfrbench_server_cpu_seconds_total{run_id="lab", mode="user"}', start, end, SCRAPE
    )
    seen = {(s["metric"]["host"], s["metric"].get("site", "")): s["metric"] for s in cpu}
    assert set(seen) == {(h.name, h.site) for h in inventory.hosts}
    for host in inventory.hosts:  # scraped on the host itself, at its inventory address
        labels = seen[(host.name, host.site)]
        assert labels["instance"].startswith(f"{host.address}:"), labels
        assert labels["xfrbench_host"] == host.name
    done = prom.query_range('xfrbench_transfers_total{run_id="lab", result="ok"} > 0', start, end)
    assert {s["metric"]["host"] for s in done} == {h.name for h in inventory.secondaries}
    assert {s["metric"]["xfrbench_host"] for s in done} == {"controller"}
    # The primary's cost per repeat comes from the primary's host.
    cost = prom.query_range('xfrbench_primary_repeat_transmit_bytes{run_id="lab"}', start, end)
    assert cost and {s["metric"]["xfrbench_host"] for s in cost} == {"ns0"}
    # Once each: a server's series is never also relayed by the run's exporter.
    everywhere = prom.query_range(
        'count by (case, host, mode) (xfrbench_server_cpu_seconds_total{run_id="lab"})', start, end
    )
    assert max(float(v) for s in everywhere for _, v in s["values"]) == 1
    meta, records = read_run(lab_run.folder)
    scraped = ScrapedRun(prom, lab_run.folder, meta, records, start, end)
    empty, unexpected = empty_panels(scraped, prom, start, end, lambda span, width: SCRAPE, SCRAPE)
    # Real paths emulate no link: no link packets, and no configured link to bound them.
    unlinked = ("xfrbench_link_packets", "xfrbench_transfer_bound_bytes_per_second")
    assert [e for e in empty if not any(family in e for family in unlinked)] == []
    assert not unexpected
    # The targets went with the run.
    assert not list((lab_run.folder.parent / PROMETHEUS_TARGETS).glob("*.json"))


def _agent_channels(driver: int) -> list[int]:
    """The driver's ssh clients that carry an agent's channel (its children)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            command = (stat.parent / "cmdline").read_bytes()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == driver and command.startswith(b"ssh\0") and b"remote.agent" in command:
            found.append(int(stat.parent.name))
    return found


def _agents(lab: Lab) -> list[str]:
    return [line for line in _leftovers(lab) if "harness.remote.agent" in line]


@KILLED
def test_clean_inventory_after_the_driver_is_killed_leaves_nothing(
    lab: Lab, tmp_path: Path
) -> None:
    """The driver killed while its hosts cannot hear it: its ssh channels frozen (a
    controller that crashed or lost the network), so that no agent learns the channel
    closed and stops on its own. `clean --inventory` must stop the agents too."""
    scenario = _scenario(tmp_path)
    scenario.write_text(SCENARIO.replace("repeats = 2", "repeats = 50"))
    output = tmp_path / "driver.log"
    with output.open("w") as out:
        driver = subprocess.Popen(
            [*XFRBENCH, "run", "--inventory", str(lab.inventory), str(scenario),
             "--results", str(tmp_path), "--run-id", "killed"],
            cwd=REPOSITORY, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    transfers = tmp_path / "killed" / "transfers.jsonl"
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and driver.poll() is None:
        if transfers.exists() and transfers.read_text().count("\n") >= 3:
            break
        time.sleep(0.5)
    assert driver.poll() is None, "the run ended before it was killed: " + output.read_text()
    channels = _agent_channels(driver.pid)
    assert len(channels) == len(lab.hosts), channels
    try:
        for pid in channels:
            os.kill(pid, signal.SIGSTOP)
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait()
        time.sleep(2)
        assert len(_agents(lab)) == len(lab.hosts), "the agents should outlive the driver"
        result = subprocess.run(
            [*XFRBENCH, "clean", "--inventory", str(lab.inventory)],
            cwd=REPOSITORY, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        assert result.returncode == 0, result.stdout + result.stderr
        assert "remote run killed" in result.stdout
        assert _wait_clean(lab) == []
    finally:
        for pid in channels:  # their sessions end on the hosts as they go
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    assert load_inventory(lab.inventory).primary.name == "ns0"  # the lab itself is untouched


def _by_hand(lab: Lab, form: str) -> str:
    """The lab's hosts as an operator writes them, in YAML or INI: where each is, who logs
    in, with which key, its site; nothing else (no root, no interpreter, no ssh options)."""

    def host_vars(host: LabHost) -> dict[str, str]:
        values = {"ansible_host": host.address, "ansible_user": "root",
                  "ansible_ssh_private_key_file": str(lab.key)}  # fmt: skip
        return values | ({"site": host.site} if host.site else {})

    groups = {
        "primary": [h for h in lab.hosts if h.role == "primary"],
        "secondaries": [h for h in lab.hosts if h.role == "secondary"],
    }
    lines = [] if form == "ini" else ["all:", "  children:"]
    for group, hosts in groups.items():
        lines += [f"[{group}]"] if form == "ini" else [f"    {group}:", "      hosts:"]
        for host in hosts:
            values = host_vars(host).items()
            if form == "ini":
                lines.append(" ".join([host.name, *(f"{k}={v}" for k, v in values)]))
            else:
                lines += [f"        {host.name}:", *(f"          {k}: {v}" for k, v in values)]
    return "\n".join(lines) + "\n"


def _written_by_hand(lab: Lab, folder: Path, form: str) -> Path:
    """The lab's hosts in an inventory file an operator wrote (`_by_hand`)."""
    inventory = folder / f"hosts.{form}"
    inventory.write_text(_by_hand(lab, form))
    return inventory


def _documented_defaults(run: Path) -> None:
    """A run on an inventory written by hand: no xfrbench_root, so each host's default
    /var/tmp/xfrbench; no ansible_python_interpreter, so the harness's /usr/bin/python3
    (whatever the login shell's PATH puts first), or nothing would have deployed."""
    hosts = json.loads((run / "run.json").read_text())["remote"]["inventory"]["hosts"]
    assert {h["root"] for h in hosts.values()} == {"/var/tmp/xfrbench"}
    assert _left_on_controller(run.name) == []


@KILLED
def test_a_killed_run_whose_inventory_is_gone_is_torn_down_from_its_record(
    lab: Lab, tmp_path: Path
) -> None:
    """The driver killed, then its inventory (a temporary one, written by hand) deleted:
    `xfrbench clean` reaches the hosts from the run's record and leaves nothing."""
    inventory = tmp_path / "temporary.yml"
    inventory.write_text(_by_hand(lab, "yaml"))
    scenario = tmp_path / "long.toml"
    scenario.write_text(SMALL_FLEET.replace("repeats = 1", "repeats = 200"))
    registry = tmp_path / "registry"  # this run's record alone, for `clean` to find
    env = {**os.environ, "XFRBENCH_REGISTRY_DIR": str(registry)}
    with (tmp_path / "driver.log").open("w") as out:
        driver = subprocess.Popen(
            [*XFRBENCH, "run", "--inventory", str(inventory), str(scenario),
             "--results", str(tmp_path), "--run-id", "killed"],
            cwd=REPOSITORY, stdout=out, stderr=subprocess.STDOUT, env=env,
        )  # fmt: skip
    transfers = tmp_path / "killed" / "transfers.jsonl"
    deadline = time.monotonic() + 300
    while driver.poll() is None and time.monotonic() < deadline:
        if transfers.exists() and transfers.read_text().count("\n") >= 3:
            break
        time.sleep(0.5)
    assert driver.poll() is None, (tmp_path / "driver.log").read_text()[-3000:]
    channels = _agent_channels(driver.pid)
    try:
        driver.kill()
        driver.wait()
        inventory.unlink()
        result = subprocess.run(
            [*XFRBENCH, "clean"], cwd=REPOSITORY, capture_output=True, text=True,
            timeout=300, env=env,
        )  # fmt: skip
        assert result.returncode == 0, result.stdout + result.stderr
        assert "removed remote run killed on ns0 (" in result.stdout, result.stdout
        assert _wait_clean(lab) == []
        assert not list(registry.glob("*.json"))
    finally:
        for pid in channels:  # they end as their agents do; never left behind
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


KNOT_NSD = """
repeats = 2
timeout = "60s"
client_pulls = ["own", "kdig"]
transports = ["tcp"]
xfr = ["ixfr"]
trigger = "notify"
[zones]
preset = "tld"
records = 20000
origin = "lab."
ixfr_changes = 10
[servers.primary]
kind = "knot"
[servers.secondary]
kind = "nsd"
[[secondaries]]
name = "near"
[[secondaries]]
name = "far"
"""


@RUNS
def test_a_knot_primary_takes_its_zone_by_rsync_and_new_versions_by_update(
    lab: Lab, tmp_path: Path
) -> None:
    """Knot (and NSD) start on the hosts with the configs the engine rendered and put there;
    the zone reaches the primary's host by one rsync, each new version as the signed
    update the engine makes here (its change set read on this machine), sent by the
    primary's agent; clients pull the zone from a secondary's host across the path."""
    scenario = tmp_path / "knot-nsd.toml"
    scenario.write_text(KNOT_NSD)
    run, records = _run_on_lab(lab, scenario, tmp_path, "knot")
    assert all(r["ok"] and r["verified"] for r in records), records
    methods = [(r["method"], r["host"]) for r in records]
    assert sorted(methods) == sorted(
        [("server-to-server", h) for h in ("ns1", "ns2", "ns3")] * 2
        + [("client-pull-own", "ns1"), ("client-pull-kdig", "ns1")] * 2
    )
    pulls = [r for r in records if r["method"] != "server-to-server"]
    assert all(r["records"] >= 20000 and r["duration_s"] > 0 for r in pulls), pulls
    updated = {r["extra"]["serial_method"] for r in records if r not in pulls}
    assert updated == {"dynamic update"}
    visit = next((run / "cases").iterdir())
    assert (visit / "ns0" / "knot.conf").exists() and (visit / "ns3" / "nsd.conf").exists()
    (zone,) = zonegen.generate(plan_case(spec.load(scenario).cases[0]).zone_spec).files
    zone_size = zone.path.stat().st_size  # the cached file the run generated
    (sync,) = json.loads((run / "run.json").read_text())["remote"]["costs"]["sync"]
    assert zone_size / 5 < sync["sent_bytes"] < 2 * zone_size, (sync, zone_size)
    assert _wait_clean(lab) == []


BIND_PDNS = """
repeats = 1
timeout = "60s"
transports = ["tcp", "tcp-tsig"]
xfr = ["axfr", "ixfr"]
trigger = "notify"
[zones]
preset = "tld"
records = 2000
origin = "lab."
[servers.primary]
kind = "bind"
[servers.secondary]
kind = "pdns"
[[secondaries]]
name = "near"
[[secondaries]]
name = "far"
"""


@pytest.mark.xdist_group("lab-pdns")
def test_pdns_secondaries_take_their_rows_on_their_hosts(lab: Lab, tmp_path: Path) -> None:
    """PowerDNS keeps zones, keys and settings as rows of its database: the engine renders
    them as a script that start.sh applies on the host, also at each switch of transport or
    kind (PowerDNS is restarted for it); every copy is verified."""
    scenario = tmp_path / "bind-pdns.toml"
    scenario.write_text(BIND_PDNS)
    run, records = _run_on_lab(lab, scenario, tmp_path, "pdns")
    assert len(records) == 2 * 2 * 3, [(r["case"], r["host"]) for r in records]
    assert all(r["ok"] and r["verified"] for r in records), [r["error"] for r in records]
    assert {r["secondary_kind"] for r in records} == {"pdns"}
    switched = {r["extra"]["schedule"].get("switched_by") for r in records}
    assert switched - {None}, switched  # new rows for the next case, applied on the host
    visit = next((run / "cases").iterdir())
    assert (visit / "ns1" / "database.sql").exists()
    assert _wait_clean(lab) == []


COLD_START = """
repeats = 2
timeout = "300s"
transports = ["tcp"]
xfr = ["axfr"]
trigger = "cold-start"
[zones]
preset = "hosting"
zones = 100
origin = "hosting.example."
[servers.primary]
kind = "bind"
[servers.secondary]
kind = "bind"
[[secondaries]]
name = "near"
[[secondaries]]
name = "far"
"""


@RUNS
def test_a_cold_start_of_hosting_zones_on_lab_hosts(lab: Lab, tmp_path: Path) -> None:
    """Secondaries started with 100 zones configured and none on disk, each repeat from
    nothing: every zone polled and read back on its own host, the zone set pushed by one
    rsync. The hosts are those of an INI inventory written by hand (`_by_hand`)."""
    scenario = tmp_path / "cold.toml"
    scenario.write_text(COLD_START)
    inventory = _written_by_hand(lab, tmp_path, "ini")
    run, records = _run_on_lab(lab, scenario, tmp_path, "cold", inventory)
    _documented_defaults(run)
    assert len(records) == 2 * 3 and all(r["ok"] and r["verified"] for r in records), records
    for record in records:
        assert record["extra"]["zones"] == 100
        assert record["extra"]["polling"]["zones_served"] == 100
        assert record["server_logged"]["secondary_transfers"] >= 100  # none kept on disk
        assert record["extra"]["clock"]["secondary"]["host"] == record["host"]
    (sync,) = json.loads((run / "run.json").read_text())["remote"]["costs"]["sync"]
    assert sync["sent_bytes"] > 0  # the zone set, one rsync
    assert _wait_clean(lab) == []


def test_a_change_stream_on_lab_hosts_is_followed_on_each_host(lab: Lab, tmp_path: Path) -> None:
    """A stream on the hosts: the engine publishes each serial, each host's agent follows
    its own server's serial (its changes on the controller's clock), every secondary gets
    every serial, and the final copies are verified on their hosts. The hosts are those of
    a YAML inventory written by hand (`_by_hand`)."""
    scenario = tmp_path / "stream.toml"
    scenario.write_text(STREAM)
    inventory = _written_by_hand(lab, tmp_path, "yaml")
    run, _ = _run_on_lab(lab, scenario, tmp_path, "stream", inventory)
    _documented_defaults(run)
    records = cases.assert_stream(run)  # as on netns (tests/system/test_engine_netns.py)
    assert {r["host"] for r in records} == {"ns1", "ns2", "ns3"}
    assert _wait_clean(lab) == []
