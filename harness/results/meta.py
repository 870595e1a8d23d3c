"""run.json and case.json as typed records: what a run and a case were, declared field by field.

The store writes them and the report and compare read them through the same classes, so a
field is named once. Reading is tolerant the way flent's and pyperf's metadata are: a run
folder written before a field existed loads with that field's default, and keys this
version does not know are kept (`extra`), so an older harness reading a newer run loses
nothing it does not understand. A value of the wrong type is a format error naming the file.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from harness.results.model import FORMAT_VERSION, ResultFormatError

if TYPE_CHECKING:
    from harness.plan.case import CasePlan
    from harness.servers.binaries import ServerBinary


class _Meta(BaseModel):
    # Unknown keys are kept and written back; a newer harness's fields survive a rewrite.
    model_config = ConfigDict(extra="allow")

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    @classmethod
    def from_json(cls, data: Any, where: Path | str) -> Any:
        if not isinstance(data, dict):
            raise ResultFormatError(f"{where}: not a JSON object")
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            key = ".".join(str(part) for part in first["loc"])
            raise ResultFormatError(f"{where}: {key}: {first['msg']}") from None

    @classmethod
    def load(cls, path: Path) -> Any:
        try:
            data = json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise ResultFormatError(f"{path}: not valid JSON: {exc}") from None
        return cls.from_json(data, path)


class ServerInfo(_Meta):
    """One server binary a run used, as found and versioned where it ran."""

    kind: str
    version: str | None = None
    path: str | None = None
    image: str | None = None  # compose backend
    image_id: str | None = None


class HostInfo(_Meta):
    """The machine a run ran on (harness.results.provenance.collect)."""

    hostname: str | None = None
    os: str | None = None
    kernel: str | None = None
    cpu_model: str | None = None
    cpu_count: int | None = None
    git_commit: str | None = None
    git_dirty: bool | None = None


class SamplerInfo(_Meta):
    interval_s: float | None = None
    sample_cost_s: float | None = None
    longest_interval_s: float | None = None  # stretched to keep sampling's CPU in budget
    errors: list[str] = Field(default_factory=list)


class RunMeta(_Meta):
    """run.json."""

    # One version for the whole folder (harness.results.model.FORMAT_VERSION). Version 1
    # folders also carried a `meta_version` of their own, kept here as an unknown key.
    format_version: int = 1
    run_id: str = ""  # set by the store
    started: str | None = None
    finished: str | None = None  # None: the run never finished (its driver was killed)
    interrupted: bool | None = None
    scenario: dict[str, Any] = Field(default_factory=dict)  # the file as written
    scenario_path: str | None = None
    spec_hash: str | None = None
    scenario_name: str | None = None
    cases: list[str] = Field(default_factory=list)
    backend: str = "netns"
    compose_project: str | None = None
    servers: dict[str, ServerInfo] = Field(default_factory=dict)
    kernel_features: dict[str, Any] = Field(default_factory=dict)
    link_backend: str | None = None
    host: HostInfo = Field(default_factory=HostInfo)
    sampler: SamplerInfo | None = None
    transfers: int | None = None
    # Where the wall time went: servers, harness, settle, per phase (measure/wall.py).
    wall: dict[str, Any] | None = None
    # The driver process itself: peak RSS and CPU seconds (its digest workers not included).
    driver: dict[str, float] | None = None
    # Which RRSUM implementation verified the copies: {"implementation": "rust", "version"}
    # or {"implementation": "python", "reason"} (harness.xfr.rrsum_native.implementation).
    digest: dict[str, str] | None = None
    # run --inventory: the hosts, their clocks at start and end, the real paths, what the
    # deployment cost (harness/run/remote.py)
    remote: dict[str, Any] | None = None
    # The CPUs of the harness and of the servers: {"isolation": "disjoint" | "shared" |
    # "remote", "reason", "online", "harness", "servers", "method"} (harness.observe.cpuset).
    cpus: dict[str, Any] | None = None
    # Where the CPU went: servers_s, driver_s (of which sampler_s), other_s (the link
    # emulator and tools) and driver_share_of_wall (harness.run.runner.cpu_split).
    cpu: dict[str, Any] | None = None
    # The operators' configuration snippets the cases ran with: each with the scenario key
    # that set it, the file as written, its SHA-256 and its text (harness/run/snippets.py).
    configs: list[dict[str, str]] | None = None
    # An operator's own zone ([zones] file / versions): origin, file, versions, records,
    # bytes, types and their mix in words (harness/zonegen/ownzone.py facts).
    zone: dict[str, Any] | None = None

    @property
    def state(self) -> str:
        """ "complete", "interrupted" (Ctrl-C, partial results kept) or "unfinished" (the
        writer died: run.json never got its end time)."""
        if self.interrupted is True:
            return "interrupted"
        if self.finished is None:
            return "unfinished"
        return "complete"

    @property
    def name(self) -> str | None:
        return self.scenario_name or self.scenario.get("name")

    def server_versions(self) -> dict[str, str]:
        """kind -> version(s) of the servers the run used."""
        versions: dict[str, set[str]] = {}
        for server in self.servers.values():
            versions.setdefault(server.kind, set()).add(server.version or "?")
        return {kind: ", ".join(sorted(found)) for kind, found in versions.items()}


class CaseMeta(_Meta):
    """cases/<case>/case.json: one case as it ran."""

    format_version: int = 1
    case: str
    axes: dict[str, Any] = Field(default_factory=dict)
    transport: str | None = None
    xfr: str | None = None
    scenario: dict[str, Any] = Field(default_factory=dict)  # the case's resolved scenario
    testbed: dict[str, Any] = Field(default_factory=dict)  # Testbed.describe()
    bound_bps: dict[str, float] = Field(default_factory=dict)
    backend: str = "netns"
    primary: ServerInfo | None = None
    secondary: ServerInfo | None = None  # the first (or only) secondary
    servers: dict[str, ServerInfo] = Field(default_factory=dict)  # host name -> its server
    sites: dict[str, str] = Field(default_factory=dict)  # secondary host name -> its site

    @property
    def link(self) -> dict[str, Any] | None:
        link = self.scenario.get("link")
        return link if isinstance(link, dict) else None


def case_meta(
    plan: CasePlan,
    *,
    testbed: dict[str, Any],
    bound: Mapping[str, dict[str, float]],
    binaries: Mapping[str, ServerBinary],
    backend: str,
) -> CaseMeta:
    """A case's case.json, from its plan and what its visit found: the one builder, for
    every backend (namespaces, containers, inventory hosts). `testbed`: the hosts as
    described where they ran; `bound`: per secondary host, its model bounds (none where
    the path is not emulated); `binaries`: per host, its server as versioned there."""
    first = plan.secondaries[0].name
    return CaseMeta(
        format_version=FORMAT_VERSION,
        case=plan.name,
        axes=plan.case.axes,
        transport=plan.transport.name,
        xfr=plan.xfr,
        scenario=plan.case.scenario.model_dump(mode="json"),
        testbed=testbed,
        bound_bps=dict(bound.get(first, {})),
        backend=backend,
        primary=ServerInfo(**binaries[plan.primary.name].describe()),
        secondary=ServerInfo(**binaries[first].describe()),
        servers={name: ServerInfo(**b.describe()) for name, b in binaries.items()},
        sites={h.name: h.site for h in plan.secondaries if h.site},
    )
