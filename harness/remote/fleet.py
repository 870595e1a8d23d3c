"""One run on the hosts of an inventory: deployed by Ansible, driven through an agent per
host, torn down exactly (a context manager).

    with RemoteFleet(inventory, run_id, work) as fleet:   # deploy.yml, agents, clocks
        fleet.channel("ns1").call(...)
        fleet.push({...}); fleet.fetch(paths, into)       # push.yml, fetch.yml per visit
    # clocks again, agents stopped (their servers with them), teardown.yml, masters closed

Before anything touches a host, a testbed registry (/run/xfrbench/testbeds/<id>.json) lists
the inventory (resolved, remote/record.py), the run and each host's folder; `xfrbench clean`
(or `clean --inventory`) runs teardown.yml from it when the driver died, which stops only
the servers the run's pid files name (their start times checked) and removes only that
run's folder.
"""

from __future__ import annotations

import contextlib
import secrets
import tarfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from harness.core.errors import UserInputError, XfrbenchError
from harness.inventory import Inventory, InventoryHost
from harness.remote.bundle import build_bundle, python_tag, ship_bundle
from harness.remote.channel import AgentChannel, AgentError, ClockReading, open_channel
from harness.remote.playbooks import PlaybookResult, run_playbook
from harness.remote.record import record_run, remote_run_dir
from harness.remote.sync import sync_files
from harness.servers import DIALECTS
from harness.testbed import registry as reg

CONTROL_ROOT = Path("/run/xfrbench/remote")  # ssh control sockets, playbook logs, results
# What deploy.yml installs when missing: each dialect's packages (the servers and their
# tools, as `make setup` installs them), what the agent runs (ip, ping, iperf3, iptables
# for the NFQUEUE rules feeding linkem) and rsync, which new zone versions arrive by; and
# the system services the server packages start, which it stops.
PACKAGES = (
    *(package for dialect in DIALECTS.values() for package in dialect.packages),
    "iproute2", "iputils-ping", "procps", "tar", "rsync", "iperf3", "iptables",
)  # fmt: skip
SERVICES = tuple(service for dialect in DIALECTS.values() for service in dialect.services)


class RemoteFleet:
    def __init__(
        self, inventory: Inventory, run_id: str, log_dir: Path, linkem: Path | None = None
    ) -> None:
        self.inventory = inventory
        self.linkem = linkem  # the controller's linkem, shipped when a site's link is emulated
        self.run_id = run_id
        self.tag = secrets.token_hex(3)
        self.work = CONTROL_ROOT / f"{run_id}-{self.tag}"
        self.control_dir = self.work / "cp"
        self.log_dir = log_dir  # playbook logs kept with the run's results
        self.channels: dict[str, AgentChannel] = {}
        self.clocks: dict[str, list[ClockReading]] = {}
        self.deploy_result: PlaybookResult | None = None
        self.costs: dict[str, Any] = {}  # wall seconds per stage, and per host
        self.registry: reg.Registry | None = None
        self.teardown_report: list[str] = []
        self.metrics: dict[str, str] = {}  # host -> "address:port" its agent serves
        self.path_totals: dict[str, dict[str, Any]] = {}  # the run's retransmits per path
        self.sets_sysctls = False  # some visit sets TCP settings: push.yml sets every host's

    # --- paths ---------------------------------------------------------------------------

    def run_dir(self, name: str) -> str:
        return remote_run_dir(self.inventory.host(name), self.run_id)

    def channel(self, name: str) -> AgentChannel:
        return self.channels[name]

    # --- lifecycle -----------------------------------------------------------------------

    def __enter__(self) -> RemoteFleet:
        try:
            self._deploy()
        except BaseException:
            self.close(failing=True)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close(failing=exc[0] is not None)

    def _variables(self, **more: Any) -> dict[str, Any]:
        return {"xfrbench_run": self.run_id, **more}

    def _deploy(self) -> None:
        self.work.mkdir(mode=0o700, parents=True, exist_ok=True)
        directory = reg.registry_dir()
        with reg.locked(directory):
            self.registry = reg.Registry.create(
                directory, self.tag, label=f"remote run {self.run_id}", remote=True
            )
        record_run(self.registry, self.inventory, self.run_id, self.work, self.log_dir)
        began = time.monotonic()
        bundle = build_bundle()
        self.costs["bundle_s"] = round(time.monotonic() - began, 3)
        variables = self._variables(
            xfrbench_python_tag=python_tag(),
            xfrbench_packages=list(PACKAGES),
            xfrbench_services=list(SERVICES),
        )
        if self.linkem is not None:
            variables["xfrbench_linkem"] = str(self.linkem)
        self.deploy_result = self._playbook("deploy", variables)
        deployed = self.deploy_result
        self.costs["deploy"] = {
            "wall_s": round(deployed.wall_s, 3),
            "per_host_s": deployed.seconds(),
            "tasks": {host: entry.get("tasks", {}) for host, entry in deployed.hosts.items()},
        }
        hosts = self.inventory.hosts
        with ThreadPoolExecutor(max_workers=len(hosts)) as pool:
            shipped = list(
                pool.map(lambda h: ship_bundle(h, bundle, f"{self.run_dir(h.name)}/agent"), hosts)
            )
        self.costs["agent_s"] = {h.name: round(s, 3) for h, s in zip(hosts, shipped, strict=True)}
        began = time.monotonic()
        with ThreadPoolExecutor(max_workers=len(self.inventory.hosts)) as pool:
            opened = dict(
                zip(
                    [h.name for h in self.inventory.hosts],
                    pool.map(self._open, self.inventory.hosts),
                    strict=True,
                )
            )
        self.channels.update(opened)
        self.costs["agents_s"] = round(time.monotonic() - began, 3)
        self.measure_clocks()

    def _open(self, host: InventoryHost) -> AgentChannel:
        run_dir = remote_run_dir(host, self.run_id)
        return open_channel(
            host, python=host.python, bundle=f"{run_dir}/agent", run_dir=run_dir,
            tag=self.tag,
        )  # fmt: skip

    def _playbook(self, name: str, variables: dict[str, Any], check: bool = True) -> Any:
        return run_playbook(
            name, self.inventory, variables, self.log_dir, control_dir=self.control_dir,
            forks=max(5, len(self.inventory.hosts)), check=check,
        )  # fmt: skip

    def measure_clocks(self) -> dict[str, ClockReading]:
        """Every host's clock against the controller's, all at once."""
        with ThreadPoolExecutor(max_workers=len(self.channels)) as pool:
            readings = dict(
                zip(self.channels, pool.map(lambda c: c.measure_clock(), self.channels.values()),
                    strict=True)
            )  # fmt: skip
        for name, reading in readings.items():
            self.clocks.setdefault(name, []).append(reading)
        return readings

    def clock(self, name: str) -> ClockReading:
        """The host's latest reading."""
        return self.clocks[name][-1]

    def describe(self) -> dict[str, Any]:
        return {
            "inventory": self.inventory.describe(),
            "run_dirs": {h.name: remote_run_dir(h, self.run_id) for h in self.inventory.hosts},
            "clocks": {n: [r.to_json() for r in rs] for n, rs in self.clocks.items()},
            "costs": self.costs,
        }

    def serve_metrics(self, run_id: str, scenario: str, spec_hash: str, port: int) -> None:
        """Each host's agent serves its own samples on /metrics at the host's address, on
        its xfrbench_metrics_port or else `port` (0: any free one), for the run's
        Prometheus to scrape there (self.metrics: host -> "address:port")."""

        def serve(host: InventoryHost) -> str:
            wanted = port if host.metrics_port is None else host.metrics_port
            try:
                got = self.channel(host.name).call(
                    "metrics_serve", run_id=run_id, scenario=scenario, spec_hash=spec_hash,
                    address=host.address, port=wanted,
                )  # fmt: skip
            except AgentError as exc:
                raise UserInputError(
                    f"host {host.name}: its agent cannot serve /metrics on port {wanted}: {exc}",
                    file=self.inventory.path,
                    key=f"{host.name}.xfrbench_metrics_port",
                    fix="give the host a free port as xfrbench_metrics_port (0: any)",
                ) from None
            address = f"[{host.address}]" if ":" in host.address else host.address
            return f"{address}:{got}"

        hosts = self.inventory.hosts
        with ThreadPoolExecutor(max_workers=len(hosts)) as pool:
            served = list(pool.map(serve, hosts))
        self.metrics = {host.name: target for host, target in zip(hosts, served, strict=True)}

    def record_file(self, path: Path) -> None:
        """A file of the controller's that goes with the run (at teardown, or `clean`)."""
        assert self.registry is not None
        self.registry.add("file", path=str(path))

    # --- per visit -----------------------------------------------------------------------

    def push(
        self, files: dict[str, list[dict[str, Any]]], sysctls: dict[str, dict[str, str]] | None
    ) -> PlaybookResult:
        """push.yml: files {host: [{src, dest, mode}]}, and each host's TCP settings for the
        visit ({key: value}, every host's) when the run sets any (None: it sets none)."""
        variables = self._variables(xfrbench_push=files)
        if sysctls is not None:
            variables["xfrbench_sysctls"] = sysctls
        result = self._playbook("push", variables)
        self.costs.setdefault("push_s", []).append(round(result.wall_s, 3))
        return result

    def sync(self, name: str, files: dict[str, Path], dest: str, basis: list[str]) -> None:
        """rsync `files` ({name: local path}) into the host's folder `dest`, as deltas
        against the same names in `basis` (remote/sync.py); the seconds and bytes it took
        go to costs["sync"]."""
        spent, sent = sync_files(self.inventory.host(name), files, dest, basis, self.control_dir)
        self.costs.setdefault("sync", []).append({"s": round(spent, 3), "sent_bytes": sent})

    def fetch(self, paths: list[str], into: Path) -> PlaybookResult:
        """fetch.yml: `paths` (relative to each host's run folder) back into `into` (the
        local run folder), where the local backends put them."""
        drop = self.work / f"fetch-{time.monotonic_ns()}"
        result = self._playbook(
            "fetch", self._variables(xfrbench_paths=paths, xfrbench_fetch_dir=str(drop)),
            check=False,
        )  # fmt: skip
        for archive in sorted(drop.glob("*.tar.gz")):
            with tarfile.open(archive) as tar:
                tar.extractall(into, filter="data")
            archive.unlink()
        with contextlib.suppress(OSError):
            drop.rmdir()
        self.costs.setdefault("fetch_s", []).append(round(result.wall_s, 3))
        return result

    # --- the end -------------------------------------------------------------------------

    def close(self, failing: bool = False) -> None:
        if self.channels:
            with contextlib.suppress(XfrbenchError, OSError):
                self.measure_clocks()
        for channel in self.channels.values():
            channel.close()
        self.channels.clear()
        if self.registry is None:
            return
        began = time.monotonic()
        done, notes, problems = reg.undo(self.registry)
        self.costs["teardown_s"] = round(time.monotonic() - began, 3)
        self.teardown_report = done + notes
        self.registry = None
        if problems and not failing:
            raise XfrbenchError("remote teardown: " + "; ".join(notes + problems))
