"""A host a case's plan asks for: what every backend (namespaces, containers, the lab)
builds, and what the plan can say without knowing how (harness/testbed/topology.py lays
the endpoints out on a router and addresses)."""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.core.terms import Role
from harness.spec import HostSpec, LinkSpec


@dataclass(frozen=True)
class Endpoint:
    """A host of the testbed other than the router.

    `link`: the emulated path between the router and this host, in the zone's direction:
    for a secondary, forward = primary -> it; for the primary, its access link (forward =
    its uplink, every transfer leaves through it). `settings`: its per-host TCP sysctls.
    """

    name: str  # "primary", "secondary", or "<site>-<n>" in a fleet
    role: Role
    settings: HostSpec = field(default_factory=HostSpec)
    link: LinkSpec = field(default_factory=LinkSpec)
    site: str = ""
