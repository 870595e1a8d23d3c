"""Ansible inventories: the real machines a scenario's servers run on.

    inventory = load_inventory(Path("lab.yml"))     # YAML or INI, parsed by Ansible itself
    inventory.primary.name, inventory.sites()        # "ns0", {"fra": [...], "sel": [...]}
    match_sites(inventory, loaded)                   # refuses sites that do not match

An inventory names one host in group `primary` and the secondaries in group `secondaries`,
each with a `site` variable; Ansible's connection variables (`ansible_host`, `ansible_port`,
`ansible_user`, `ansible_ssh_private_key_file`, `ansible_ssh_common_args`, `ansible_become`)
say how to reach them, `xfrbench_root` where each keeps its working files (default
/var/tmp/xfrbench) and `ansible_python_interpreter` the python3 its agent and Ansible's
modules run with (default /usr/bin/python3). Both defaults are applied here, once:
`inventory.playbook_vars()` hands the resolved values to every playbook.
"""

from harness.inventory.model import (
    DEFAULT_PYTHON,
    DEFAULT_ROOT,
    Inventory,
    InventoryHost,
    SshTarget,
    load_inventory,
    match_sites,
)

__all__ = [
    "DEFAULT_PYTHON",
    "DEFAULT_ROOT",
    "Inventory",
    "InventoryHost",
    "SshTarget",
    "load_inventory",
    "match_sites",
]
