"""Faults ([[faults]]): what breaks while a new serial travels, when, for how long, and where.

Each [[faults]] table is a case of its own (beside the transports and transfer kinds), its
name ending in the fault's `name` (its kind by default): a repeat publishes one new serial,
triggers it as the scenario says, and breaks something `at` seconds after the trigger (or
once `after_bytes` bytes crossed a targeted secondary's link), for `duration`:

- link-down: the link drops everything (`direction` both, forward or reverse);
- reset: the transfer's TCP connection is cut by resets to both ends (no duration);
- slow-primary: the link's rate (forward by default) drops to `rate`;
- link-degrade: the link's one-way `delay` and `loss` change (a path gone long and lossy);
- primary-restart: the primary is stopped and started at once (no duration);
- primary-stop: the primary is down for `duration`;
- secondary-kill: the secondary is killed (SIGKILL, every process of it) and started again
  after `duration`.

`target` is a site or a host of the fleet (default: every secondary); the primary's faults
have none. Link faults need linkem's runtime control (link.backend auto or linkem).
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import BeforeValidator, Field, model_validator

from harness.core.terms import FaultKind
from harness.spec.fields import Duration, Rate, Size, Strict
from harness.spec.link import LossSpec, loss_shorthand

FAULT_NAME = re.compile(r"^[a-z][a-z0-9-]{0,39}$")
LINK_FAULTS: frozenset[str] = frozenset({"link-down", "reset", "slow-primary", "link-degrade"})
PRIMARY_FAULTS: frozenset[str] = frozenset({"primary-restart", "primary-stop"})
# Kinds that last `duration`; the others are one event.
LASTING: frozenset[str] = frozenset(
    {"link-down", "slow-primary", "link-degrade", "primary-stop", "secondary-kill"}
)
# Keys a kind takes beside name, kind, at, after_bytes and duration.
_OWN_KEYS: dict[str, frozenset[str]] = {
    "link-down": frozenset({"target", "direction"}),
    "reset": frozenset({"target"}),
    "slow-primary": frozenset({"target", "direction", "rate"}),
    "link-degrade": frozenset({"target", "direction", "delay", "loss"}),
    "primary-restart": frozenset(),
    "primary-stop": frozenset(),
    "secondary-kill": frozenset({"target"}),
}
_COMMON = frozenset({"name", "kind", "at", "after_bytes", "duration"})


class FaultSpec(Strict):
    name: str | None = None
    kind: FaultKind
    at: Duration | None = None  # seconds after the trigger
    after_bytes: Size | None = Field(default=None, ge=1)  # bytes the link carried first
    duration: Duration | None = None
    target: str | None = None  # a site or host; None: every secondary
    direction: Literal["both", "forward", "reverse"] | None = None
    rate: Rate | None = None
    delay: Duration | None = None  # one way
    loss: Annotated[LossSpec | None, BeforeValidator(loss_shorthand)] = None

    @model_validator(mode="after")
    def _fits_kind(self) -> FaultSpec:
        kind = self.kind
        given = {k for k in self.model_fields_set if getattr(self, k) is not None}
        extra = sorted(given - _COMMON - _OWN_KEYS[kind])
        if extra:
            allowed = ", ".join(sorted(_COMMON | _OWN_KEYS[kind]))
            verb = "does" if len(extra) == 1 else "do"
            raise ValueError(
                f"{', '.join(extra)} {verb} not apply to a {kind} fault; allowed: {allowed}"
            )
        if self.name is not None and not FAULT_NAME.match(self.name):
            raise ValueError(
                f"name {self.name!r} must be 1-40 lowercase letters, digits and '-', starting "
                "with a letter"
            )
        if self.at is not None and self.after_bytes is not None:
            raise ValueError("give at or after_bytes, not both: one moment starts the fault")
        if kind == "reset" and self.at is None and self.after_bytes is None:
            raise ValueError(
                "a reset needs its moment: at (e.g. '2s' after the trigger) or after_bytes "
                "(e.g. '1MB' into the transfer)"
            )
        if kind in LASTING and not self.duration:
            raise ValueError(f"a {kind} fault needs a duration above 0, e.g. duration = '30s'")
        if kind not in LASTING and self.duration is not None:
            raise ValueError(f"a {kind} fault is one event and has no duration; remove it")
        if kind == "slow-primary" and not self.rate:
            raise ValueError("a slow-primary fault needs the rate it drops to, e.g. '1mbit'")
        if kind == "link-degrade" and self.delay is None and self.loss is None:
            raise ValueError("a link-degrade fault needs a delay, a loss or both")
        return self

    @property
    def label(self) -> str:
        """The fault's name in case names and reports."""
        return self.name or self.kind

    @property
    def start_at(self) -> float:
        """Seconds after the trigger (0 when it waits for bytes, or says nothing)."""
        return self.at or 0.0

    @property
    def on_link(self) -> bool:
        return self.kind in LINK_FAULTS

    @property
    def on_primary(self) -> bool:
        return self.kind in PRIMARY_FAULTS

    @property
    def directions(self) -> tuple[str, ...]:
        """Which ways of a targeted link a link fault acts on."""
        if self.kind == "reset":
            return ("forward",)  # the zone's way: the connection's data; resets go both ways
        default = "forward" if self.kind == "slow-primary" else "both"
        way = self.direction or default
        return ("forward", "reverse") if way == "both" else (way,)


def check_faults(
    faults: list[FaultSpec], sites: dict[str, list[str]], trigger: str, backends: set[str]
) -> None:
    """What the scenario as a whole must allow its faults (raises ValueError): names
    unique, targets that exist, a trigger of one new serial, and linkem where links fail.
    `sites`: site -> its hosts; `backends`: the links' backends."""
    seen: dict[str, int] = {}
    hosts = {host for names in sites.values() for host in names}
    for index, fault in enumerate(faults):
        where = f"faults[{index}]"
        if fault.label in seen:
            raise ValueError(
                f"{where}: a fault named {fault.label!r} is faults[{seen[fault.label]}] "
                "already; give each its own name"
            )
        seen[fault.label] = index
        if fault.target is not None and fault.target not in sites and fault.target not in hosts:
            known = ", ".join(sorted(set(sites) | hosts))
            raise ValueError(
                f"{where}.target: {fault.target!r} names no site or host; the scenario has {known}"
            )
        if fault.on_link and "netem" in backends:
            raise ValueError(
                f"{where}: a {fault.kind} fault needs linkem's runtime control, and a link "
                "asks for netem; set link.backend = 'auto' or 'linkem'"
            )
    if faults and trigger == "cold-start":
        raise ValueError(
            "faults act beside a new serial (trigger notify or retransfer), not a cold "
            "start; set trigger = 'notify' or 'retransfer'"
        )


def fault_targets(fault: FaultSpec, sites: dict[str, list[str]]) -> list[str]:
    """The secondaries a fault acts on (every one without a target)."""
    everyone = [host for names in sites.values() for host in names]
    if fault.target is None or fault.on_primary:
        return everyone
    return sites.get(fault.target, [fault.target] if fault.target in everyone else [])


def describe_fault(fault: FaultSpec) -> str:
    """A few words for tables: 'link-down both 30 s at 2 s on seoul'."""
    parts = [fault.kind]
    if fault.direction:
        parts.append(fault.direction)
    if fault.rate:
        parts.append(f"to {fault.rate / 1e6:g} Mbit/s")
    if fault.delay is not None:
        parts.append(f"delay {fault.delay * 1000:g} ms")
    if fault.loss is not None:
        parts.append(f"loss {fault.loss.p:g} %")
    if fault.duration:
        parts.append(f"for {fault.duration:g} s")
    parts.append(
        f"after {fault.after_bytes:,} B" if fault.after_bytes else f"at {fault.start_at:g} s"
    )
    if fault.target:
        parts.append(f"on {fault.target}")
    return " ".join(parts)
