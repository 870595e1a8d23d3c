"""A remote run whose hosts Ansible cannot reach: exit 3 naming each host, nothing made,
and a record that `xfrbench clean` keeps (the run's servers could still be on hosts that
are only down for a while), saying on every call what is left on which host, until the
operator says the hosts are gone for good: `clean --forget RUN`. Its inventory file gone
by then (a temporary one) changes nothing: the record holds the hosts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="`run --inventory` and `clean` need root"),
]

REPOSITORY = Path(__file__).resolve().parents[2]
XFRBENCH = [sys.executable, "-m", "harness"]
SCENARIO = REPOSITORY / "scenarios" / "lab-fleet.toml"  # sites near and far


def _xfrbench(registry: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """xfrbench with this test's own registry folder, apart from everyone's."""
    return subprocess.run(
        [*XFRBENCH, *argv], cwd=REPOSITORY, capture_output=True, text=True, timeout=300,
        env={**os.environ, "XFRBENCH_REGISTRY_DIR": str(registry)},
    )  # fmt: skip


def test_unreachable_hosts_are_exit_3_and_their_record_is_forgotten_on_demand(
    tmp_path: Path,
) -> None:
    root = tmp_path / "root"
    inventory = tmp_path / "inv.yml"
    inventory.write_text(
        "all:\n"
        f"  vars: {{ansible_user: root, xfrbench_root: {root}}}\n"
        "  children:\n"
        "    primary:\n"
        "      hosts: {ns0: {ansible_host: 127.0.0.1, ansible_port: 1}}\n"
        "    secondaries:\n"
        "      hosts:\n"
        "        gone1: {ansible_host: 127.0.0.2, ansible_port: 1, site: near}\n"
        "        gone2: {ansible_host: 127.0.0.3, ansible_port: 1, site: far}\n"
    )
    registry = tmp_path / "registry"
    result = _xfrbench(registry, "run", "--inventory", str(inventory), str(SCENARIO),
                       "--results", str(tmp_path), "--run-id", "unreachable")  # fmt: skip
    assert result.returncode == 3, result.stdout[-2000:] + result.stderr[-2000:]
    for host in ("ns0", "gone1", "gone2"):
        assert f"host {host}: unreachable" in result.stderr, result.stderr
    assert "Connection refused" in result.stderr  # ssh's own words, through Ansible's
    assert not root.exists()  # nothing made on any host
    (record,) = [json.loads(path.read_text()) for path in registry.glob("*.json")]
    work = Path(record["items"][0]["work"])
    assert work.is_dir()

    inventory.unlink()  # a temporary inventory, gone
    left = [
        f"ns0 (127.0.0.1) {root}/unreachable",
        f"gone1 (127.0.0.2) {root}/unreachable",
        f"gone2 (127.0.0.3) {root}/unreachable",
    ]
    for _ in range(2):  # on every call: tried again from the record, and said
        cleaned = _xfrbench(registry, "clean")
        assert cleaned.returncode == 1, cleaned.stdout + cleaned.stderr
        assert "remote run unreachable is still on" in cleaned.stdout, cleaned.stdout
        assert all(words in cleaned.stdout for words in left), cleaned.stdout
        # teardown.yml tried, from the record (the whole output on failure: pytest elides
        # the middle of a long string, where the teardown's words are)
        assert "Connection refused" in cleaned.stdout, cleaned.stdout
        assert "its inventory is gone" in cleaned.stdout, cleaned.stdout
        assert "`xfrbench clean --forget unreachable`" in cleaned.stdout, cleaned.stdout
        assert len(list(registry.glob("*.json"))) == 1

    unknown = _xfrbench(registry, "clean", "--forget", "nope")
    assert unknown.returncode == 2 and "recorded: unreachable" in unknown.stderr, unknown.stderr
    forgot = _xfrbench(registry, "clean", "--forget", "unreachable")
    assert forgot.returncode == 0, forgot.stdout + forgot.stderr
    assert "removed record of remote run unreachable; left on its hosts" in forgot.stdout
    assert all(words in forgot.stdout for words in left), forgot.stdout
    assert not list(registry.glob("*.json")) and not work.exists()
    again = _xfrbench(registry, "clean")  # (others' namespaces may be noted as unlisted)
    assert again.returncode == 0 and "nothing to clean" in again.stdout, again.stdout
