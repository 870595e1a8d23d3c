"""The lab's layout, sshd config and inventory (pure): the inventory it writes is one the
harness reads back through Ansible as any operator's."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from harness.core.errors import UserInputError
from harness.inventory import DEFAULT_PYTHON, DEFAULT_ROOT, load_inventory
from harness.lab.build import (
    Lab,
    LabHost,
    inventory_data,
    lab_layout,
    ssh_client_config,
    sshd_argv,
    sshd_config,
)


def test_secondaries_are_spread_over_the_sites_in_runs() -> None:
    assert lab_layout(3, ["near", "far"]) == [
        ("ns0", "primary", ""),
        ("ns1", "secondary", "near"),
        ("ns2", "secondary", "near"),
        ("ns3", "secondary", "far"),
    ]
    assert [site for _, _, site in lab_layout(4, ["a", "b", "c"])] == ["", "a", "a", "b", "c"]


@pytest.mark.parametrize(
    ("count", "sites", "words"),
    [(0, ["a"], "1 to 30"), (2, ["a", "b", "c"], "distinct"), (2, ["a", "a"], "distinct"),
     (2, ["Far"], "not a site name")],
)  # fmt: skip
def test_a_lab_that_cannot_be_built_is_refused(count: int, sites: list[str], words: str) -> None:
    with pytest.raises(UserInputError, match=words):
        lab_layout(count, sites)


def test_each_sshd_listens_on_its_host_with_keys_only() -> None:
    text = sshd_config("ns1", "198.18.0.34", Path("/run/xfrbench/labs/abc123"))
    assert "ListenAddress 198.18.0.34\n" in text
    assert "HostKey /run/xfrbench/labs/abc123/ns1/ssh_host_ed25519_key\n" in text
    assert "PasswordAuthentication no\n" in text and "UsePAM no\n" in text


def test_the_written_inventory_reads_back_through_ansible(tmp_path: Path) -> None:
    hosts = tuple(
        LabHost(name, role, site, f"198.18.0.{2 + 32 * i}", f"xfb-abc123-{i}")
        for i, (name, role, site) in enumerate(lab_layout(3, ["near", "far"]))
    )
    lab = Lab("abc123", tmp_path, tmp_path / "lab.yml", hosts, "198.18.0.130", tmp_path / "r")
    lab.inventory.write_text(yaml.safe_dump(inventory_data(lab, tmp_path / "k")))
    inventory = load_inventory(lab.inventory)
    assert inventory.primary.name == "ns0" and inventory.primary.address == "198.18.0.2"
    assert inventory.lab == "abc123"
    assert {s: [h.name for h in hs] for s, hs in inventory.sites().items()} == {
        "near": ["ns1", "ns2"],
        "far": ["ns3"],
    }
    ns3 = inventory.host("ns3")
    # As an operator writes one: the documented defaults, this machine's ssh config.
    assert (ns3.root, ns3.python) == (DEFAULT_ROOT, DEFAULT_PYTHON)
    assert ns3.ssh.key_file == str(tmp_path / "k") and ns3.ssh.options == ()


def test_this_machines_ssh_knows_the_lab_hosts_keys_and_no_others() -> None:
    text = ssh_client_config("abc123", ["198.18.0.2", "198.18.0.34"], Path("/l/known_hosts"))
    assert "\nHost 198.18.0.2 198.18.0.34\n" in text
    assert "    UserKnownHostsFile /l/known_hosts\n    StrictHostKeyChecking yes\n" in text
    assert "Host *" not in text


def test_each_sshd_has_a_var_tmp_of_its_own() -> None:
    argv = sshd_argv(Path("/l/ns1/sshd_config"), Path("/var/tmp/xfrbench-lab-abc123/ns1"))
    assert argv[:2] == ["sh", "-c"] and "mount --bind" in argv[2] and "/var/tmp" in argv[2]
    assert argv[3:] == [
        "/var/tmp/xfrbench-lab-abc123/ns1", "/usr/sbin/sshd", "-D", "-e", "-f",
        "/l/ns1/sshd_config",
    ]  # fmt: skip
