"""A host's sockets read through its agent (remote/agent_measures.py runs
observe/sockdiag.py there): the objects an AgentPlace (remote/place.py) gives the case
engine for settle's connection counts and a transfer's connection watch. Their answers
hold no time: counts, and a connection's peaks (windows, RTT, retransmits)."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from harness.remote.channel import AgentChannel


class AgentCount:
    """A host's open connections on a server's ports, counted by its agent at each call
    (settle's looks). Made by one count, so that a host whose kernel refuses sock_diag
    raises SockDiagRefused in the caller, as a local `ConnectionCount` does (settle then
    leaves the host's connections uncounted), not at a look."""

    def __init__(self, channel: AgentChannel, ports: Collection[int]) -> None:
        self.channel = channel
        self.ports = sorted(ports)
        self()

    def __call__(self) -> int:
        return int(self.channel.call("open_connections", ports=self.ports, wait=10))

    def __enter__(self) -> AgentCount:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


class AgentTcpWatch:
    """A transfer's connection sampled by its host's agent (observe/sockdiag.py
    `ConnectionWatch` there) while the context is open; its peaks are plain figures (no
    time in them)."""

    def __init__(self, channel: AgentChannel, peer: tuple[str, int | None]) -> None:
        self.channel = channel
        self.peer = peer
        self.error: str | None = None
        self._peaks: dict[str, Any] = {}
        self._id: int | None = None

    def __enter__(self) -> AgentTcpWatch:
        address, port = self.peer
        self._id = int(self.channel.call("watch_start", address=address, port=port, wait=10))
        return self

    def __exit__(self, *exc: object) -> None:
        if self._id is None:
            return
        answer = self.channel.call("watch_stop", watch=self._id, wait=10)
        self._id = None
        self._peaks, self.error = answer["peaks"], answer["error"]

    def peaks(self) -> dict[str, Any]:
        return self._peaks
