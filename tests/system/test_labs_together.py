"""Two labs up at once share the one privilege-separation folder every sshd needs for each
connection (/run/sshd): the first lab taken down leaves it to the second, whose hosts still
take logins, and the last one down leaves the machine as it found it.

Other tests' labs may come and go meanwhile (pytest-xdist: the lab modules run on other
workers), and they share the folder too: "as it found it" is the machine's own folder kept,
and a folder the labs made kept exactly while a live lab of another test relies on it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from harness.lab import Lab, lab_down, lab_up
from harness.lab.build import PRIVSEP_DIR
from harness.testbed import registry as reg

pytestmark = [
    pytest.mark.root,
    pytest.mark.netns,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for namespaces and sshd"),
]


def _login(lab: Lab) -> subprocess.CompletedProcess[str]:
    host = lab.hosts[0]
    return subprocess.run(
        ["ssh", "-i", str(lab.key), "-o", "BatchMode=yes", "-o", "ConnectTimeout=10",
         f"root@{host.address}", "echo", "in", host.name],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def _held_by_other_labs() -> bool:
    """Whether a live testbed (another test's lab) relies on the folder, by the registry."""
    return str(PRIVSEP_DIR) in reg.shared_dirs_of_others(reg.load_all()[0], "")


def test_a_lab_taken_down_leaves_the_sshd_folder_to_a_lab_still_up(tmp_path: Path) -> None:
    existed = PRIVSEP_DIR.exists()
    machines_own = existed and not _held_by_other_labs()  # not made by any lab
    first = lab_up(1, ["near"], tmp_path / "first.yml")
    try:
        second = lab_up(1, ["near"], tmp_path / "second.yml")
    except BaseException:
        lab_down(first.lab_id)
        raise
    try:
        said = lab_down(first.lab_id)
        assert f"folder {PRIVSEP_DIR} stays: another live testbed relies on it" in said or existed
        assert PRIVSEP_DIR.is_dir()
        login = _login(second)
        assert login.returncode == 0 and "in ns0" in login.stdout, login.stderr
    finally:
        lab_down(second.lab_id)
    held = _held_by_other_labs()
    assert PRIVSEP_DIR.exists() == (machines_own or held), (existed, machines_own, held)
