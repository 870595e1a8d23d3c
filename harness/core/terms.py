"""The words every stage shares: transports, transfer kinds, triggers, roles, methods.

Defined once here; the scenario schema, the result records, the runner and the report all
import them, so a new transport or role is added in one place.
"""

from __future__ import annotations

from typing import Literal, get_args

# A transport's name; harness/core/transport.py says what each means (`Transport`).
TransportName = Literal["tcp", "tcp-tsig", "xot", "xot-tsig"]
XfrKind = Literal["axfr", "ixfr"]
Trigger = Literal["notify", "retransfer", "cold-start", "stream", "catalog"]
Role = Literal["primary", "secondary"]  # a server's part in the relation
Method = Literal["server-to-server", "client-pull-own", "client-pull-kdig"]
ServerKind = Literal["bind", "knot", "nsd", "pdns"]
# What a scenario's [[faults]] can break (harness/spec/faults.py says what each does).
FaultKind = Literal[
    "link-down",
    "reset",
    "slow-primary",
    "link-degrade",
    "primary-restart",
    "primary-stop",
    "secondary-kill",
]

TRANSPORTS: tuple[TransportName, ...] = get_args(TransportName)
XFR_KINDS: tuple[XfrKind, ...] = get_args(XfrKind)
TRIGGERS: tuple[Trigger, ...] = get_args(Trigger)
ROLES: tuple[Role, ...] = get_args(Role)
METHODS: tuple[Method, ...] = get_args(Method)
SERVER_KINDS: tuple[ServerKind, ...] = get_args(ServerKind)
FAULT_KINDS: tuple[FaultKind, ...] = get_args(FaultKind)
SERVER_TO_SERVER: Method = "server-to-server"
