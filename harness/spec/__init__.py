"""Scenario files: strict schema, matrix expansion into cases, and a content hash.

A scenario is a TOML file. Unknown keys, wrong types and out-of-range values are rejected
with one message naming the file, the key path and what is allowed. Link settings at the top
of [link] apply to both directions; [link.forward] (primary -> secondary, the way a zone
travels) and [link.reverse] override them. [matrix] maps dotted key paths to lists of values;
the cases are the cartesian product of the matrix, the transports and the xfr kinds.

The names below are the package's API; its modules:
- fields: the strict base model and the unit-reading field types (durations, rates, ...).
- hosts: each host's server ([servers.*]) and TCP settings ([hosts.*]).
- link: an emulated link's two directions ([link], [uplink], a site's link).
- fleet: the sites of secondaries ([[secondaries]]) and how they inherit defaults.
- faults: what breaks while a new serial travels ([[faults]]), each a case of its own.
- scenario: the top-level keys, [zones], [repeats_auto], and the whole ``Scenario``.
- loader: reading a file, validation messages, matrix expansion into cases, the hash.
"""

from harness.spec.faults import FaultSpec, fault_targets
from harness.spec.fleet import MAX_SECONDARIES, SITE_NAME, SiteSpec
from harness.spec.hosts import (
    DEFAULT_SUITE,
    PER_HOST_SYSCTLS,
    HostSpec,
    HostsSpec,
    ServerSpec,
    ServersSpec,
)
from harness.spec.link import DirectionSpec, LinkSpec, LossSpec
from harness.spec.loader import (
    Case,
    LoadedScenario,
    expand,
    key_parts,
    load,
    spec_hash,
    with_values,
)
from harness.spec.scenario import AutoRepeats, Scenario, ZonesSpec

__all__ = [
    "DEFAULT_SUITE",
    "MAX_SECONDARIES",
    "PER_HOST_SYSCTLS",
    "SITE_NAME",
    "AutoRepeats",
    "Case",
    "DirectionSpec",
    "FaultSpec",
    "HostSpec",
    "HostsSpec",
    "LinkSpec",
    "LoadedScenario",
    "LossSpec",
    "Scenario",
    "ServerSpec",
    "ServersSpec",
    "SiteSpec",
    "ZonesSpec",
    "expand",
    "fault_targets",
    "key_parts",
    "load",
    "spec_hash",
    "with_values",
]
