"""Building and removing a lab: namespaces, veths, keys, one sshd per host, an inventory.

Its hosts look to the harness like machines of their own: each sshd runs with a private
/var/tmp (a folder of the lab's bound there in its mount namespace), so the default
xfrbench_root /var/tmp/xfrbench is each host's own; and this machine's ssh knows their
host keys (a drop-in in /etc/ssh/ssh_config.d naming the lab's addresses), as it knows the
real hosts an operator has logged in to. An inventory written by hand with nothing but
ansible_host, ansible_user, a key and site then reaches and deploys them.

Everything is written down in a testbed registry (/run/xfrbench/testbeds/<id>.json) before it
is created, so that its address slice is never handed to another testbed and `lab down`
(or `xfrbench clean`, once the lab's sshd has died) removes exactly that. While it is up, the
registry's "driver" is the primary's sshd: a live lab is left alone by `xfrbench clean`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import secrets
import shlex
import shutil
import socket
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from harness.core.errors import EnvironmentProblem, UserInputError
from harness.observe.cgroup import Mount, parse_mountinfo
from harness.spec import SITE_NAME
from harness.testbed import registry as reg
from harness.testbed import topology
from harness.testbed.core import DEFAULT_BLOCK
from harness.testbed.hosts import netns_build_steps, run
from harness.testbed.topology import Endpoint, TopologyPlan

SSHD = Path("/usr/sbin/sshd")
PRIVSEP_DIR = Path("/run/sshd")  # sshd refuses to start without it
CONTROLLER = "controller"  # the segment from this machine's namespace to the lab's router
MAX_SECONDARIES = 30
SSHD_READY_TIMEOUT = 10.0
SSH_CONFIG_DIR = Path("/etc/ssh/ssh_config.d")  # /etc/ssh/ssh_config includes *.conf there
HOST_TMP = "/var/tmp"  # private to each lab host: the default xfrbench_root lives under it
CGROUP_ROOT = "/sys/fs/cgroup"


def labs_dir() -> Path:
    return reg.registry_dir().parent / "labs"


@dataclass(frozen=True)
class LabHost:
    name: str  # its inventory name: ns0 (the primary), ns1 .. nsN
    role: str
    site: str
    address: str
    netns: str


@dataclass(frozen=True)
class Lab:
    lab_id: str
    folder: Path  # keys, sshd configs and logs, the inventory
    inventory: Path
    hosts: tuple[LabHost, ...]
    controller_address: str
    roots: Path  # each host's /var/tmp, seen from this machine: roots/<name>

    @property
    def key(self) -> Path:
        """The client key every host accepts (ansible_ssh_private_key_file)."""
        return self.folder / "id_ed25519"

    def describe(self) -> dict[str, Any]:
        return {
            "lab_id": self.lab_id,
            "inventory": str(self.inventory),
            "hosts": {h.name: {"role": h.role, "site": h.site, "address": h.address}
                      for h in self.hosts},
        }  # fmt: skip


def lab_layout(count: int, sites: Sequence[str]) -> list[tuple[str, str, str]]:
    """(name, role, site) of a primary and `count` secondaries spread over `sites` in
    contiguous runs (near: ns1 ns2, far: ns3), pure."""
    if not 1 <= count <= MAX_SECONDARIES:
        raise UserInputError(
            f"a lab holds 1 to {MAX_SECONDARIES} secondaries, not {count}",
            key="N",
            fix="e.g. xfrbench lab up 3",
        )
    if not sites or len(set(sites)) != len(sites) or len(sites) > count:
        raise UserInputError(
            f"sites {','.join(sites)!r}: give 1 to {count} distinct names",
            key="--sites",
            fix="e.g. --sites near,far",
        )
    for site in sites:
        if not SITE_NAME.match(site):
            raise UserInputError(
                f"{site!r} is not a site name",
                key="--sites",
                fix="1-20 lowercase letters and digits, starting with a letter",
            )
    out = [("ns0", "primary", "")]
    per_site, extra = divmod(count, len(sites))
    index = 1
    for position, site in enumerate(sites):
        for _ in range(per_site + (1 if position < extra else 0)):
            out.append((f"ns{index}", "secondary", site))
            index += 1
    return out


def sshd_config(host: str, address: str, folder: Path) -> str:
    """One host's sshd: its own address, host key, pid file; keys only, from the lab's
    authorized_keys; sftp for Ansible's file transfers."""
    return "\n".join(
        [
            f"ListenAddress {address}",
            "Port 22",
            f"HostKey {folder / host / 'ssh_host_ed25519_key'}",
            f"PidFile {folder / host / 'sshd.pid'}",
            f"AuthorizedKeysFile {folder / 'authorized_keys'}",
            "PermitRootLogin prohibit-password",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "UsePAM no",
            "StrictModes yes",
            "PrintMotd no",
            "MaxSessions 64",
            "MaxStartups 64",
            "Subsystem sftp /usr/lib/openssh/sftp-server",
            "",
        ]
    )


def ssh_client_config(lab_id: str, addresses: Sequence[str], known_hosts: Path) -> str:
    """This machine's ssh told the lab hosts' keys (and no other host's), pure."""
    return "\n".join(
        [
            f"# xfrbench lab {lab_id}: removed by `xfrbench lab down {lab_id}`",
            f"Host {' '.join(addresses)}",
            f"    UserKnownHostsFile {known_hosts}",
            "    StrictHostKeyChecking yes",
            "",
        ]
    )


def cgroup_mounts(mounts: Sequence[Mount]) -> list[str]:
    """Shell commands mounting this machine's cgroup hierarchies again where `ip netns
    exec` hid them (pure). It mounts a sysfs of the namespace's own over /sys, which hides
    /sys/fs/cgroup: a host's agent would find no cgroup and read its servers' CPU from
    /proc in 10 ms ticks, where a real host's agent (and the netns sampler) reads a
    cgroup's µs. Mounting a v1 hierarchy with the same controllers, or cgroup2, gives the
    same hierarchy, so the lab's groups are this machine's (teardown and `clean` see
    them). A mount that fails leaves that host on /proc, which its samples then say."""
    out = []
    for mount in mounts:
        where = mount.mountpoint
        if not (where == CGROUP_ROOT or where.startswith(CGROUP_ROOT + "/")):
            continue
        if mount.fstype == "tmpfs" and where == CGROUP_ROOT:
            out.append(f"mount -t tmpfs -o mode=755 tmpfs {where}")
        elif mount.fstype in ("cgroup", "cgroup2"):
            options = ",".join(sorted(o for o in mount.options if o not in ("rw", "ro")))
            made = f"mkdir -p {shlex.quote(where)} && " if where != CGROUP_ROOT else ""
            flags = f"-o {shlex.quote(options)} " if options else ""
            out.append(f"{{ {made}mount -t {mount.fstype} {flags}{mount.fstype} "
                       f"{shlex.quote(where)}; }} 2>/dev/null")  # fmt: skip
    return out


def sshd_argv(config: Path, tmp: Path, cgroups: Sequence[str] = ()) -> list[str]:
    """The host's sshd with `tmp` as its /var/tmp: bound in the mount namespace `ip netns
    exec` makes for it (its / a slave of this machine's, so the mount stays there and goes
    with its last process); `cgroups` (cgroup_mounts) run there first."""
    again = "".join(f"{line}; " for line in cgroups)
    return [
        "sh", "-c", f'{again}mount --bind "$0" {HOST_TMP} && exec "$@"', str(tmp),
        str(SSHD), "-D", "-e", "-f", str(config),
    ]  # fmt: skip


def inventory_data(lab: Lab, key: Path) -> dict[str, Any]:
    """The lab as an Ansible inventory, as an operator writes one: the documented defaults
    (xfrbench_root, the interpreter) and this machine's ssh do the rest."""

    def host_vars(host: LabHost) -> dict[str, Any]:
        values: dict[str, Any] = {"ansible_host": host.address}
        if host.site:
            values["site"] = host.site
        return values

    return {
        "all": {
            "vars": {
                "ansible_user": "root",
                "ansible_ssh_private_key_file": str(key),
                "xfrbench_lab": lab.lab_id,
            },
            "children": {
                "primary": {
                    "hosts": {h.name: host_vars(h) for h in lab.hosts if h.role == "primary"}
                },
                "secondaries": {
                    "hosts": {h.name: host_vars(h) for h in lab.hosts if h.role == "secondary"}
                },
            },
        }
    }


# --- building -----------------------------------------------------------------------------


def _keygen(path: Path, comment: str) -> str:
    run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)])
    os.chmod(path, 0o600)
    return path.with_suffix(".pub").read_text().strip()


def _wait_sshd(address: str, proc: subprocess.Popen[Any], log: Path) -> None:
    deadline = time.monotonic() + SSHD_READY_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise EnvironmentProblem(
                f"the lab's sshd on {address} exited {proc.returncode}: "
                + " | ".join(log.read_text(errors="replace").splitlines()[-3:])
            )
        with contextlib.suppress(OSError), socket.create_connection((address, 22), timeout=0.5):
            return
        time.sleep(0.05)
    raise EnvironmentProblem(f"the lab's sshd on {address} did not listen within 10 s")


def _share_privsep_dir(registry: reg.Registry) -> None:
    """Every lab's sshds need /run/sshd for each connection, not only to start: made by the
    first lab that finds none, relied on by each lab alive meanwhile, removed by the last."""
    with reg.locked(registry.path.parent):
        others = reg.shared_dirs_of_others(
            reg.load_all(registry.path.parent)[0], registry.testbed_id
        )
        if not PRIVSEP_DIR.exists():
            registry.add("shared_dir", path=str(PRIVSEP_DIR))
            PRIVSEP_DIR.mkdir(mode=0o755)
        elif str(PRIVSEP_DIR) in others:
            registry.add("shared_dir", path=str(PRIVSEP_DIR))


def _plan(lab_id: str, slice_: str, layout: list[tuple[str, str, str]]) -> TopologyPlan:
    endpoints = [Endpoint(name, role, site=site) for name, role, site in layout]  # type: ignore[arg-type]
    return topology.plan_topology(
        lab_id, DEFAULT_BLOCK, slice_, [*endpoints, Endpoint(CONTROLLER, "secondary")]
    )


def _without_controller(plan: TopologyPlan) -> TopologyPlan:
    return dataclasses.replace(
        plan,
        namespaces={k: v for k, v in plan.namespaces.items() if k != CONTROLLER},
        segments={k: v for k, v in plan.segments.items() if k != CONTROLLER},
    )


def _new_registry(layout: list[tuple[str, str, str]]) -> tuple[reg.Registry, TopologyPlan]:
    directory = reg.registry_dir()
    network = topology.parse_block(DEFAULT_BLOCK)
    prefixlen = topology.slice_prefixlen(network, len(layout) + 1)
    with reg.locked(directory):
        registries, _ = reg.load_all(directory)
        used = {str(r.data.get("slice")) for r in registries if r.data.get("slice")}
        for _ in range(100):
            lab_id = secrets.token_hex(3)
            if not (directory / f"{lab_id}.json").exists() and not (labs_dir() / lab_id).exists():
                break
        else:  # pragma: no cover - 16M ids
            raise EnvironmentProblem("could not find a free lab id")
        try:
            slice_ = topology.choose_slice(DEFAULT_BLOCK, lab_id, used, prefixlen)
        except LookupError as exc:
            raise EnvironmentProblem(str(exc)) from None
        registry = reg.Registry.create(directory, lab_id, label="lab", lab=True, slice=slice_)
    return registry, _plan(lab_id, slice_, layout)


def lab_up(
    count: int, sites: Sequence[str] = ("near", "far"), inventory: Path | None = None
) -> Lab:
    """Build a lab of a primary and `count` secondaries; returns it once every sshd listens.
    On any failure everything built so far is removed."""
    if os.geteuid() != 0:
        raise EnvironmentProblem("`xfrbench lab up` needs root (namespaces, sshd)")
    if not SSHD.exists():
        raise EnvironmentProblem(f"{SSHD} is missing: install openssh-server (make setup does)")
    layout = lab_layout(count, sites)
    registry, plan = _new_registry(layout)
    try:
        return _build(registry, plan, layout, inventory)
    except BaseException:
        reg.undo(registry)
        raise


def _build(
    registry: reg.Registry,
    plan: TopologyPlan,
    layout: list[tuple[str, str, str]],
    inventory: Path | None,
) -> Lab:
    lab_id = plan.testbed_id
    folder = labs_dir() / lab_id
    roots = Path("/var/tmp") / f"xfrbench-lab-{lab_id}"
    for path in (folder, roots):
        registry.add("lab_dir", path=str(path))
        path.mkdir(mode=0o700, parents=True)
    _share_privsep_dir(registry)
    for step in netns_build_steps(_without_controller(plan), {n: 1500 for n, _, _ in layout}):
        if step.item is not None:
            registry.add(**step.item)
        run(step.argv, check=step.check)
    controller = plan.segments[CONTROLLER]
    router = plan.namespaces[topology.ROUTER]
    outside = f"xfbl{lab_id}"
    registry.add("lab_link", name=outside)
    for argv in (
        ["ip", "link", "add", outside, "type", "veth", "peer", "name", controller.router_if,
         "netns", router],
        ["ip", "addr", "add", f"{controller.host_address}/{controller.prefixlen}", "dev", outside],
        ["ip", "link", "set", outside, "up"],
        ["ip", "-n", router, "addr", "add", f"{controller.router_address}/{controller.prefixlen}",
         "dev", controller.router_if],
        ["ip", "-n", router, "link", "set", controller.router_if, "up"],
        ["ip", "route", "add", plan.slice, "via", controller.router_address],
    ):  # fmt: skip
        run(argv)
    hosts = tuple(
        LabHost(name, role, site, plan.address(name), plan.namespaces[name])
        for name, role, site in layout
    )
    client_key = folder / "id_ed25519"  # Lab.key
    client = _keygen(client_key, f"xfrbench-lab-{lab_id}")
    authorized = folder / "authorized_keys"
    authorized.write_text(f'from="{controller.host_address}" {client}\n')
    os.chmod(authorized, 0o600)
    known: list[str] = []
    procs: list[tuple[subprocess.Popen[Any], LabHost]] = []
    cgroups = cgroup_mounts(parse_mountinfo(Path("/proc/self/mountinfo").read_text()))
    for host in hosts:
        own = folder / host.name
        own.mkdir(mode=0o700)
        tmp = roots / host.name
        tmp.mkdir()
        tmp.chmod(0o1777)  # as /var/tmp is
        public = _keygen(own / "ssh_host_ed25519_key", f"{host.name}.lab-{lab_id}")
        known.append(f"{host.address} {' '.join(public.split()[:2])}")
        config = own / "sshd_config"
        config.write_text(sshd_config(host.name, host.address, folder))
        log = own / "sshd.log"
        with log.open("ab") as out:
            proc = subprocess.Popen(
                ["ip", "netns", "exec", host.netns, *sshd_argv(config, tmp, cgroups)],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                start_new_session=True,
            )
        registry.add(
            "process", pid=proc.pid, start=reg.proc_start_time(proc.pid), netns=host.netns,
            argv=[str(SSHD), "-f", str(config)],
        )  # fmt: skip
        procs.append((proc, host))
    known_hosts = folder / "known_hosts"
    known_hosts.write_text("\n".join(known) + "\n")
    client_config = SSH_CONFIG_DIR / f"xfrbench-lab-{lab_id}.conf"
    registry.add("file", path=str(client_config))
    client_config.write_text(ssh_client_config(lab_id, [h.address for h in hosts], known_hosts))
    for proc, host in procs:
        _wait_sshd(host.address, proc, folder / host.name / "sshd.log")
    target = Path(inventory) if inventory is not None else folder / "inventory.yml"
    lab = Lab(lab_id, folder, target.resolve(), hosts, controller.host_address, roots)
    if inventory is not None:
        registry.add("file", path=str(lab.inventory))
    lab.inventory.write_text(
        f"# xfrbench lab {lab_id}: remove it with `xfrbench lab down {lab_id}`\n"
        + yaml.safe_dump(inventory_data(lab, client_key), sort_keys=False)
    )
    registry.data["inventory"] = str(lab.inventory)
    registry.data["lab_hosts"] = lab.describe()["hosts"]
    # From now on the lab lives as long as its primary's sshd, not as long as this process.
    first = procs[0][0]
    registry.data["driver"] = {"pid": first.pid, "start": reg.proc_start_time(first.pid)}
    registry.save()
    return lab


# --- finding and removing -----------------------------------------------------------------


def find_lab(lab_id: str | None = None, inventory: Path | None = None) -> reg.Registry:
    """The registry of the lab named by id or by its inventory (or the only lab up)."""
    registries, _ = reg.load_all()
    labs = [r for r in registries if r.data.get("lab")]
    if inventory is not None:
        wanted = str(Path(inventory).resolve())
        labs = [r for r in labs if r.data.get("inventory") == wanted]
    if lab_id is not None:
        labs = [r for r in labs if r.testbed_id == lab_id]
    if len(labs) == 1:
        return labs[0]
    named = ", ".join(r.testbed_id for r in labs) or "none"
    raise UserInputError(
        f"{'no' if not labs else 'more than one'} lab matches (labs up: {named})",
        key="ID",
        fix="name the lab: xfrbench lab down ID (`xfrbench lab list` shows them)",
    )


def lab_holding(addresses: Sequence[str], directory: Path | None = None) -> str | None:
    """The live lab whose hosts have all these addresses (an inventory of its hosts written
    by hand names no xfrbench_lab), or None."""
    wanted = set(addresses)
    for registry in reg.load_all(directory)[0]:
        hosts = registry.data.get("lab_hosts") or {}
        if wanted and wanted <= {str(h.get("address")) for h in hosts.values()}:
            return registry.testbed_id
    return None


def lab_down(lab_id: str | None = None, inventory: Path | None = None) -> list[str]:
    """Remove a lab: its sshds, namespaces, keys, folders and inventory; returns what, a
    line each ("removed ..."), and what it left and why."""
    if os.geteuid() != 0:
        raise EnvironmentProblem("`xfrbench lab down` needs root")
    registry = find_lab(lab_id, inventory)
    done, notes, problems = reg.undo(registry)
    if problems:
        raise EnvironmentProblem("lab teardown: " + "; ".join(notes + problems))
    return [f"removed {line}" for line in done] + notes


def list_labs() -> list[dict[str, Any]]:
    registries, _ = reg.load_all()
    return [
        {"lab_id": r.testbed_id, "inventory": r.data.get("inventory"),
         "hosts": r.data.get("lab_hosts", {}), "alive": r.driver_alive()}
        for r in registries if r.data.get("lab")
    ]  # fmt: skip


def _undo_lab_dir(action: reg.Action) -> str:
    path = Path(action.target)
    if not path.exists():
        return ""
    shutil.rmtree(path)
    return f"folder {path}"


def _undo_lab_link(action: reg.Action) -> str:
    name = action.target
    if not Path("/sys/class/net", name).exists():
        return ""  # went with the router's namespace
    result = subprocess.run(["ip", "link", "del", name], capture_output=True, text=True)
    if result.returncode != 0:
        return f"!ip link del {name}: {result.stderr.strip()}"
    return f"link {name}"


reg.register_undo("lab_dir", lambda item: str(item["path"]), _undo_lab_dir)
reg.register_undo("lab_link", lambda item: str(item["name"]), _undo_lab_link)
