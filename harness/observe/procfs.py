"""/proc readers for one server: its namespace's TCP counters and its process tree's usage.

Pure parsers of /proc text first, thin readers after. /proc/<pid>/net/* shows the namespace of
<pid> whatever namespace the reader is in, so the driver reads every host from the root
namespace without entering it. /proc/sys is the exception: it shows the reader's namespace,
so a namespace's ip_local_port_range is read once by entering it (`read_port_range`).

What each figure counts (Linux 6.x):
- sockstat `TCP: inuse` is per namespace and per family (TCP6 inuse is added); `tw` is the
  namespace's TIME_WAIT count for both families; `orphan` and `alloc` are host-wide.
- /proc/<pid>/net/tcp and tcp6 list the namespace's sockets, TIME_WAIT and request sockets
  included; the state column is the kernel's hex code.

`read_net` takes sockets per state and ephemeral ports from a netlink sock_diag dump
(harness.observe.sockdiag: a few milliseconds at 30 k TIME_WAIT sockets, where the tcp/tcp6
text costs 75-90 ms) and falls back to the text when the dump is refused: the reader lacks
CAP_SYS_ADMIN to enter another namespace (a rootless driver), the kernel lacks inet_diag /
tcp_diag, or a sandbox or seccomp policy forbids NETLINK_SOCK_DIAG. The fallback is logged
once per reason and named in the snapshot (`tcp_sockets_source`).
"""

from __future__ import annotations

import logging
import os
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from operator import itemgetter
from pathlib import Path
from typing import NamedTuple

from harness.core.netns import entered
from harness.observe import sockdiag
from harness.observe.tcp_states import TCP_STATES, PortRange

log = logging.getLogger(__name__)

_LISTEN_HEX = "0A"
# "  12: 0100007F:14B4 0100007F:9CB4 01 ..." (IPv6: 32 hex digits per address): the local
# port and the state. No line anchor: a pattern that starts with a literal ':' is found by a
# fast scan (three times faster than a ^-anchored one, twice faster than splitting 30 k lines),
# and no other ':' of a line is followed by what the rest demands.
_TCP_ROW = re.compile(r":([0-9A-F]{4}) [0-9A-F]{8,32}:[0-9A-F]{4} ([0-9A-F]{2}) ")
_CHUNK = 1 << 18


class ProcessGone(Exception):
    """The process (or its /proc entry) disappeared while it was being read."""


# --- pure parsers -----------------------------------------------------------------------


def parse_sockstat(text: str, sockstat6: str | None = None) -> dict[str, int]:
    """`TCP:` line of /proc/net/sockstat -> inuse, orphan, time_wait, alloc, mem (pages).

    With the sockstat6 text, its `TCP6: inuse` is added to inuse; the other TCP figures
    already cover both families.
    """
    out = {"inuse": 0, "orphan": 0, "time_wait": 0, "alloc": 0, "mem": 0}
    names = {"tw": "time_wait"}
    for line in text.splitlines():
        if line.startswith("TCP:"):
            words = line.split()[1:]
            for key, value in zip(words[::2], words[1::2], strict=True):
                out[names.get(key, key)] = int(value)
    if sockstat6:
        for line in sockstat6.splitlines():
            if line.startswith("TCP6:"):
                words = line.split()[1:]
                out["inuse"] += int(dict(zip(words[::2], words[1::2], strict=True))["inuse"])
    return out


def parse_snmp(text: str) -> dict[str, dict[str, int]]:
    """/proc/net/snmp (or netstat): pairs of `Proto: names` / `Proto: values` lines."""
    out: dict[str, dict[str, int]] = {}
    lines = text.splitlines()
    for header, values in zip(lines[::2], lines[1::2], strict=False):
        proto, _, names = header.partition(":")
        proto2, _, numbers = values.partition(":")
        if proto != proto2:
            raise ValueError(f"unpaired lines in snmp text: {header[:40]!r} / {values[:40]!r}")
        out[proto] = dict(zip(names.split(), map(int, numbers.split()), strict=True))
    return out


parse_netstat = parse_snmp  # /proc/net/netstat has the same layout (TcpExt, IpExt, MPTcpExt)


def _tcp_row_chunks(text: str) -> Iterator[list[tuple[str, str]]]:
    """(local port hex, state hex) per socket line, some 1700 lines at a time.

    A regex scan holds the GIL until it returns: scanning 30 k lines at once would stall the
    driver's other threads (the millisecond serial poller) for tens of milliseconds.
    """
    start = 0
    while start < len(text):
        end = text.find("\n", start + _CHUNK)
        end = len(text) if end < 0 else end + 1
        yield _TCP_ROW.findall(text, start, end)
        start = end


def parse_proc_net_tcp(text: str) -> list[tuple[int, str]]:
    """/proc/net/tcp or tcp6 -> (local port, state name) per socket."""
    return [
        (int(port, 16), TCP_STATES.get(int(state, 16), f"state_{state}"))
        for rows in _tcp_row_chunks(text)
        for port, state in rows
    ]


def summarise_tcp(texts: Iterable[str], port_range: PortRange | None) -> tuple[dict[str, int], int]:
    """(sockets per state name, distinct non-listening local ports inside port_range)."""
    states: Counter[str] = Counter()
    ports: set[str] = set()
    for text in texts:
        for rows in _tcp_row_chunks(text):
            states.update(map(itemgetter(1), rows))
            if port_range is not None:
                ports.update(port for port, state in rows if state != _LISTEN_HEX)
    in_range = 0
    if port_range is not None:
        # Ports stay 4-digit upper-case hex strings: they compare as the numbers do, and
        # skipping 30 k int() calls halves the cost.
        lo, hi = (f"{port:04X}" for port in port_range)
        in_range = len([port for port in ports if lo <= port <= hi])
    names = {TCP_STATES.get(int(code, 16), f"state_{code}"): n for code, n in states.items()}
    return dict(sorted(names.items())), in_range


def tcp_state_counts(texts: Iterable[str]) -> dict[str, int]:
    """Sockets per state over the given tcp/tcp6 texts; only states that occur."""
    return summarise_tcp(texts, None)[0]


def ephemeral_ports_in_use(texts: Iterable[str], port_range: PortRange) -> int:
    """Distinct local ports of non-listening sockets inside ip_local_port_range.

    A port counts once however many sockets (both families, any peer) use it.
    """
    return summarise_tcp(texts, port_range)[1]


def parse_port_range(text: str) -> PortRange:
    """ip_local_port_range ("32768\\t60999")."""
    lo, hi = map(int, text.split())
    return lo, hi


class ProcStat(NamedTuple):
    state: str
    ppid: int
    utime: int  # clock ticks
    stime: int
    cutime: int  # reaped children, ticks
    cstime: int
    starttime: int  # ticks since boot


def parse_proc_stat(text: str) -> ProcStat:
    """/proc/<pid>/stat. The command name (field 2) may hold spaces and parentheses, so the
    fields are counted from the last ')'."""
    fields = text[text.rindex(")") + 2 :].split()
    return ProcStat(
        state=fields[0],
        ppid=int(fields[1]),
        utime=int(fields[11]),
        stime=int(fields[12]),
        cutime=int(fields[13]),
        cstime=int(fields[14]),
        starttime=int(fields[19]),
    )


def parse_status(text: str) -> dict[str, int]:
    """The `kB` lines of /proc/<pid>/status (VmRSS, RssAnon, ...) in bytes."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        words = value.split()
        if len(words) == 2 and words[1] == "kB":
            out[key] = int(words[0]) * 1024
    return out


@dataclass(frozen=True)
class NetSnapshot:
    """One namespace's TCP figures, named as in a samples.jsonl server line."""

    tcp: dict[str, int]  # inuse, orphan, time_wait, alloc
    tcp_states: dict[str, int]
    ephemeral_ports_in_use: int
    retrans_segs: int
    tcp_timeouts: int
    active_opens: int
    passive_opens: int
    tcp_sockets_source: str = "proc"  # "sock_diag" | "proc": where tcp_states came from
    # Bytes on the namespace's interfaces but loopback (/proc/<pid>/net/dev): what the
    # server sent and received over its links (a primary's cost as its fleet grows).
    net_tx_bytes: int = 0
    net_rx_bytes: int = 0

    def fields(self) -> dict[str, object]:
        return asdict(self)


def parse_net_dev(text: str) -> dict[str, tuple[int, int]]:
    """/proc/net/dev -> interface -> (received bytes, transmitted bytes)."""
    out: dict[str, tuple[int, int]] = {}
    for line in text.splitlines()[2:]:
        name, sep, rest = line.partition(":")
        fields = rest.split()
        if sep and len(fields) >= 9:
            out[name.strip()] = (int(fields[0]), int(fields[8]))
    return out


def net_snapshot(
    *,
    sockstat: str,
    sockstat6: str | None,
    snmp: str,
    netstat: str,
    tcp_texts: Iterable[str] | None = None,
    port_range: PortRange,
    sockets: tuple[dict[str, int], int] | None = None,
    net_dev: str | None = None,
) -> NetSnapshot:
    """The snapshot from /proc texts; ``sockets`` (states, ephemeral ports in use), when
    given, comes from sock_diag and replaces the tcp/tcp6 texts."""
    counts = parse_sockstat(sockstat, sockstat6)
    tcp = parse_snmp(snmp).get("Tcp", {})
    ext = parse_netstat(netstat).get("TcpExt", {})
    if sockets is None:
        states, ports = summarise_tcp(tcp_texts or (), port_range)
    else:
        states, ports = sockets
    links = [v for k, v in parse_net_dev(net_dev or "").items() if k != "lo"]
    return NetSnapshot(
        tcp={key: counts[key] for key in ("inuse", "orphan", "time_wait", "alloc")},
        tcp_states=states,
        ephemeral_ports_in_use=ports,
        retrans_segs=tcp.get("RetransSegs", 0),
        tcp_timeouts=ext.get("TCPTimeouts", 0),
        active_opens=tcp.get("ActiveOpens", 0),
        passive_opens=tcp.get("PassiveOpens", 0),
        tcp_sockets_source="proc" if sockets is None else "sock_diag",
        net_tx_bytes=sum(tx for _, tx in links),
        net_rx_bytes=sum(rx for rx, _ in links),
    )


def tree_pids(root: int, children: dict[int, list[int]]) -> list[int]:
    """`root` and all its descendants, given each pid's children."""
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, ()))
    return out


# --- thin readers -----------------------------------------------------------------------


def _read(path: str) -> str:
    # seq_file hands out about a page per read() whatever the size asked; 64 KiB is
    # enough and stays below malloc's mmap threshold.
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks).decode("ascii", "replace")


def _read_pid(pid: int, name: str) -> str:
    try:
        return _read(f"/proc/{pid}/{name}")
    except (FileNotFoundError, ProcessLookupError) as exc:
        raise ProcessGone(f"pid {pid} is gone ({name})") from exc


def _read_optional(pid: int, name: str) -> str | None:
    try:
        return _read(f"/proc/{pid}/{name}")
    except (FileNotFoundError, ProcessLookupError):
        return None  # no IPv6 in this kernel; a process that left fails on the next read


_refusals: set[str] = set()  # sock_diag refusals already logged


def read_net(pid: int, port_range: PortRange, *, sock_diag: bool = True) -> NetSnapshot:
    """TCP figures of the namespace `pid` lives in; sockets per state and ephemeral ports
    from sock_diag, or from /proc/<pid>/net/tcp{,6} when it is refused or not wanted."""
    sockstat = _read_pid(pid, "net/sockstat")
    sockstat6 = _read_optional(pid, "net/sockstat6")
    snmp = _read_pid(pid, "net/snmp")
    netstat = _read_pid(pid, "net/netstat")
    sockets = _sock_diag_summary(pid, port_range) if sock_diag else None
    texts = None
    if sockets is None:
        texts = [_read_pid(pid, "net/tcp")]
        if (tcp6 := _read_optional(pid, "net/tcp6")) is not None:
            texts.append(tcp6)
    return net_snapshot(
        sockstat=sockstat,
        sockstat6=sockstat6,
        snmp=snmp,
        netstat=netstat,
        tcp_texts=texts,
        port_range=port_range,
        sockets=sockets,
        net_dev=_read_optional(pid, "net/dev"),
    )


def _sock_diag_summary(pid: int, port_range: PortRange) -> tuple[dict[str, int], int] | None:
    try:
        return sockdiag.tcp_summary(port_range, pid=pid)
    except FileNotFoundError as exc:  # /proc/<pid>/ns/net
        raise ProcessGone(f"pid {pid} is gone (ns/net)") from exc
    except sockdiag.SockDiagRefused as exc:
        if str(exc) not in _refusals:
            _refusals.add(str(exc))
            log.warning("%s; reading /proc/<pid>/net/tcp{,6} text instead (slower)", exc)
        return None


def netns_inode(pid: int) -> int:
    """Inode of the network namespace `pid` lives in (equal inodes: one namespace)."""
    try:
        return os.stat(f"/proc/{pid}/ns/net").st_ino
    except (FileNotFoundError, ProcessLookupError) as exc:
        raise ProcessGone(f"pid {pid} is gone (ns/net)") from exc


def read_port_range(netns: str | None) -> PortRange:
    """ip_local_port_range of a named namespace (None: the caller's own)."""
    with entered(netns):
        return parse_port_range(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text())


def start_time(pid: int) -> int | None:
    """Start time of `pid` in ticks since boot; None when it is gone or a zombie."""
    try:
        stat = parse_proc_stat(_read(f"/proc/{pid}/stat"))
    except (FileNotFoundError, ProcessLookupError):
        return None
    return None if stat.state in ("Z", "X") else stat.starttime


def _children(pid: int) -> list[int] | None:
    """Children of every thread of `pid`; None without CONFIG_PROC_CHILDREN."""
    out: list[int] = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except (FileNotFoundError, ProcessLookupError):
        return []
    for tid in tids:
        try:
            out.extend(map(int, _read(f"/proc/{pid}/task/{tid}/children").split()))
        except FileNotFoundError:
            if not os.path.exists(f"/proc/{pid}/task/{tid}"):
                continue  # the thread ended
            return None
        except ProcessLookupError:
            continue
    return out


def _children_by_scan() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                ppid = parse_proc_stat(_read(f"/proc/{name}/stat")).ppid
            except (FileNotFoundError, ProcessLookupError):
                continue
            children.setdefault(ppid, []).append(int(name))
    return children


def descendants(pid: int) -> list[int]:
    """`pid` and every process below it."""
    children: dict[int, list[int]] = {}
    todo = [pid]
    while todo:
        current = todo.pop()
        found = _children(current)
        if found is None:
            return tree_pids(pid, _children_by_scan())
        children[current] = found
        todo.extend(found)
    return tree_pids(pid, children)


class TreeUsage(NamedTuple):
    cpu_user_s: float
    cpu_system_s: float
    anon_bytes: int | None  # RssAnon summed; None where the kernel does not say (< 4.5)
    tick_s: float = 0.01  # what the CPU seconds move by: one clock tick (1 / USER_HZ)


def read_proc_tree(pid: int) -> TreeUsage:
    """CPU and anonymous memory of `pid` and its descendants (the fallback without a cgroup).

    CPU includes reaped children (cutime/cstime), so short-lived workers still count. Memory
    sums RssAnon over the processes: anonymous pages shared between forks (copy on write)
    count once per process, so with forking servers (NSD) it is an upper bound. /proc keeps
    no peak of it (VmHWM is a peak of all resident pages, file-backed ones included).
    """
    tick = os.sysconf("SC_CLK_TCK")
    user = system = 0
    anon: int | None = None
    pids = descendants(pid)
    for index, current in enumerate(pids):
        try:
            stat = parse_proc_stat(_read(f"/proc/{current}/stat"))
            status = parse_status(_read(f"/proc/{current}/status"))
        except (FileNotFoundError, ProcessLookupError) as exc:
            if index == 0:
                raise ProcessGone(f"pid {pid} is gone") from exc
            continue  # a child that just ended
        if index == 0 and stat.state in ("Z", "X"):
            raise ProcessGone(f"pid {pid} has exited")
        user += stat.utime + stat.cutime
        system += stat.stime + stat.cstime
        if "RssAnon" in status:
            anon = (anon or 0) + status["RssAnon"]
    return TreeUsage(user / tick, system / tick, anon, 1 / tick)
