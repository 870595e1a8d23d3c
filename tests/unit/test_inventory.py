"""Inventories read by Ansible's own code, and a scenario's sites matched against them."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import spec
from harness.core.errors import UserInputError
from harness.inventory import DEFAULT_PYTHON, DEFAULT_ROOT, load_inventory, match_sites

YAML = """
all:
  vars:
    ansible_user: root
    xfrbench_root: /var/tmp/xfb/
  children:
    primary:
      hosts:
        ns0: {ansible_host: 192.0.2.10}
    secondaries:
      vars:
        ansible_ssh_common_args: "-o UserKnownHostsFile=/tmp/kh -o StrictHostKeyChecking=yes"
      hosts:
        fra1: {ansible_host: 192.0.2.11, site: fra}
        fra2: {ansible_host: 192.0.2.12, site: fra, ansible_port: 2222}
        sel1: {ansible_host: 192.0.2.13, site: sel, ansible_become: true, ansible_user: ops}
"""

INI = """
[primary]
ns0 ansible_host=192.0.2.10

[secondaries]
fra1 ansible_host=192.0.2.11 site=fra
sel1 ansible_host=192.0.2.13 site=sel ansible_ssh_private_key_file=/keys/id
sel1 xfrbench_metrics_port=9187

[all:vars]
xfrbench_root=/srv/xfb
"""

SCENARIO = """
transports = ["tcp"]
[[secondaries]]
name = "fra"
count = 5
[[secondaries]]
name = "sel"
"""


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _scenario(tmp_path: Path, text: str = SCENARIO) -> spec.LoadedScenario:
    return spec.load(_write(tmp_path, "s.toml", text))


def test_a_yaml_inventory_gives_hosts_sites_roots_and_connections(tmp_path: Path) -> None:
    inventory = load_inventory(_write(tmp_path, "lab.yml", YAML))
    assert inventory.primary.name == "ns0"
    assert inventory.primary.address == "192.0.2.10"
    assert [h.name for h in inventory.secondaries] == ["fra1", "fra2", "sel1"]
    assert {site: [h.name for h in hosts] for site, hosts in inventory.sites().items()} == {
        "fra": ["fra1", "fra2"],
        "sel": ["sel1"],
    }
    assert inventory.primary.root == "/var/tmp/xfb"  # the trailing slash dropped
    fra2 = inventory.host("fra2")
    argv = fra2.ssh.argv(["python3", "-c", "print(1)"])
    assert argv[:8] == ["ssh", "-T", "-o", "BatchMode=yes", "-p", "2222", "-l", "root"]
    assert "UserKnownHostsFile=/tmp/kh" in argv
    assert argv[-1] == "python3 -c 'print(1)'"
    sel1 = inventory.host("sel1")
    assert sel1.ssh.user == "ops"
    assert sel1.ssh.argv(["true"])[-1] == "sudo -n -u root true"


def test_an_ini_inventory_reads_the_same(tmp_path: Path) -> None:
    inventory = load_inventory(_write(tmp_path, "lab.ini", INI))
    assert [(h.name, h.site, h.root) for h in inventory.secondaries] == [
        ("fra1", "fra", "/srv/xfb"),
        ("sel1", "sel", "/srv/xfb"),
    ]
    assert inventory.host("sel1").ssh.key_file == "/keys/id"
    assert inventory.host("fra1").ssh.port == 22
    # Where each agent serves /metrics: the run's --prometheus-port unless a host says
    assert [h.metrics_port for h in inventory.hosts] == [None, None, 9187]


def test_the_documented_defaults_reach_every_playbook(tmp_path: Path) -> None:
    """What an operator leaves out (the folder, the interpreter) is resolved once, here,
    and handed to the playbooks per host: they never default it themselves."""
    text = "[primary]\np ansible_host=192.0.2.1\n[secondaries]\ns ansible_host=192.0.2.2 site=a\n"
    text += "s ansible_python_interpreter=/opt/py/bin/python3 xfrbench_root=/srv/x/\n"
    inventory = load_inventory(_write(tmp_path, "ops.ini", text))
    assert inventory.playbook_vars() == {
        "xfrbench_hosts": {
            "p": {"root": DEFAULT_ROOT, "python": DEFAULT_PYTHON},
            "s": {"root": "/srv/x", "python": "/opt/py/bin/python3"},
        }
    }


def test_the_scenarios_sites_take_their_hosts_from_the_inventory(tmp_path: Path) -> None:
    inventory = load_inventory(_write(tmp_path, "lab.yml", YAML))
    matched = match_sites(inventory, _scenario(tmp_path))
    # The scenario's count (5) does not matter: the inventory holds two at fra.
    assert {site: [h.name for h in hosts] for site, hosts in matched.items()} == {
        "fra": ["fra1", "fra2"],
        "sel": ["sel1"],
    }


@pytest.mark.parametrize(
    ("inventory", "scenario", "where", "words"),
    [
        (YAML, SCENARIO.replace('"sel"', '"seoul"'), "lab.yml: secondaries.sel1.site",
         "which the scenario does not declare"),
        (YAML.replace("site: sel,", "site: fra,"), SCENARIO, "s.toml: secondaries[1].name",
         "site 'sel' has no host"),
        (YAML.replace("site: sel,", ""), SCENARIO, "lab.yml: secondaries.sel1.site",
         "has no site"),
        (YAML, 'transports = ["tcp"]\n', "s.toml: secondaries",
         "declares no [[secondaries]] sites"),
    ],
)  # fmt: skip
def test_sites_on_one_side_only_are_refused_with_file_key_and_fix(
    tmp_path: Path, inventory: str, scenario: str, where: str, words: str
) -> None:
    loaded = _scenario(tmp_path, scenario)
    with pytest.raises(UserInputError) as caught:
        match_sites(load_inventory(_write(tmp_path, "lab.yml", inventory)), loaded)
    assert caught.value.exit_status == 2
    assert where in str(caught.value) and words in str(caught.value)
    assert caught.value.fix


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("[secondaries]\na ansible_host=192.0.2.1 site=x\n", "exactly one host (found: none)"),
        ("[primary]\np ansible_host=192.0.2.1\n", "group secondaries holds no host"),
        ("[primary]\np ansible_host=192.0.2.1\n[secondaries]\np\n", "in both groups"),
        ("[primary]\np ansible_host=ns.example\n[secondaries]\ns ansible_host=192.0.2.2\n",
         "is not an IP address"),
        ("[primary]\np ansible_host=192.0.2.1\n[secondaries]\ns ansible_host=192.0.2.1\n",
         "share address"),
        ("[primary]\np ansible_host=192.0.2.1 xfrbench_root=tmp\n[secondaries]\n"
         "s ansible_host=192.0.2.2\n", "is not an absolute folder"),
        ("all:\n  children: [\n", "Ansible cannot parse it"),
        ("[primary]\np ansible_host=192.0.2.1 xfrbench_metrics_port=http\n[secondaries]\n"
         "s ansible_host=192.0.2.2\n", "xfrbench_metrics_port 'http' is not a TCP port"),
        ("[primary]\np ansible_host=192.0.2.1 ansible_python_interpreter=auto\n[secondaries]\n"
         "s ansible_host=192.0.2.2\n", "ansible_python_interpreter 'auto' is not the path"),
    ],
)  # fmt: skip
def test_an_inventory_the_harness_cannot_run_on_is_refused(
    tmp_path: Path, text: str, words: str
) -> None:
    with pytest.raises(UserInputError) as caught:
        load_inventory(_write(tmp_path, "bad.ini", text))
    assert words in str(caught.value)
    assert str(tmp_path / "bad.ini") in str(caught.value)


def test_a_missing_inventory_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(UserInputError, match="no such inventory file"):
        load_inventory(tmp_path / "nope.yml")
