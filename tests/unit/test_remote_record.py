"""A remote run's record: the inventory as the run resolved it (so that its hosts can be
torn down when the file is gone), what clean says is left where, the lab its hosts are in,
and `clean --forget`."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from harness.core.errors import UserInputError
from harness.inventory import load_inventory
from harness.lab import lab_holding
from harness.remote.record import KIND, forget_run, left_on_hosts, record_run
from harness.testbed import registry as reg

INVENTORY = """
[primary]
p ansible_host=192.0.2.1 ansible_user=ops ansible_become=true

[secondaries]
s1 ansible_host=192.0.2.2 site=near xfrbench_root=/srv/x/ xfrbench_metrics_port=9100
s2 ansible_host=192.0.2.3 site=far ansible_ssh_common_args="-o ProxyJump=bastion"
s2 ansible_python_interpreter=/opt/py/bin/python3 xfrbench_address=10.0.0.3
"""


@pytest.fixture
def registries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "testbeds"
    directory.mkdir()
    monkeypatch.setenv("XFRBENCH_REGISTRY_DIR", str(directory))
    return directory


def test_the_resolved_inventory_reads_back_as_the_same_hosts(tmp_path: Path) -> None:
    original = tmp_path / "ops.ini"
    original.write_text(INVENTORY)
    inventory = load_inventory(original)
    copy = tmp_path / "copy.yml"
    copy.write_text(yaml.safe_dump(inventory.to_ansible()))
    again = load_inventory(copy)
    assert again.hosts[0].ssh == inventory.hosts[0].ssh  # user, become
    for before, after in zip(inventory.hosts, again.hosts, strict=True):
        assert (after.name, after.role, after.site, after.address, after.root, after.python,
                after.metrics_port, after.ssh) == (
            before.name, before.role, before.site, before.address, before.root, before.python,
            before.metrics_port, before.ssh,
        )  # fmt: skip


def test_the_record_says_what_is_left_on_which_host(tmp_path: Path, registries: Path) -> None:
    path = tmp_path / "ops.ini"
    path.write_text(INVENTORY)
    registry = reg.Registry.create(registries, "abc123", label="remote run r1", remote=True)
    record_run(registry, load_inventory(path), "r1", tmp_path / "work", tmp_path / "logs")
    (item,) = registry.items
    assert item["lab"] is None  # no lab holds 192.0.2.x
    assert left_on_hosts(item) == (
        "p (192.0.2.1) /var/tmp/xfrbench/r1, s1 (192.0.2.2) /srv/x/r1, "
        "s2 (10.0.0.3) /var/tmp/xfrbench/r1"
    )


def test_hosts_written_by_hand_are_known_as_a_labs_by_their_addresses(registries: Path) -> None:
    lab = reg.Registry.create(registries, "lab111", label="lab", lab=True)
    lab.data["lab_hosts"] = {"ns0": {"address": "198.18.0.2"}, "ns1": {"address": "198.18.0.66"}}
    lab.save()
    assert lab_holding(["198.18.0.66", "198.18.0.2"]) == "lab111"
    assert lab_holding(["198.18.0.66", "192.0.2.1"]) is None  # not all of them
    assert lab_holding([]) is None


def test_forget_drops_a_dead_runs_record_and_names_what_it_leaves(
    tmp_path: Path, registries: Path
) -> None:
    work = tmp_path / "remote" / "r1-abc123"
    (work / "cp").mkdir(parents=True)
    targets = tmp_path / "targets.json"  # a file of the controller's that goes with the run
    targets.write_text("[]")
    registry = reg.Registry.create(registries, "abc123", label="remote run r1", remote=True)
    registry.add(KIND, inventory=str(tmp_path / "gone.yml"), run="r1", work=str(work),
                 hosts={"p": "/var/tmp/xfrbench/r1"}, addresses={"p": "192.0.2.1"})  # fmt: skip
    registry.add("file", path=str(targets))
    with pytest.raises(UserInputError, match="remote run r1 is still running"):
        forget_run("r1")  # this process is its driver
    registry.data["driver"] = {"pid": 0, "start": None}  # the driver is dead
    registry.save()
    with pytest.raises(UserInputError, match=r"no remote run 'r2' is recorded \(recorded: r1"):
        forget_run("r2")
    done, problems = forget_run("r1")
    assert problems == []
    assert done[0] == (
        "record of remote run r1; left on its hosts (xfrbench will not reach them again): "
        "p (192.0.2.1) /var/tmp/xfrbench/r1"
    )
    assert not targets.exists() and not work.exists()
    assert list(registries.glob("*.json")) == []
