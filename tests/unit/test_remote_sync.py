"""rsync to inventory hosts: its command line from the inventory's ssh, and its stats."""

from __future__ import annotations

from pathlib import Path

from harness.inventory import load_inventory
from harness.remote.sync import rsync_argv, sent_bytes

INVENTORY = """
all:
  vars: {ansible_user: root, ansible_ssh_common_args: "-o UserKnownHostsFile=/kh"}
  children:
    primary:
      hosts: {ns0: {ansible_host: 192.0.2.10, ansible_ssh_private_key_file: /k}}
    secondaries:
      hosts:
        ns1: {ansible_host: "2001:db8::1", site: near, ansible_port: 2222,
              ansible_user: ops, ansible_become: true}
"""


def test_rsync_goes_over_the_inventorys_ssh_with_the_served_file_as_basis(tmp_path: Path) -> None:
    path = tmp_path / "lab.yml"
    path.write_text(INVENTORY)
    inventory = load_inventory(path)
    argv = rsync_argv(
        inventory.primary, tmp_path / "stage", "/var/tmp/x/r/changes/3", ["/var/tmp/x/r/z"],
        tmp_path / "cp",
    )  # fmt: skip
    shell = argv[argv.index("-e") + 1]
    assert shell.startswith("ssh -T -o BatchMode=yes -p 22 -l root -i /k -o UserKnownHostsFile=/kh")
    assert f"ControlPath={tmp_path / 'cp'}/r-" in shell
    assert "--copy-dest=/var/tmp/x/r/z" in argv and "--mkpath" in argv
    assert argv[-2:] == [f"{tmp_path / 'stage'}/", "192.0.2.10:/var/tmp/x/r/changes/3/"]
    become = rsync_argv(inventory.host("ns1"), tmp_path, "/d", [], tmp_path)
    assert "--rsync-path=sudo -n -u root rsync" in become
    assert become[-1] == "[2001:db8::1]:/d/"
    assert "-p 2222 -l ops" in become[become.index("-e") + 1]


def test_the_bytes_rsync_sent() -> None:
    stats = "Number of files: 3\nTotal bytes sent: 1,234,567\nTotal bytes received: 35\n"
    assert sent_bytes(stats) == 1_234_567
    assert sent_bytes("Total bytes sent: 812\n") == 812
    assert sent_bytes("nothing") is None


def _shell(argv: list[str]) -> str:
    return argv[argv.index("-e") + 1]


def _control_path(shell: str) -> str | None:
    words = [w for w in shell.split() if w.startswith("ControlPath=")]
    return words[0].removeprefix("ControlPath=") if words else None


def test_the_shared_connections_socket_fits_a_unix_socket_path(tmp_path: Path) -> None:
    """ssh makes the master's socket as its ControlPath + "." + 16 characters, within a unix
    socket's 107: a run id of 19 characters ("lab-fleet-inventory") made %C's 40 too many
    and every rsync exit 255."""
    path = tmp_path / "lab.yml"
    path.write_text(INVENTORY)
    host = load_inventory(path).primary
    control = Path("/run/xfrbench/remote/lab-fleet-inventory-091c12/cp")
    shell = _shell(rsync_argv(host, tmp_path, "/d", [], control))
    socket = _control_path(shell)
    assert socket is not None and socket.startswith(f"{control}/r-")
    assert len(socket.replace("%C", "c" * 40)) + 17 <= 107, socket  # ssh's %C: 40 hex
    other = _shell(rsync_argv(load_inventory(path).host("ns1"), tmp_path, "/d", [], control))
    assert _control_path(other) != socket or "%C" in socket  # a master per host
    # A folder too long for any socket: no shared connection, rather than none at all.
    deep = Path("/run/xfrbench/remote") / ("r" * 90) / "cp"
    shell = _shell(rsync_argv(host, tmp_path, "/d", [], deep))
    assert _control_path(shell) is None and "ControlMaster=no" in shell
