"""The agent's bundle goes to a host as one ssh command (remote/bundle.py unpack_argv): tar
on the host reads the archive from stdin into the run's agent folder, owner-only."""

from __future__ import annotations

import io
import shlex
import subprocess
import tarfile
from pathlib import Path

from harness.inventory.model import InventoryHost, SshTarget
from harness.remote.bundle import unpack_argv


def _host(**ssh: object) -> InventoryHost:
    target = SshTarget(host="192.0.2.7", user="ops", key_file="/k/id", **ssh)  # type: ignore[arg-type]
    return InventoryHost("ns1", "secondary", "near", "192.0.2.7", "/var/tmp/xfrbench", target)


def test_the_unpack_runs_tar_on_stdin_into_the_folder_as_the_host_logs_in() -> None:
    argv = unpack_argv(_host(), "/var/tmp/xfrbench/my run/agent")
    assert argv[:2] == ["ssh", "-T"] and "192.0.2.7" in argv and argv[-2] == "--"
    remote = shlex.split(argv[-1])
    assert remote[:2] == ["sh", "-c"]
    assert "tar -xzf - -C '/var/tmp/xfrbench/my run/agent'" in remote[2]
    assert "umask 077" in remote[2] and "--no-same-permissions" in remote[2]


def test_through_sudo_when_the_host_becomes() -> None:
    remote = shlex.split(unpack_argv(_host(become=True), "/r/agent")[-1])
    assert remote[:6] == ["sudo", "-n", "-u", "root", "sh", "-c"]


def test_the_remote_command_unpacks_an_archive_read_on_stdin(tmp_path: Path) -> None:
    """The command the host runs, run here: what arrives is the archive's files, 0600."""
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w:gz") as archive:
        info = tarfile.TarInfo("harness/x.py")
        info.size, info.mode = 3, 0o644
        archive.addfile(info, io.BytesIO(b"x=1"))
    folder = tmp_path / "my run" / "agent"
    folder.mkdir(parents=True)
    remote = shlex.split(unpack_argv(_host(), str(folder))[-1])
    subprocess.run(remote, input=data.getvalue(), check=True, timeout=30)
    unpacked = folder / "harness" / "x.py"
    assert unpacked.read_bytes() == b"x=1"
    assert unpacked.stat().st_mode & 0o777 == 0o600
