"""/proc parsers on text captured from this machine (tests/fixtures/proc/capture.py).

The ns_* files come from a namespace holding a listener on port 5300 (IPv4 and IPv6), 25
short connections per family whose client side sits in TIME_WAIT, one established pair per
family, and ip_local_port_range 40000-40999.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
from pathlib import Path

import pytest

from harness.observe import procfs

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "proc"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_sockstat_tcp_line_and_tcp6_inuse() -> None:
    assert procfs.parse_sockstat(fixture("ns_sockstat")) == {
        "inuse": 3,
        "orphan": 0,
        "time_wait": 50,
        "alloc": 23,
        "mem": 0,
    }
    # TCP6 adds its in-use sockets; tw already covers both families.
    both = procfs.parse_sockstat(fixture("ns_sockstat"), fixture("ns_sockstat6"))
    assert both["inuse"] == 6 and both["time_wait"] == 50
    assert procfs.parse_sockstat(fixture("host_sockstat"))["alloc"] == 17


def test_snmp_and_netstat_pairs() -> None:
    snmp = procfs.parse_snmp(fixture("host_snmp"))
    assert snmp["Tcp"]["RetransSegs"] == 58
    assert snmp["Tcp"]["ActiveOpens"] == 693 and snmp["Tcp"]["PassiveOpens"] == 544
    assert snmp["Tcp"]["MaxConn"] == -1
    assert snmp["Udp"]["InDatagrams"] >= 0
    ext = procfs.parse_netstat(fixture("host_netstat"))
    assert ext["TcpExt"]["TCPTimeouts"] == 3
    assert procfs.parse_netstat(fixture("ns_netstat"))["TcpExt"]["TW"] == 50


def test_snmp_rejects_unpaired_lines() -> None:
    with pytest.raises(ValueError, match="unpaired"):
        procfs.parse_snmp("Tcp: A B\nUdp: 1 2\n")


def test_proc_net_tcp_rows_ipv4_and_ipv6() -> None:
    rows = procfs.parse_proc_net_tcp(fixture("ns_tcp"))
    assert len(rows) == 28  # 1 listener, 2 established, 25 TIME_WAIT
    assert rows[:3] == [(5300, "listen"), (5300, "established"), (40000, "time_wait")]
    rows6 = procfs.parse_proc_net_tcp(fixture("ns_tcp6"))
    assert len(rows6) == 28 and rows6[0] == (5300, "listen")
    assert sum(state == "time_wait" for _, state in rows6) == 25


def test_state_counts_over_both_families() -> None:
    texts = [fixture("ns_tcp"), fixture("ns_tcp6")]
    assert procfs.tcp_state_counts(texts) == {"established": 4, "listen": 2, "time_wait": 50}
    assert procfs.tcp_state_counts([]) == {}


def _ports_by_hand(texts: list[str], lo: int, hi: int) -> int:
    # An independent count: whitespace-split columns, not the module's regex.
    ports = set()
    for text in texts:
        for line in text.splitlines()[1:]:
            words = line.split()
            port = int(words[1].rsplit(":", 1)[1], 16)
            if words[3] != "0A" and lo <= port <= hi:
                ports.add(port)
    return len(ports)


def test_ephemeral_ports_in_range_distinct_non_listening() -> None:
    v4, v6 = fixture("ns_tcp"), fixture("ns_tcp6")
    # Per family: 25 TIME_WAIT client ports + 1 established client port; the server side
    # (port 5300) is outside the range.
    assert procfs.ephemeral_ports_in_use([v4], (40000, 40999)) == 26
    assert procfs.ephemeral_ports_in_use([v6], (40000, 40999)) == 26
    assert procfs.ephemeral_ports_in_use([v4, v6], (40000, 40999)) == 52
    assert _ports_by_hand([v4, v6], 40000, 40999) == 52
    # A port used twice counts once; a listener's port never counts.
    assert procfs.ephemeral_ports_in_use([v4, v4], (40000, 40999)) == 26
    assert procfs.ephemeral_ports_in_use([v4], (1, 65535)) == 27  # + 5300 of the accepted
    assert procfs.ephemeral_ports_in_use([v4], (5300, 5300)) == 1
    assert procfs.ephemeral_ports_in_use([v4], (40001, 40999)) == 25


def test_port_range() -> None:
    assert procfs.parse_port_range(fixture("ns_ip_local_port_range")) == (40000, 40999)
    assert procfs.parse_port_range("32768\t60999\n") == (32768, 60999)


def test_proc_stat_with_spaces_and_parens_in_comm() -> None:
    stat = procfs.parse_proc_stat(fixture("proc_stat"))
    assert fixture("proc_stat").split(" ", 1)[1].startswith("(x) (y z) S")
    assert stat == procfs.ProcStat(
        state="S", ppid=24267, utime=3, stime=1, cutime=0, cstime=0, starttime=306349
    )


def test_status_kb_lines_in_bytes() -> None:
    status = procfs.parse_status(fixture("proc_status"))
    assert status["VmRSS"] == 18988 * 1024
    assert status["VmHWM"] == 18988 * 1024
    assert "Name" not in status


def test_net_snapshot_from_fixtures() -> None:
    snap = procfs.net_snapshot(
        sockstat=fixture("ns_sockstat"),
        sockstat6=fixture("ns_sockstat6"),
        snmp=fixture("host_snmp"),
        netstat=fixture("host_netstat"),
        tcp_texts=[fixture("ns_tcp"), fixture("ns_tcp6")],
        port_range=(40000, 40999),
        net_dev=SYNTHETIC_NET_DEV,
    )
    assert snap.fields() == {
        "tcp": {"inuse": 6, "orphan": 0, "time_wait": 50, "alloc": 23},
        "tcp_states": {"established": 4, "listen": 2, "time_wait": 50},
        "ephemeral_ports_in_use": 52,
        "retrans_segs": 58,
        "tcp_timeouts": 3,
        "active_opens": 693,
        "passive_opens": 544,
        "tcp_sockets_source": "proc",
        "net_tx_bytes": 20_000 + 3_000,  # veth-r and eth1; loopback left out
        "net_rx_bytes": 10_000 + 4_000,
    }


# /proc/net/dev as a namespace shows it, with made-up byte counts on a layout captured
# from a real namespace (tests/fixtures/proc/ns_net_dev).
SYNTHETIC_NET_DEV = (
    "Inter-|   Receive                                                |  Transmit\n"
    " face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs"
    " drop fifo colls carrier compressed\n"
    "    lo:     168       2    0    0    0     0          0         0      168       2    0"
    "    0    0     0       0          0\n"
    "veth-r:   10000      20    0    0    0     0          0         0    20000      30    0"
    "    0    0     0       0          0\n"
    "  eth1:    4000       5    0    0    0     0          0         0     3000       4    0"
    "    0    0     0       0          0\n"
)


def test_net_dev_captured() -> None:
    parsed = procfs.parse_net_dev(fixture("ns_net_dev"))
    assert set(parsed) == {"lo", "veth-r", "veth-x"}
    assert parsed["lo"][0] == parsed["lo"][1] > 0  # the ping went out and came back
    assert parsed["veth-r"] == (0, 0)


def test_tree_pids() -> None:
    children = {1: [2, 3], 3: [4], 9: [10]}
    assert sorted(procfs.tree_pids(1, children)) == [1, 2, 3, 4]
    assert procfs.tree_pids(7, children) == [7]


def test_readers_on_this_process() -> None:
    # Thin readers against the live /proc of the test process (no root needed).
    pid = os.getpid()
    snap = procfs.read_net(pid, (1, 65535))
    assert snap.tcp["inuse"] >= 0 and snap.active_opens >= 0
    tree = procfs.read_proc_tree(pid)
    assert tree.anon_bytes is not None and tree.anon_bytes > 0
    status = procfs.parse_status(Path(f"/proc/{pid}/status").read_text())
    assert tree.anon_bytes <= status["VmRSS"]  # anonymous pages only, not the mapped files
    assert tree.cpu_user_s + tree.cpu_system_s > 0
    own = procfs.parse_proc_stat(Path("/proc/self/stat").read_text())
    assert procfs.start_time(pid) == own.starttime


def test_sock_diag_and_proc_text_agree_on_this_process() -> None:
    # Both paths over the live namespace of the test process (no setns: no root needed),
    # with a listener, an established pair and three client ports of ours in TIME_WAIT.
    # Sockets of others may come and go between the readings: retried until two agree.
    with contextlib.ExitStack() as stack:
        server = stack.enter_context(socket.create_server(("127.0.0.1", 0)))
        for _ in range(3):
            socket.create_connection(server.getsockname()).close()  # client closes first
            server.accept()[0].close()
        stack.enter_context(socket.create_connection(server.getsockname()))
        stack.enter_context(server.accept()[0])
        for _ in range(20):
            diag = procfs.read_net(os.getpid(), (1, 65535))
            text = procfs.read_net(os.getpid(), (1, 65535), sock_diag=False)
            if (diag.tcp_states, diag.ephemeral_ports_in_use) == (
                text.tcp_states,
                text.ephemeral_ports_in_use,
            ):
                break
    assert diag.tcp_sockets_source == "sock_diag" and text.tcp_sockets_source == "proc"
    assert diag.tcp_states["time_wait"] >= 3 and diag.tcp_states["established"] >= 2
    assert diag.tcp_states == text.tcp_states
    assert diag.ephemeral_ports_in_use == text.ephemeral_ports_in_use


def test_gone_process_raises_process_gone() -> None:
    pid = _dead_pid()
    with pytest.raises(procfs.ProcessGone):
        procfs.read_net(pid, (1, 65535))
    with pytest.raises(procfs.ProcessGone):
        procfs.read_net(pid, (1, 65535), sock_diag=False)
    with pytest.raises(procfs.ProcessGone):
        procfs.read_proc_tree(pid)
    assert procfs.start_time(pid) is None


def _dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()  # reaped: its /proc entry is gone
    return child.pid


def test_large_tables_are_scanned_in_chunks_without_loss() -> None:
    # 6000 sockets (well over one scan chunk), built from a captured TIME_WAIT line.
    line = fixture("ns_tcp").splitlines()[3]
    header = fixture("ns_tcp").splitlines()[0]
    local = line.split()[1]  # 0100007F:9C40
    rows = [header]
    for i in range(6000):
        rest = line.split(":", 1)[1].replace(local, f"{local[:-4]}{10000 + i:04X}", 1)
        rows.append(f"{i:4d}:{rest}")
    text = "\n".join(rows) + "\n"
    assert len(text) > 3 * procfs._CHUNK
    assert procfs.tcp_state_counts([text]) == {"time_wait": 6000}
    assert procfs.ephemeral_ports_in_use([text], (10000, 65535)) == 6000
    assert procfs.ephemeral_ports_in_use([text], (12000, 12999)) == 1000
    assert [port for port, _ in procfs.parse_proc_net_tcp(text)] == list(range(10000, 16000))
