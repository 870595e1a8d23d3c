"""What the kernel offers for link emulation, probed in a throwaway network namespace.

Nothing on the host changes: the probe creates one namespace with a veth pair inside it,
tries each feature there and deletes exactly that namespace.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass(frozen=True)
class KernelFeatures:
    root: bool
    netns: bool
    veth: bool
    netem: bool
    htb: bool
    tbf: bool
    nfqueue: bool
    congestion_allowed: tuple[str, ...]
    congestion_available: tuple[str, ...]
    kernel: str
    notes: tuple[str, ...]

    @property
    def link_backend(self) -> str:
        """The backend an impaired link gets with backend = "auto"."""
        if self.netem:
            return "netem"
        if self.nfqueue:
            return "linkem"
        return "none"

    def to_json(self) -> dict[str, object]:
        data = asdict(self)
        data["link_backend"] = self.link_backend
        return data


def _read_words(path: str) -> tuple[str, ...]:
    try:
        return tuple(Path(path).read_text().split())
    except OSError:
        return ()


def _ok(argv: list[str]) -> bool:
    return subprocess.run(argv, capture_output=True, timeout=20, check=False).returncode == 0


def probe_kernel() -> KernelFeatures:
    root = os.geteuid() == 0
    notes: list[str] = []
    features = {
        "netns": False,
        "veth": False,
        "netem": False,
        "htb": False,
        "tbf": False,
        "nfqueue": False,
    }
    if root:
        name = f"xfrbench-probe-{os.getpid()}"
        features["netns"] = _ok(["ip", "netns", "add", name])
        try:
            if features["netns"]:
                ns = ["ip", "netns", "exec", name]
                features["veth"] = _ok(
                    ["ip", "-n", name, "link", "add", "p0", "type", "veth", "peer", "name", "p1"]
                )
                if features["veth"]:
                    _ok(["ip", "-n", name, "link", "set", "p0", "up"])
                    for qdisc, args in (
                        ("netem", ["netem", "delay", "1ms"]),
                        ("htb", ["htb", "default", "1"]),
                        ("tbf", ["tbf", "rate", "1mbit", "burst", "32kbit", "latency", "50ms"]),
                    ):
                        features[qdisc] = _ok(
                            [*ns, "tc", "qdisc", "replace", "dev", "p0", "root", *args]
                        )
                features["nfqueue"] = _ok(
                    [
                        *ns,
                        "iptables",
                        "-w",
                        "-A",
                        "OUTPUT",
                        "-j",
                        "NFQUEUE",
                        "--queue-num",
                        "0",
                        "--queue-bypass",
                    ]
                )
        finally:
            if features["netns"]:
                _ok(["ip", "netns", "delete", name])
    else:
        notes.append("not root: namespaces, qdiscs and iptables were not probed")
    return KernelFeatures(
        root=root,
        congestion_allowed=_read_words("/proc/sys/net/ipv4/tcp_allowed_congestion_control"),
        congestion_available=_read_words("/proc/sys/net/ipv4/tcp_available_congestion_control"),
        kernel=os.uname().release,
        notes=tuple(notes),
        **features,
    )
