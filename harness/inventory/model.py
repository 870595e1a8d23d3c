"""An inventory as the harness uses it, read by Ansible's own inventory code, and the check
that a scenario's sites are the inventory's.

Ansible parses the file (its `auto`, `yaml` and `ini` plugins, groups and group variables
merged as ansible-playbook merges them); this module only picks what the harness needs and
refuses, naming the file, the key and the fix, what it cannot run on.
"""

from __future__ import annotations

import ipaddress
import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.core.errors import UserInputError
from harness.spec import SITE_NAME, LoadedScenario

PRIMARY_GROUP = "primary"
SECONDARIES_GROUP = "secondaries"
DEFAULT_ROOT = "/var/tmp/xfrbench"  # a host's working folder when the inventory names none
# The interpreter of a host that names none: the one its agent runs with (its compiled
# modules are the controller's, built for Debian 12's python3), and Ansible's modules with
# it. Never Ansible's discovery, which takes the first python3.N on the login shell's PATH
# (a pyenv shim, say) rather than the one the agent was checked against.
DEFAULT_PYTHON = "/usr/bin/python3"
IMPLICIT_SITE = "secondary"  # the one site of a scenario without [[secondaries]]
# Variables that say how Ansible (and the agent's channel) reach a host: kept for run.json.
CONNECTION_VARS = (
    "ansible_host",
    "ansible_port",
    "ansible_user",
    "ansible_ssh_private_key_file",
    "ansible_private_key_file",
    "ansible_ssh_common_args",
    "ansible_ssh_extra_args",
    "ansible_become",
    "ansible_become_user",
    "ansible_python_interpreter",
)


@dataclass(frozen=True)
class SshTarget:
    """How to open an SSH channel to a host, from its Ansible connection variables."""

    host: str
    port: int = 22
    user: str | None = None
    key_file: str | None = None
    options: tuple[str, ...] = ()  # ansible_ssh_common_args and _extra_args, split
    become: bool = False  # run the agent through `sudo -n` (become_method sudo)
    become_user: str = "root"

    def ssh(self) -> list[str]:
        """`ssh ...` up to the host: no prompt ever (BatchMode), no terminal."""
        argv = ["ssh", "-T", "-o", "BatchMode=yes", "-p", str(self.port)]
        if self.user:
            argv += ["-l", self.user]
        if self.key_file:
            argv += ["-i", self.key_file]
        return [*argv, *self.options]

    def argv(self, command: list[str]) -> list[str]:
        """`ssh ... HOST COMMAND`."""
        if self.become:
            command = ["sudo", "-n", "-u", self.become_user, *command]
        return [*self.ssh(), self.host, "--", shlex.join(command)]


@dataclass(frozen=True)
class InventoryHost:
    name: str  # the inventory's name: what records, samples and the report show
    role: str  # "primary" | "secondary"
    site: str  # a secondary's site ("" for the primary)
    address: str  # where its server listens and its peers reach it (an IP address)
    root: str  # its working folder (xfrbench_root)
    ssh: SshTarget
    connection: dict[str, Any] = field(default_factory=dict)  # its connection variables
    metrics_port: int | None = None  # xfrbench_metrics_port: where its agent serves /metrics
    python: str = DEFAULT_PYTHON  # ansible_python_interpreter: the agent's and Ansible's

    def describe(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "site": self.site or None,
            "address": self.address,
            "root": self.root,
            "connection": self.connection,
        }


@dataclass(frozen=True)
class Inventory:
    path: Path
    primary: InventoryHost
    secondaries: tuple[InventoryHost, ...]
    lab: str | None = None  # the lab whose hosts these are (`xfrbench lab up` writes it)

    @property
    def hosts(self) -> tuple[InventoryHost, ...]:
        return (self.primary, *self.secondaries)

    def host(self, name: str) -> InventoryHost:
        return next(h for h in self.hosts if h.name == name)

    def sites(self) -> dict[str, list[InventoryHost]]:
        """Site -> its secondaries, in the inventory's order."""
        out: dict[str, list[InventoryHost]] = {}
        for host in self.secondaries:
            out.setdefault(host.site, []).append(host)
        return out

    def describe(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "hosts": {host.name: host.describe() for host in self.hosts},
        }

    def to_ansible(self) -> dict[str, Any]:
        """The inventory as Ansible YAML data, every value resolved (root, interpreter,
        address): what a run records, so that its hosts can be torn down from the record
        when the file is gone. load_inventory of it gives the same hosts back."""

        def values(host: InventoryHost) -> dict[str, Any]:
            out = {
                **host.connection,
                "xfrbench_address": host.address,
                "xfrbench_root": host.root,
                "ansible_python_interpreter": host.python,
            }
            if host.site:
                out["site"] = host.site
            if host.metrics_port is not None:
                out["xfrbench_metrics_port"] = host.metrics_port
            return out

        groups = {
            PRIMARY_GROUP: {"hosts": {self.primary.name: values(self.primary)}},
            SECONDARIES_GROUP: {"hosts": {h.name: values(h) for h in self.secondaries}},
        }
        top: dict[str, Any] = {"children": groups}
        if self.lab:
            top["vars"] = {"xfrbench_lab": self.lab}
        return {"all": top}

    def playbook_vars(self) -> dict[str, Any]:
        """What every playbook takes for each host, resolved here with their defaults
        (ansible/*.yml read their folder and interpreter from it, never from the inventory
        directly): {"xfrbench_hosts": {name: {"root", "python"}}}."""
        hosts = {h.name: {"root": h.root, "python": h.python} for h in self.hosts}
        return {"xfrbench_hosts": hosts}


def _bool(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "yes", "true", "on")
    return bool(value)


def _read(path: Path) -> list[tuple[str, list[str], dict[str, Any]]]:
    """(host name, its groups, its variables) for every host, as Ansible reads the file."""
    # Unparsable is an error, not a warning and an empty inventory.
    os.environ.setdefault("ANSIBLE_INVENTORY_UNPARSED_FAILED", "true")
    os.environ.setdefault("ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED", "true")
    from ansible.errors import AnsibleError
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader
    from ansible.vars.manager import VariableManager

    loader = DataLoader()
    try:
        manager = InventoryManager(loader=loader, sources=[str(path)])
    except AnsibleError as exc:
        message = " ".join(str(exc).split())
        raise UserInputError(
            f"Ansible cannot parse it: {message}",
            file=path,
            fix="write a YAML or INI inventory (see README, 'Real hosts')",
        ) from None
    variables = VariableManager(loader=loader, inventory=manager)
    out = []
    for host in manager.get_hosts():
        groups = [group.name for group in host.get_groups()]
        out.append((host.name, groups, dict(variables.get_vars(host=host))))
    return out


def _address(name: str, values: dict[str, Any], path: Path) -> str:
    text = str(values.get("xfrbench_address") or values.get("ansible_host") or name)
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        raise UserInputError(
            f"host {name}: {text!r} is not an IP address, and the servers must listen on one",
            file=path,
            key=f"{name}.xfrbench_address",
            fix="give the host's service address as xfrbench_address (or ansible_host)",
        ) from None


def _host(name: str, role: str, values: dict[str, Any], path: Path) -> InventoryHost:
    site = ""
    if role == "secondary":
        site = str(values.get("site") or "")
        if site and not SITE_NAME.match(site):
            raise UserInputError(
                f"host {name}: site {site!r} is not a site name",
                file=path,
                key=f"{SECONDARIES_GROUP}.{name}.site",
                fix="use 1-20 lowercase letters and digits, starting with a letter "
                "(the scenario's [[secondaries]] name)",
            )
    root = str(values.get("xfrbench_root") or DEFAULT_ROOT)
    if not root.startswith("/") or root.rstrip("/") == "":
        raise UserInputError(
            f"host {name}: xfrbench_root {root!r} is not an absolute folder other than /",
            file=path,
            key=f"{name}.xfrbench_root",
            fix="e.g. xfrbench_root: /var/tmp/xfrbench",
        )
    options: list[str] = []
    for key in ("ansible_ssh_common_args", "ansible_ssh_extra_args"):
        if values.get(key):
            options += shlex.split(str(values[key]))
    key_file = values.get("ansible_ssh_private_key_file") or values.get("ansible_private_key_file")
    ssh = SshTarget(
        host=str(values.get("ansible_host") or name),
        port=int(values.get("ansible_port") or 22),
        user=str(values["ansible_user"]) if values.get("ansible_user") else None,
        key_file=str(key_file) if key_file else None,
        options=tuple(options),
        become=_bool(values.get("ansible_become", False)),
        become_user=str(values.get("ansible_become_user") or "root"),
    )
    connection = {k: values[k] for k in CONNECTION_VARS if k in values}
    return InventoryHost(
        name, role, site, _address(name, values, path), root.rstrip("/"), ssh, connection,
        _port(name, values.get("xfrbench_metrics_port"), path), _python(name, values, path),
    )  # fmt: skip


def _python(name: str, values: dict[str, Any], path: Path) -> str:
    python = str(values.get("ansible_python_interpreter") or DEFAULT_PYTHON)
    if not python.startswith("/"):  # "auto", "auto_silent", ...: the agent needs a path
        raise UserInputError(
            f"host {name}: ansible_python_interpreter {python!r} is not the path of a python3",
            file=path,
            key=f"{name}.ansible_python_interpreter",
            fix=f"leave it out ({DEFAULT_PYTHON}) or give the host's Python 3.11's path: the "
            "agent runs with it",
        )
    return python


def _port(name: str, value: Any, path: Path) -> int | None:
    if value is None:
        return None
    try:
        port = int(str(value))
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise UserInputError(
            f"host {name}: xfrbench_metrics_port {value!r} is not a TCP port",
            file=path,
            key=f"{name}.xfrbench_metrics_port",
            fix="e.g. 9100 (0: any free port), or leave it out for --prometheus-port's",
        )
    return port


def load_inventory(path: Path) -> Inventory:
    """The inventory at `path`: one primary, its secondaries with their sites."""
    path = Path(path)
    if not path.is_file():
        raise UserInputError(
            "no such inventory file", file=path, fix="give the path of an Ansible inventory"
        )
    primaries: list[InventoryHost] = []
    secondaries: list[InventoryHost] = []
    labs: set[str] = set()
    for name, groups, values in _read(path):
        if values.get("xfrbench_lab"):
            labs.add(str(values["xfrbench_lab"]))
        roles = [g for g in (PRIMARY_GROUP, SECONDARIES_GROUP) if g in groups]
        if len(roles) > 1:
            raise UserInputError(
                f"host {name} is in both groups {PRIMARY_GROUP} and {SECONDARIES_GROUP}",
                file=path,
                key=name,
                fix="a host runs one server: put it in one group",
            )
        if roles == [PRIMARY_GROUP]:
            primaries.append(_host(name, "primary", values, path))
        elif roles == [SECONDARIES_GROUP]:
            secondaries.append(_host(name, "secondary", values, path))
    if len(primaries) != 1:
        found = ", ".join(h.name for h in primaries) or "none"
        raise UserInputError(
            f"group {PRIMARY_GROUP} must hold exactly one host (found: {found})",
            file=path,
            key=PRIMARY_GROUP,
            fix="name the machine that runs the primary server there",
        )
    if not secondaries:
        raise UserInputError(
            f"group {SECONDARIES_GROUP} holds no host",
            file=path,
            key=SECONDARIES_GROUP,
            fix="name the machines that run secondaries there, each with a `site` variable",
        )
    addresses: dict[str, str] = {}
    for host in (*primaries, *secondaries):
        if host.address in addresses:
            raise UserInputError(
                f"hosts {addresses[host.address]} and {host.name} share address {host.address}",
                file=path,
                key=f"{host.name}.xfrbench_address",
                fix="each host's server needs an address of its own",
            )
        addresses[host.address] = host.name
    return Inventory(path, primaries[0], tuple(secondaries), labs.pop() if len(labs) == 1 else None)


def match_sites(inventory: Inventory, loaded: LoadedScenario) -> dict[str, list[InventoryHost]]:
    """The scenario's sites, each with the inventory's hosts at it (their count is the
    inventory's). A scenario without [[secondaries]] takes every secondary as its one site,
    which must then carry no `site`. Refuses a site on one side only."""
    wanted = {site.name: index for index, site in enumerate(loaded.scenario.fleet)}
    declared = loaded.scenario.secondaries is not None
    by_site = inventory.sites()
    if not declared:
        named = [h for h in inventory.secondaries if h.site]
        if named:
            raise UserInputError(
                f"host {named[0].name} has site {named[0].site!r}, but the scenario declares "
                "no [[secondaries]] sites",
                file=loaded.path,
                key="secondaries",
                fix=f"add a [[secondaries]] table with name = {named[0].site!r}, or remove "
                "the hosts' site variables",
            )
        return {IMPLICIT_SITE: list(inventory.secondaries)}
    unsited = by_site.get("")
    if unsited:
        raise UserInputError(
            f"host {unsited[0].name} has no site",
            file=inventory.path,
            key=f"{SECONDARIES_GROUP}.{unsited[0].name}.site",
            fix=f"give it one of the scenario's sites: {', '.join(wanted)}",
        )
    for site, hosts in by_site.items():
        if site not in wanted:
            raise UserInputError(
                f"host {hosts[0].name} is at site {site!r}, which the scenario does not "
                f"declare (its sites: {', '.join(wanted)})",
                file=inventory.path,
                key=f"{SECONDARIES_GROUP}.{hosts[0].name}.site",
                fix=f"add [[secondaries]] name = {site!r} to {loaded.path}, or move the host "
                "to one of its sites",
            )
    for site, index in wanted.items():
        if site not in by_site:
            raise UserInputError(
                f"site {site!r} has no host in inventory {inventory.path} (its sites: "
                f"{', '.join(by_site)})",
                file=loaded.path,
                key=f"secondaries[{index}].name",
                fix=f"give hosts of group {SECONDARIES_GROUP} site = {site!r}, or remove "
                "the site from the scenario",
            )
    return {site: by_site[site] for site in wanted}
