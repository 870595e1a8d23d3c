"""A run on the hosts of an Ansible inventory (`xfrbench run --inventory lab.yml`): the
scenario's sites matched to the inventory's, each visit's servers on those hosts through the
one case engine (measure/live.py `LiveCase`) over agent places (remote/place.py), and every
record's clock error beside its duration.

A site's [link] (delay, jitter, loss) is emulated by linkem on each of its secondary hosts
(remote/hostlink.py), started for each visit and stopped at its end. A group with faults
has linkem on every secondary host, every direction, with its control socket relayed by
the host's agent (remote/linkctl.py): its link faults are linkem's commands as on netns,
its server faults the agents' stop, kill and start (measure/live_faults.py).

What is refused before anything is deployed (exit 2, with the key and the fix): what the
inventory backend does not do (a configured rate, the primary's uplink, catalog cases, a
cold start timed by the logs alone, copies read from the servers' files, a server suite
other than the hosts' own, faults on netem or targeting a scenario's host rather than a
site), and sites on one side only (inventory.match_sites).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.core.errors import UserInputError
from harness.core.terms import SERVER_TO_SERVER
from harness.inventory import InventoryHost, load_inventory, match_sites
from harness.link import linkem
from harness.measure.client_pull import TLS_HOSTNAME
from harness.measure.live import LiveCase
from harness.measure.live_stream import LiveStreamCase
from harness.measure.processes import CaseFailed
from harness.plan.case import CasePlan, GroupPlan, HostPlan, plan_case
from harness.remote.fleet import RemoteFleet
from harness.remote.hostlink import control_socket, host_link
from harness.remote.paths import add_transfer, measure_paths
from harness.remote.place import AgentPlaces
from harness.results.meta import ServerInfo, case_meta
from harness.results.model import TransferRecord
from harness.results.store import RunStore, write_case_files, write_json_atomic
from harness.run.session import GroupSession, RunContext
from harness.servers import server_class
from harness.servers.binaries import ServerBinary, probe_version
from harness.spec import DEFAULT_SUITE, PER_HOST_SYSCTLS, LoadedScenario
from harness.xfr import XfrTimeout
from harness.xfr.secrets import new_tls

CLOCK_FLAG = 0.10  # a duration whose clock error exceeds this share of it is flagged


def check_scenario(loaded: LoadedScenario) -> None:
    """Refuse what the inventory backend cannot run (yet), naming the key and the fix."""
    path = loaded.path

    def refuse(key: str, problem: str, fix: str) -> None:
        raise UserInputError(problem, file=path, key=key, fix=fix)

    for case in loaded.cases:
        scenario = case.scenario
        uplink = scenario.uplink
        if uplink.impaired or uplink.forward.rate or uplink.reverse.rate:
            refuse("uplink", "the primary's uplink is not emulated on inventory hosts (each "
                   "secondary host emulates its own site's link)",
                   "move the settings to the sites' links ([secondaries.link])")  # fmt: skip
        for site in scenario.fleet:
            key = f"secondaries.{site.name}.link" if scenario.secondaries else "link"
            if site.link.forward.rate or site.link.reverse.rate:
                refuse(f"{key}.rate", "a rate is not emulated on inventory hosts: linkem on "
                       "each secondary delays and drops, it does not shape",
                       "remove the rate (delay, jitter and loss are emulated)")  # fmt: skip
            if (site.link.impaired or scenario.faults) and site.link.backend == "netem":
                refuse(f"{key}.backend", "inventory hosts emulate a site's link, and take "
                       "its faults, with linkem",
                       "remove link.backend or set it to 'linkem'")  # fmt: skip
        if scenario.trigger == "catalog":
            refuse(
                "trigger",
                "catalog cases are not run on inventory hosts: their flow writes the catalog "
                "zone's versions where the harness runs",
                "use trigger = 'notify', 'retransfer', 'cold-start' or 'stream', or run the "
                "scenario on the netns backend (without --inventory)",
            )
        if scenario.trigger == "cold-start" and scenario.cold_start_poll == "off":
            refuse(
                "cold_start_poll",
                "a cold start timed by the secondaries' logs alone is not run on inventory "
                "hosts: their zones are polled there",
                "set cold_start_poll to a rate (queries per second), or run the scenario on "
                "the netns backend",
            )
        if scenario.verify == "disk":
            refuse(
                "verify",
                "copies on inventory hosts are read back by AXFR on their host: the harness "
                "does not read the servers' own files there",
                'set verify = "served" or remove the key, or run the scenario on the netns backend',
            )
        for index, fault in enumerate(scenario.faults):
            if fault.target is not None and fault.target not in scenario.sites:
                refuse(f"faults[{index}].target", f"the fault's target {fault.target!r} names "
                       "a host of the scenario's own: on inventory hosts the hosts are the "
                       "inventory's", "target the host's site")  # fmt: skip
        for site in scenario.fleet:
            if site.suite != DEFAULT_SUITE or scenario.servers.primary.suite != DEFAULT_SUITE:
                refuse(f"secondaries.{site.name}.suite",
                       "the hosts run the servers of their own Debian release",
                       "remove the suite (run.json records each host's versions)")  # fmt: skip


def on_inventory(plan: CasePlan, matched: dict[str, list[InventoryHost]], primary: str) -> CasePlan:
    """The case's plan with the inventory's hosts: the primary by its inventory name, each
    site's secondaries those of the inventory at that site (their count, their names)."""
    old = plan.primary
    hosts: list[HostPlan] = [HostPlan(primary, "primary", old.server, old.settings, old.link)]
    for site in plan.case.scenario.fleet:
        template = next(h for h in plan.secondaries if h.site == site.name)
        hosts += [dataclasses.replace(template, name=host.name) for host in matched[site.name]]
    return dataclasses.replace(plan, hosts=tuple(hosts))


def remote_binaries(
    plans: list[CasePlan], fleet: RemoteFleet
) -> tuple[dict[str, dict[str, ServerBinary]], dict[tuple[str, str, str], ServerBinary]]:
    """Every host's server binary, versioned on that host (its own Debian release)."""
    per_host: dict[tuple[str, str, str], ServerBinary] = {}
    per_case: dict[str, dict[str, ServerBinary]] = {}
    for plan in plans:
        per_case[plan.name] = {}
        for host in plan.hosts:
            kind = host.server.kind
            path = str(host.server.binary or Path("/usr/sbin") / server_class(kind).daemon)
            key = (host.name, kind, path)
            if key not in per_host:
                channel = fleet.channel(host.name)

                def run(argv: list[str], channel: Any = channel) -> str:
                    return str(channel.call("run", argv=argv)["output"])

                version = probe_version(kind, Path(path), run, where=f" on {host.name}")
                per_host[key] = ServerBinary(kind, Path(path), version)
            per_case[plan.name][host.name] = per_host[key]
    distinct = {(b.kind, str(b.path), b.version): b for b in per_host.values()}
    return per_case, distinct


def with_clock(record: TransferRecord, fleet: RemoteFleet, primary: str) -> TransferRecord:
    """A server-to-server duration spans the clocks of the hosts that saw its ends: its
    error is the polling's plus theirs; the parts go to extra["clock"]."""
    if record.method != SERVER_TO_SERVER or record.duration_s is None:
        return record
    ends = {"secondary": record.host}
    if record.trigger == "notify":
        ends["primary"] = primary  # t0: the NOTIFY on the primary's wire
    readings = {role: fleet.clock(host) for role, host in ends.items() if host}
    clock_error = sum(r.error_s for r in readings.values())
    poll_error = record.duration_error_s or 0.0
    record.duration_error_s = round(poll_error + clock_error, 6)
    record.extra["clock"] = {
        "poll_error_s": poll_error,
        "clock_error_s": round(clock_error, 7),
        **{role: {"host": ends[role], **r.to_json()} for role, r in readings.items()},
        "clock_error_over_10pct": clock_error > CLOCK_FLAG * record.duration_s,
    }
    return record


class RemoteSession(GroupSession):
    """One visit of a group on the inventory's hosts: the case engine (measure/live.py
    `LiveCase`) over the hosts' agents as places (remote/place.py), their TCP settings set
    by Ansible, the slots run by GroupSession.run, the hosts' folders fetched back into the
    visit's folder at the end."""

    def __init__(self, group: GroupPlan, visit_dir: Path, run: RunContext) -> None:
        fleet: RemoteFleet = run.remote
        primary = group.first.primary.name
        emit = run.emit

        def emit_with_clock(record: TransferRecord) -> None:
            add_transfer(fleet.path_totals, record.host, record.extra.get("path"))
            emit(with_clock(record, fleet, primary))

        super().__init__(group, visit_dir, dataclasses.replace(run, emit=emit_with_clock))
        self.fleet = fleet
        self.host_settings: dict[str, dict[str, Any]] = {}
        self.links: dict[str, dict[str, Any]] = {}  # host -> its linkem's config and rules

    def _places(self) -> AgentPlaces:
        """Every host of the inventory through its agent; the visit's folder here is each
        host's cases/<visit> in its run folder (fetch.yml brings it back)."""
        fleet = self.fleet
        hosts = {h.name: (h.address, fleet.channel(h.name), fleet.run_dir(h.name))
                 for h in fleet.inventory.hosts}  # fmt: skip

        def sync(name: str) -> Callable[[dict[str, Path], str], None]:
            return lambda files, dest: fleet.sync(name, files, dest, basis=[])

        return AgentPlaces(hosts, fleet.clock, results=self.dir.parent.parent, sync=sync,
                           serving=fleet.metrics)  # fmt: skip

    def __enter__(self) -> RemoteSession:
        group, run = self.group, self.run_ctx
        spent = run.spent
        self._stack = contextlib.ExitStack()
        try:
            zones, tsig = self._generate()
            tls = None
            if group.tls:  # made here (0600), put on the hosts, removed with the run's folder
                address = self.fleet.inventory.primary.address
                tls = new_tls(self.dir / "tls", TLS_HOSTNAME, address)
            places = self._places()
            with spent.phase("testbed"):
                if self.fleet.sets_sysctls:
                    run.status(f"{group.name}: the hosts' TCP settings (ansible)")
                    self.fleet.push({}, {h.name: h.settings.sysctls() for h in group.first.hosts})
                self.host_settings = self._read_settings()
            self._stack.callback(self._close_remote)
            with spent.phase("testbed"):
                self._start_links()
                places.links = {h.name: h.link for h in group.first.secondaries
                                if h.name in self.links}  # fmt: skip
                places.link_faults = group.faults
            by_case = {case.name: run.binaries[case.name] for case in group.cases}
            engine = LiveStreamCase if group.first.stream is not None else LiveCase
            self.live = engine(group, self.dir, places, self.binaries, zones, tsig, tls,
                               run.sampler, spent, by_case)  # fmt: skip
            run.status(f"{group.name}: primary loading {group.first.zone_spec.records:,} records")
            with spent.phase("primary_load"):
                self.live.start_primary()
        except (CaseFailed, XfrTimeout) as exc:
            self.broken, self.broken_kind = str(exc), "server"
        except BaseException:
            self._teardown()
            raise
        return self

    def __exit__(self, kind: Any, value: Any, tb: Any) -> None:
        try:
            self._write_case_files()
        finally:
            self._teardown()

    def _read_settings(self) -> dict[str, dict[str, Any]]:
        """What each host's TCP settings are for this visit, read back there (case.json)."""
        keys = list(PER_HOST_SYSCTLS)
        return {
            host.name: {"sysctls": self.fleet.channel(host.name).call("sysctls", keys=keys)}
            for host in self.group.first.hosts
        }

    def _start_links(self) -> None:
        """linkem on each secondary host whose site's link is impaired, on every one when
        the group has faults (its control socket in the host's run folder), for this visit
        (the cases of a group share their sites' links); its files in the visit's folder."""
        plan = self.group.first
        primary = self.fleet.inventory.primary.address
        for host in plan.secondaries:
            run_dir = self.fleet.run_dir(host.name)
            folder = f"{run_dir}/cases/{self.dir.name}/{host.name}-link"
            control = control_socket(run_dir) if self.group.faults else None
            built = host_link(host.name, host.link, primary, plan.name, folder, control)
            if built is None:
                continue
            config, rules = built
            self.fleet.channel(host.name).call("link_start", wait=30, config=config, rules=rules)
            self.links[host.name] = {"linkem_config": config, "iptables": rules}

    def _stop_links(self) -> None:
        for host in list(self.links):
            self.fleet.channel(host).call("link_stop", wait=30)

    def _close_remote(self) -> None:
        live = self.live
        try:
            try:
                if live is not None:
                    live.close()
            finally:
                self._stop_links()
        finally:
            # The hosts' server folders (configs, logs, stdout, stderr) where the local
            # backends put them: results/<run-id>/cases/<visit>/<host>/.
            self.fleet.fetch([f"cases/{self.dir.name}"], self.dir.parent.parent)

    def _write_case_files(self) -> None:
        # "links" as the netns testbed writes them (each secondary's, read by the report's
        # link check); "emulation": what linkem ran with on each host that emulated one.
        links = {h.name: h.link.model_dump(mode="json") for h in self.group.first.secondaries}
        emulation = {"backend": "linkem", "hosts": self.links}
        testbed = {"topology": "inventory", **self.fleet.describe(), "hosts": self.host_settings,
                   "links": links, "emulation": emulation}  # fmt: skip
        metas = [
            case_meta(plan, testbed=testbed, bound=self.contexts[plan.name].bound,
                      binaries=self.binaries, backend="inventory")
            for plan in self.group.cases
        ]  # fmt: skip
        write_case_files(self.dir, metas)


def open_fleet(
    loaded: LoadedScenario,
    path: Path,
    store: RunStore,
    stack: contextlib.ExitStack,
    say: Callable[[str], None],
) -> tuple[RemoteFleet, list[CasePlan], dict[str, dict[str, ServerBinary]]]:
    """The inventory read and matched, its hosts deployed (the fleet enters `stack`, which
    tears it down), every host's servers versioned there; the plans on those hosts."""
    inventory = load_inventory(path)
    check_scenario(loaded)
    matched = match_sites(inventory, loaded)
    plans = [on_inventory(plan_case(case), matched, inventory.primary.name)
             for case in loaded.cases]  # fmt: skip
    say(f"deploying {len(inventory.hosts)} hosts of {path} with ansible-playbook")
    emulated = any(host.link.impaired for plan in plans for host in plan.secondaries)
    binary = linkem.find_binary() if emulated else None
    fleet = stack.enter_context(
        RemoteFleet(inventory, store.run_id, store.folder / "ansible", linkem=binary)
    )
    fleet.sets_sysctls = any(host.settings.sysctls() for plan in plans for host in plan.hosts)
    per_case, distinct = remote_binaries(plans, fleet)
    servers: dict[str, ServerInfo] = {}
    for binary in distinct.values():
        key = f"{binary.kind}@{binary.path}"
        key = key if key not in servers else f"{key}#{binary.version}"
        servers[key] = ServerInfo(path=str(binary.path), **binary.describe())
    store.meta.backend = "inventory"
    store.meta.servers = servers
    store.meta.remote = fleet.describe() | {"paths": measure_paths(inventory, fleet.channel)}
    deploy = fleet.costs.get("deploy", {})
    per_host = ", ".join(f"{h} {s:.1f} s" for h, s in sorted(deploy.get("per_host_s", {}).items()))
    clocks = ", ".join(
        f"{h} {c.offset_s * 1e3:+.3f} ms ± {c.error_s * 1e3:.3f}"
        for h in fleet.channels
        for c in [fleet.clock(h)]
    )
    say(f"deployed in {deploy.get('wall_s', 0):.1f} s (tasks per host: {per_host}); "
        f"clock offsets: {clocks}")  # fmt: skip
    return fleet, plans, per_case


# Where a run on inventory hosts lists its Prometheus targets while it lasts, beside the
# run folders: a Prometheus's file_sd_configs take results/prometheus-targets/*.json (a glob
# may name files, not folders).
PROMETHEUS_TARGETS = "prometheus-targets"


def prometheus_targets(controller: str, agents: dict[str, str]) -> list[dict[str, Any]]:
    """Prometheus file_sd targets of a run on inventory hosts (pure): the run's exporter
    (transfers, fleet figures) and each host's agent (its servers' samples)."""
    out = [{"targets": [controller], "labels": {"xfrbench_host": "controller"}}]
    out += [
        {"targets": [target], "labels": {"xfrbench_host": host}} for host, target in agents.items()
    ]
    return out


def serve_host_metrics(
    fleet: RemoteFleet, store: RunStore, loaded: LoadedScenario, exporter: Any, port: int
) -> str:
    """The run is served to Prometheus: each host's agent serves its own servers' samples
    where they run, and results/prometheus-targets/<run-id>.json (for file_sd_configs)
    lists them beside the run's exporter while the run lasts. Returns what to tell."""
    fleet.serve_metrics(store.run_id, loaded.scenario.name, loaded.spec_hash, port)
    address = exporter.address if exporter.address not in ("0.0.0.0", "::") else "127.0.0.1"
    controller = f"[{address}]:{exporter.port}" if ":" in address else f"{address}:{exporter.port}"
    path = store.folder.parent / PROMETHEUS_TARGETS / f"{store.run_id}.json"
    path.parent.mkdir(exist_ok=True)
    fleet.record_file(path)  # the targets go with the run, a killed one's with `clean`
    write_json_atomic(path, prometheus_targets(controller, fleet.metrics))
    hosts = ", ".join(f"{host} {target}" for host, target in fleet.metrics.items())
    return f"each host serves its samples for Prometheus ({hosts}); targets in {path}"


def finish_fleet(fleet: RemoteFleet, store: RunStore) -> list[str]:
    """The end of the run on the hosts (clocks again, agents, teardown.yml), written into
    run.json's `remote` before it is finished; returns what was flagged."""
    try:
        fleet.close()
    finally:
        paths = (store.meta.remote or {}).get("paths", {})
        for host, totals in fleet.path_totals.items():  # the loss seen as retransmits
            paths.setdefault(host, {})["transfers"] = totals
        store.meta.remote = fleet.describe() | {"paths": paths,
                                                "teardown": fleet.teardown_report}  # fmt: skip
    return []
