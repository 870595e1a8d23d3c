"""A transport as one value, from the scenario to the wire (pure).

A scenario names its transports ("tcp", "tcp-tsig", "xot", "xot-tsig"; the schema checks
the names, harness/core/terms.py holds them). The case's `Transport` is made once from that
name and the scenario's `tsig_algorithm` (spec/loader.py), and from there every stage asks
it rather than reading the name again: the plan (what the servers must support), the
servers' setups and their switches, the agents of real hosts (`to_dict` / `from_dict`), the
client's pull (its port, its secrets), the evidence of what a transfer really used, and the
record, which keeps the name.

    xot = Transport.parse("xot-tsig", "hmac-sha256")
    xot.tls, xot.tsig_algorithm, xot.port      # True, "hmac-sha256", 853
    Transport.parse("tcp").switch_to(xot)      # ("tcp", "xot-tsig"): the servers change
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, TypeVar

from harness.core.terms import TRANSPORTS, TransportName

DNS_PORT = 53  # DNS over TCP
XOT_PORT = 853  # DNS over TLS (RFC 7858), and so XoT (RFC 9103)
DEFAULT_TSIG_ALGORITHM = "hmac-sha256"  # the scenario's default `tsig_algorithm`

# The one table of what each name means: (over TLS, TSIG-signed).
_PARTS: dict[TransportName, tuple[bool, bool]] = {
    "tcp": (False, False),
    "tcp-tsig": (False, True),
    "xot": (True, False),
    "xot-tsig": (True, True),
}
assert tuple(_PARTS) == TRANSPORTS, "a transport in terms.py without its parts here"

Key = TypeVar("Key")
Files = TypeVar("Files")


@dataclass(frozen=True)
class Transport:
    """How a secondary (or a client) transfers a zone: over TLS or plain TCP, signed with a
    TSIG algorithm or not, to the primary's `port`. Made by `parse` or `seen`, never by
    hand: the fields always agree with the name."""

    name: TransportName
    tls: bool
    tsig_algorithm: str | None  # None: unsigned
    port: int

    def __post_init__(self) -> None:
        if self.name not in _PARTS:
            raise ValueError(f"transport {self.name!r} is not one of {', '.join(TRANSPORTS)}")
        tls, signed = _PARTS[self.name]
        if (tls, signed, XOT_PORT if tls else DNS_PORT) != (self.tls, self.signed, self.port):
            raise ValueError(f"transport {self.name!r} does not match its parts: {self!r}")

    @classmethod
    def parse(cls, name: str, tsig_algorithm: str = DEFAULT_TSIG_ALGORITHM) -> Transport:
        """The transport a scenario names; `tsig_algorithm`: the scenario's, kept only by a
        signed transport. Raises ValueError naming the key and its choices."""
        if name not in _PARTS:
            raise ValueError(
                f"transports: {name!r} is not a transport; write one of {', '.join(TRANSPORTS)}"
            )
        tls, signed = _PARTS[name]  # type: ignore[index]
        port = XOT_PORT if tls else DNS_PORT
        return cls(name, tls, tsig_algorithm if signed else None, port)  # type: ignore[arg-type]

    @classmethod
    def seen(cls, tls: bool, signed: bool) -> Transport:
        """The transport a transfer was seen to use (its port, whether it was signed); the
        algorithm is not seen: the default stands in for it."""
        name = next(n for n, parts in _PARTS.items() if parts == (tls, signed))
        return cls.parse(name)

    @property
    def signed(self) -> bool:
        return self.tsig_algorithm is not None

    def __str__(self) -> str:
        return self.name

    def switch_to(self, other: Transport) -> tuple[TransportName, TransportName] | None:
        """What a running secondary changes to go from this transport to `other`: the pair
        of names its dialect's reconfiguration must declare it makes (servers/base.py
        reconfig_switches), or None when its transport settings stay as they are."""
        if (self.tls, self.tsig_algorithm) == (other.tls, other.tsig_algorithm):
            return None
        return (self.name, other.name)

    def secrets(self, key: Key | None, files: Files | None) -> tuple[Key | None, Files | None]:
        """Of a group's TSIG key and TLS files, those a secondary or a client on this
        transport uses: the key when it is signed, the files when it is over TLS."""
        return (key if self.signed else None, files if self.tls else None)

    def to_dict(self) -> dict[str, Any]:
        """For the agents of real hosts (JSON); `from_dict` reads it back."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Transport:
        made = cls.parse(data["name"], data.get("tsig_algorithm") or DEFAULT_TSIG_ALGORITHM)
        if made.to_dict() != data:
            raise ValueError(f"a transport's parts do not match its name: {data}")
        return made


TCP = Transport.parse("tcp")
