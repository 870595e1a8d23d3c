"""The kernel's TCP socket states and the ephemeral port range: the words both socket
readers share, /proc/net/tcp text (procfs) and sock_diag netlink (sockdiag, sockdiag_wire).
"""

from __future__ import annotations

# include/net/tcp_states.h
TCP_STATES = {
    0x01: "established",
    0x02: "syn_sent",
    0x03: "syn_recv",
    0x04: "fin_wait1",
    0x05: "fin_wait2",
    0x06: "time_wait",
    0x07: "close",
    0x08: "close_wait",
    0x09: "last_ack",
    0x0A: "listen",
    0x0B: "closing",
    0x0C: "new_syn_recv",
    0x0D: "bound_inactive",
}

PortRange = tuple[int, int]  # net.ipv4.ip_local_port_range, both ends included
