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
    cgroup_mounts,
    inventory_data,
    lab_layout,
    ssh_client_config,
    sshd_argv,
    sshd_config,
)
from harness.observe.cgroup import parse_mountinfo


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


V1 = """\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,xattr,name=systemd
41 24 0:38 / /proc/sys/fs/binfmt_misc rw,relatime - binfmt_misc binfmt_misc rw
"""
V2 = """\
30 24 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
"""


def test_each_sshd_sees_this_machines_cgroups_again() -> None:
    """`ip netns exec` hides /sys/fs/cgroup under the namespace's own sysfs: each host's
    sshd mounts the same hierarchies again, so its agent samples cgroups (µs), not /proc."""
    v1 = cgroup_mounts(parse_mountinfo(V1))
    assert v1 == [
        "mount -t tmpfs -o mode=755 tmpfs /sys/fs/cgroup",
        "{ mkdir -p /sys/fs/cgroup/cpuacct && mount -t cgroup -o cpuacct cgroup "
        "/sys/fs/cgroup/cpuacct; } 2>/dev/null",
        "{ mkdir -p /sys/fs/cgroup/memory && mount -t cgroup -o memory cgroup "
        "/sys/fs/cgroup/memory; } 2>/dev/null",
        "{ mkdir -p /sys/fs/cgroup/systemd && mount -t cgroup -o name=systemd,xattr cgroup "
        "/sys/fs/cgroup/systemd; } 2>/dev/null",
    ]
    assert cgroup_mounts(parse_mountinfo(V2)) == [
        "{ mount -t cgroup2 -o memory_recursiveprot,nsdelegate cgroup2 /sys/fs/cgroup; } "
        "2>/dev/null"
    ]
    argv = sshd_argv(Path("/l/ns1/sshd_config"), Path("/l/tmp"), v1)
    script = argv[2]
    assert script.startswith(v1[0] + "; ") and script.index("memory") < script.index("--bind")
