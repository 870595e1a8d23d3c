"""One place contract, two implementations (harness/place/): a testbed's namespace
(testbed/place.py) and a host reached through its agent (remote/place.py, the agent run in
the same namespace over a plain pipe instead of ssh). The same test body, with a Knot
primary whose config and zone are written by hand and put on its host, gets the same
answers from both: started, listening, its SOA and names asked next to it, its copy read
back, a client's pull from the other host seen on the primary's wire on the engine's
clock, each host's serial waited for, a crash killing it.
"""

from __future__ import annotations

import os
import secrets
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from pathlib import Path

import dns.name
import dns.rdatatype
import pytest

from harness.core.transport import Transport
from harness.measure.live import LiveCase
from harness.measure.quiet import looker
from harness.place import Place, Places
from harness.remote.channel import AgentChannel
from harness.remote.place import AgentPlaces
from harness.spec import LinkSpec
from harness.testbed import Testbed
from harness.testbed import place as testbed_place
from harness.testbed.topology import Endpoint, two_hosts
from tests.system.live_cases import first_case

pytestmark = [
    pytest.mark.root,
    pytest.mark.netns,
    pytest.mark.servers,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for namespaces"),
]

REPOSITORY = Path(__file__).resolve().parents[2]
ZONE = "place.test."
SERIAL = 2026112801
ZONE_FILE = f"""$ORIGIN {ZONE}
$TTL 300
@    SOA  ns1 hostmaster {SERIAL} 3600 600 86400 300
@    NS   ns1
ns1  A    192.0.2.53
www  A    192.0.2.1
www  A    192.0.2.2
"""


def knot_conf(folder: Path, address: str, control: Path) -> str:
    return f"""server:
    rundir: "{folder}"
    listen: [ {address}@53, 127.0.0.1@53 ]
log:
  - target: "{folder}/knot.log"
    any: info
database:
    storage: "{folder}/db"
control:
    listen: "{control}"
acl:
  - id: anyone
    address: 0.0.0.0/0
    action: transfer
template:
  - id: default
    storage: "{folder}/zones"
    file: "%s.zone"
    acl: anyone
zone:
  - domain: {ZONE}
"""


MakePlaces = Callable[[Sequence[Endpoint]], tuple[Places, Path]]


@pytest.fixture(params=["namespace", "agent"])
def make_places(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MakePlaces]:
    """A testbed of the endpoints given, its hosts as places of the kind asked for (an
    agent per host, run in the host's namespace), and their run's folder."""
    run_dir = tmp_path / "run"
    with ExitStack() as stack:

        def make(endpoints: Sequence[Endpoint]) -> tuple[Places, Path]:
            testbed = stack.enter_context(Testbed.of(endpoints, tmp_path / "tb"))
            if request.param == "namespace":
                return testbed_place.TestbedPlaces(testbed), run_dir
            hosts = {}
            for name, host in testbed.hosts.items():
                argv = ["ip", "netns", "exec", host.netns, "env", f"PYTHONPATH={REPOSITORY}",
                        sys.executable, "-m", "harness.remote.agent", str(run_dir),
                        secrets.token_hex(3)]  # fmt: skip
                channel = AgentChannel(name, argv)
                stack.callback(channel.close)
                channel.call("hello", wait=30)
                hosts[name] = (host.address, channel, str(run_dir))
            readings = {name: hosts[name][1].measure_clock(5) for name in hosts}
            return AgentPlaces(hosts, readings.__getitem__), run_dir

        yield make


def connects(primary: Place, peer: str, wire: object, since: float) -> list[int]:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        ports = wire.connect_ports(peer, since)  # type: ignore[attr-defined]
        if ports:
            return list(ports)
        time.sleep(0.05)
    return []


def test_a_server_put_started_probed_pulled_and_crashed_on_a_place(
    make_places: MakePlaces,
) -> None:
    both, run_dir = make_places(two_hosts(LinkSpec()))
    primary, secondary = both.place("primary"), both.place("secondary")
    folder = run_dir / "primary" / "knot"
    control = primary.control_socket()
    control.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    primary.put(folder / "zones" / f"{ZONE}zone", ZONE_FILE.encode())
    primary.put(folder / "db" / "README", b"knot's database")
    primary.put(folder / "knot.conf", knot_conf(folder, primary.address, control).encode(), 0o600)
    proc = primary.start(["knotd", "-c", str(folder / "knot.conf")], workdir=folder)
    try:
        assert primary.wait_listening(53, 15, lambda: None), primary.read(folder / "knot.log")
        assert proc.poll() is None
        (soa,) = list(primary.soa(ZONE, timeout=5))
        assert soa.serial == SERIAL
        copy = primary.read_copy(ZONE, timeout=10)
        assert copy.ok and copy.serial == SERIAL and copy.records == 6, copy  # the SOA twice
        www = dns.name.from_text(f"www.{ZONE}")
        held = primary.served_names([(www, dns.rdatatype.A)], timeout=5)[(www, dns.rdatatype.A)]
        assert held is not None and held[0] == 300
        assert sorted(r.to_text() for r in held[1]) == ["192.0.2.1", "192.0.2.2"]
        status = primary.run(["knotc", "-s", str(control), "zone-status", ZONE])
        assert status.returncode == 0 and ZONE in status.stdout

        with primary.wire([secondary.address]) as wire:
            before = time.monotonic()
            pulled = secondary.pull_from("own", ZONE, primary.address, Transport.parse("tcp"),
                                         tls_ca=None, tsig=None, timeout=10)  # fmt: skip
            after = time.monotonic()
            assert pulled.ok and pulled.digest == copy.digest
            assert pulled.started_at is not None and abs(pulled.started_at - time.time()) < 5
            assert connects(primary, secondary.address, wire, before - 1) == [53]
            seen_wire = wire.events(secondary.address, before - 1)
            (event,) = [e for e in seen_wire if e.kind == "connect"]
            # On the engine's clock, within the clock reading's error (here a millisecond).
            assert before - 0.05 <= event.at <= after + 0.05

        asked = time.monotonic()
        seen = both.wait_serials([primary], ZONE, SERIAL, deadline=asked + 5, interval=0.005)
        assert asked - 0.05 <= seen.served["primary"] <= time.monotonic() + 0.05

        killed = primary.kill(proc)
        assert proc.pid in killed and proc.poll() is not None
        assert not primary.wait_listening(53, 0.5, lambda: None)
        assert "started" in primary.read(folder / "knot.log").lower()
    finally:
        primary.stop(proc)


ENGINE_SCENARIO = """
repeats = 1
timeout = "30s"
transports = ["tcp"]
xfr = ["ixfr"]
trigger = "notify"
[zones]
preset = "tld"
records = 300
origin = "engine.test."
ixfr_changes = 5
[servers.primary]
kind = "knot"
[servers.secondary]
kind = "nsd"
"""


def test_the_case_engine_runs_a_case_on_either_place(
    make_places: MakePlaces, tmp_path: Path
) -> None:
    """LiveCase over the places: first copies, a change set published by a signed update
    sent next to the primary, its NOTIFY seen on the primary's wire, the IXFR served and
    verified, the servers' logs read, the primary held to what was published."""
    plan, binaries, zones = first_case(tmp_path, ENGINE_SCENARIO)
    places, run_dir = make_places(plan.endpoints())
    with LiveCase(plan, run_dir, places, binaries, zones, None, None) as live:
        live.start_primary()
        live.prepare_secondaries()
        live.start_secondaries()
        names = [host.name for host in plan.secondaries]
        first = live.base_serial
        assert set(live.wait_served(names, live.first_zone, first, live.clock() + 60)) == {*names}
        assert all(live.verify(name, live.first_zone, first).ok for name in names)
        live.begin_observation()
        publication = live.publish(first + 1)
        assert publication.method == "dynamic update"
        assert publication.issued <= publication.served <= live.clock()
        notified = live.notifications(first + 1, publication.issued - 0.1, 10)
        served = live.wait_served(names, live.first_zone, first + 1, live.clock() + 30)
        live.finish_observation()
        for name in names:
            assert publication.issued <= notified[name] <= served[name] <= live.clock()
            # sock_diag on each host (an agent's run there): the transfer's connection
            # watched, and the connections it opened on its pair counted on both sides.
            facts = live.observation(name, publication.issued, served[name])
            assert "error" not in facts["tcp"], facts["tcp"]
            assert "error" not in facts["sockets"], facts["sockets"]
            assert facts["sockets"]["secondary"]["connections"] >= 1, facts["sockets"]
            assert facts["sockets"]["primary"]["connections"] >= 1, facts["sockets"]
            check = live.verify(name, live.first_zone, first + 1)
            assert check.ok and check.records == 302, check
            logged = live.logged(name, live.first_zone, first + 1, time.time() - 60)
            assert logged.primary is not None and logged.primary["xfr"] == "ixfr"
        assert live.check_primary(first + 1) is None
        # Settle's looks count the servers' open connections on either place.
        running = [live.primary, *live.secondaries.values()]
        with ExitStack() as stack:
            look = looker(places, running, None, {}, stack)()  # type: ignore[arg-type]
        assert look.open_connections is not None
