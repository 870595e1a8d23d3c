"""The scenario itself: its top-level keys (repeats, order, transports, xfr kinds, trigger,
timeouts), [zones], [repeats_auto] and the [matrix] table's key paths, over the tables that
describe hosts, links and the fleet.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Annotated, Any, Literal

from pydantic import (
    BeforeValidator,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from harness.core.stats import check_auto_repeats
from harness.core.terms import TransportName, Trigger, XfrKind
from harness.servers import DIALECTS
from harness.spec.catalog import CatalogSpec
from harness.spec.faults import FaultSpec, check_faults
from harness.spec.fields import Duration, Percent, Strict
from harness.spec.fleet import MAX_SECONDARIES, SiteSpec, fill_site_defaults
from harness.spec.hosts import HostsSpec, ServersSpec
from harness.spec.link import LinkSpec
from harness.spec.stream import StreamSpec

TsigAlgorithm = Literal["hmac-sha256", "hmac-sha384", "hmac-sha512", "hmac-sha224", "hmac-sha1"]
ZonePreset = Literal["tiny", "tld", "hosting", "file"]
_ORIGIN_BYTE = re.compile(rb"[A-Za-z0-9_-]")


class ZonesSpec(Strict):
    preset: ZonePreset = "tiny"
    records: int | None = Field(default=None, ge=1, le=100_000_000)
    origin: str = "example."
    seed: int = Field(default=1, ge=0)
    zones: int = Field(default=1, ge=1, le=1_000_000)
    signed: bool = False
    serial: int = Field(default=1, ge=1, le=2**32 - 1)
    ixfr_changes: int = Field(default=10, ge=1, le=10_000_000)
    # Your own zone (spec/zonefiles.py): a master file, and its change history (a list of
    # files, or a folder of them in name order), relative to the scenario file.
    file: str | None = None
    versions: list[str] | str | None = None

    @model_validator(mode="before")
    @classmethod
    def _file_preset(cls, data: Any) -> Any:
        if isinstance(data, dict) and (data.get("file") or data.get("versions")):
            preset = data.get("preset", "file")
            if preset != "file":
                raise ValueError(
                    f"'file' and 'versions' are your own zone, 'preset' = {preset!r} a "
                    "generated one; remove one of them"
                )
            data = {**data, "preset": "file"}
        return data

    @field_validator("origin")
    @classmethod
    def _origin(cls, value: str) -> str:
        import dns.name

        try:
            name = dns.name.from_text(value)
        except Exception as exc:  # dnspython raises several types for bad names
            raise ValueError(f"{value!r} is not a valid domain name ({exc})") from exc
        # dnspython takes any byte in a label ("bad name." is bad\032name.), which the zone
        # files, configs and control commands of the servers do not: host-name characters.
        for label in name.labels[:-1]:
            bad = sorted({chr(b) for b in label if not _ORIGIN_BYTE.match(bytes([b]))})
            if bad:
                shown = label.decode("ascii", "backslashreplace")
                raise ValueError(
                    f"{value!r} is not a zone name the servers can load: label {shown!r} "
                    f"holds {', '.join(repr(c) for c in bad)}; use letters, digits, '-' and "
                    "'_', e.g. 'example.'"
                )
        return name.to_text()

    @model_validator(mode="after")
    def _records_fit_preset(self) -> ZonesSpec:
        if self.preset == "file" and not (self.file or self.versions):
            raise ValueError("preset 'file' needs file = \"path/to/zone\" (or versions)")
        if self.preset == "tiny" and self.records not in (None, 2):
            raise ValueError("the tiny preset is always 2 records (SOA + NS); omit 'records'")
        if self.preset != "hosting" and self.zones != 1:
            raise ValueError("'zones' applies to the hosting preset only")
        if self.preset == "hosting" and self.records is not None and self.records < 3:
            raise ValueError("a hosting zone has at least 3 records (SOA, 2 NS)")
        return self

    @property
    def record_count(self) -> int:
        defaults = {"tiny": 2, "tld": 10_000, "hosting": 12, "file": 2}
        return self.records if self.records is not None else defaults[self.preset]


def _repeats(value: Any) -> Any:
    if value == "auto":
        return value
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 10_000:
        raise ValueError(f'{value!r} is not a number of repeats: give 1 to 10000, or "auto"')
    return value


# What a cold start's SOA poller may send one secondary, in queries per second, by default
# (harness.xfr.poll_zones.wait_for_zones' max_rate); "off": no polling at all, the
# secondaries' own logs are the clock (their stamps' resolution is the error bar).
DEFAULT_COLD_START_POLL = 100_000


def _cold_start_poll(value: Any) -> Any:
    if value == "off":
        return value
    if isinstance(value, bool) or not isinstance(value, int) or not 10 <= value <= 1_000_000:
        raise ValueError(
            f"{value!r} is not a polling rate: give SOA queries per second (10 to 1000000), "
            'or "off" to read when zones were served from the secondaries\' logs'
        )
    return value


class AutoRepeats(Strict):
    """`repeats = "auto"`: repeat every case until its median's confidence interval is at
    most `target` wide relative to the median (harness/plan/schedule.py), between `min` and
    `max` repeats."""

    min: int = Field(default=5, ge=1, le=10_000)
    max: int = Field(default=30, ge=1, le=10_000)
    target: Percent = 5.0
    confidence: Percent = 95.0

    @model_validator(mode="after")
    def _workable(self) -> AutoRepeats:
        check_auto_repeats(self.min, self.max, self.target / 100, self.confidence / 100)
        return self


class Scenario(Strict):
    name: str = ""
    description: str = ""
    repeats: Annotated[int | Literal["auto"], BeforeValidator(_repeats)] = 3
    repeats_auto: AutoRepeats | None = None
    # interleaved: cases that share a testbed (they differ in transport, transfer kind or
    # server settings only) run their repeats in round-robin passes, each pass in a fresh
    # order that keeps cases of one server configuration side by side (fewer switches);
    # shuffled: each pass in a fresh order of all cases; blocks: one case after another.
    # Cases that need testbeds of their own always run in blocks whose order alternates
    # between `passes`.
    order: Literal["interleaved", "shuffled", "blocks"] = "interleaved"
    # The longest a slot waits, from the last transfer's end, for what that transfer left
    # behind to clear (measure/settle.py: the servers' rate limiters idle, its connections
    # closed, the link's queues empty, the servers idle); `settle_fixed`: always wait it all.
    settle: Duration = 1.0
    settle_fixed: bool = False
    # A switch of the running servers to a configuration not yet seen in a testbed's visit
    # is proven by an unrecorded transfer over it; "every-switch": every switch is.
    prove: Literal["once", "every-switch"] = "once"
    # A cold start's SOA poller: at most this many queries a second to each secondary, or
    # "off" (the secondaries' logs tell when each zone was served). Polling costs the
    # servers' CPU too; bench/observer measures what it changes.
    cold_start_poll: Annotated[int | Literal["off"], BeforeValidator(_cold_start_poll)] = (
        DEFAULT_COLD_START_POLL
    )
    passes: int = Field(default=2, ge=1, le=1000)
    schedule_seed: int = Field(default=1, ge=0)
    timeout: Duration = 300.0
    transports: list[TransportName] = Field(default_factory=lambda: ["tcp"], min_length=1)
    xfr: list[XfrKind] = Field(default_factory=lambda: ["axfr"], min_length=1)
    trigger: Trigger = "notify"
    tsig_algorithm: TsigAlgorithm = "hmac-sha256"
    # Client-side pulls from the primary across the link, besides the server-to-server ones.
    client_pulls: list[Literal["own", "kdig"]] = Field(default_factory=list)
    zones: ZonesSpec = ZonesSpec()
    servers: ServersSpec = ServersSpec()
    link: LinkSpec = LinkSpec()
    hosts: HostsSpec = HostsSpec()
    # A fleet: sites of secondaries, each with its own link; absent, the one secondary of
    # [servers.secondary], [link] and [hosts.secondary].
    secondaries: list[SiteSpec] | None = Field(default=None, min_length=1)
    # The primary's access link, crossed by every transfer (forward: leaving the primary).
    uplink: LinkSpec = LinkSpec()
    # Each fault is a case of its own beside the transports and kinds (spec/faults.py).
    faults: list[FaultSpec] = Field(default_factory=list)
    # A change stream (trigger = "stream"): its schedule, its changes, its target.
    stream: StreamSpec | None = None
    # Catalog zones (trigger = "catalog"): the members, the versions after them, restarts.
    catalog: CatalogSpec | None = None
    # How each copy is verified: "disk", the secondary's own file of it summed and what it
    # serves checked at a sample of names; "served", the copy read back by AXFR. Absent:
    # disk where the secondary's server keeps such a file (every dialect does), served in a
    # cold start and on inventory hosts (measure/disk_copy.py).
    verify: Literal["disk", "served"] | None = None
    matrix: dict[str, list[Any]] = Field(default_factory=dict)

    _fill_sites = model_validator(mode="before")(fill_site_defaults)

    @property
    def fleet(self) -> tuple[SiteSpec, ...]:
        """The sites of secondaries (one site "secondary" when none is declared)."""
        if self.secondaries:
            return tuple(self.secondaries)
        secondary = self.servers.secondary
        return (
            SiteSpec.model_construct(
                name="secondary",
                kind=secondary.kind,
                binary=secondary.binary,
                suite=secondary.suite,
                options=dict(secondary.options),
                count=1,
                link=self.link,
                host=self.hosts.secondary,
            ),
        )

    @property
    def sites(self) -> dict[str, list[str]]:
        """Each site's name -> its secondaries' host names."""
        return {site.name: site.host_names() for site in self.fleet}

    def check_faults(self) -> None:
        """What the faults need of the whole scenario (raises ValueError naming the key):
        targets that exist, a trigger of one new serial, linkem on failing links."""
        links = [self.link, self.uplink, *(site.link for site in self.secondaries or [])]
        check_faults(list(self.faults), self.sites, self.trigger, {link.backend for link in links})

    @property
    def fleet_kinds(self) -> str:
        """The secondaries' kinds, as a case name shows them: "knot", or "bind+nsd"."""
        return "+".join(dict.fromkeys(site.kind for site in self.fleet))

    @field_validator("secondaries")
    @classmethod
    def _fleet_fits(cls, sites: list[SiteSpec] | None) -> list[SiteSpec] | None:
        seen: dict[str, int] = {}
        for index, site in enumerate(sites or []):
            if site.name in seen:
                raise ValueError(
                    f"site {site.name!r} is declared twice (secondaries[{seen[site.name]}] "
                    f"and [{index}]); give each site its own name"
                )
            seen[site.name] = index
        total = sum(site.count for site in sites or [])
        if total > MAX_SECONDARIES:
            raise ValueError(
                f"{total} secondaries do not fit the address block (198.18.0.0/15 holds "
                f"{MAX_SECONDARIES} besides the primary); lower a count"
            )
        return sites

    @field_validator("matrix", mode="before")
    @classmethod
    def _flat_matrix(cls, value: Any) -> Any:
        return dict(flatten_matrix(value)) if isinstance(value, dict) else value

    @field_validator("repeats_auto")
    @classmethod
    def _auto_repeats(cls, value: AutoRepeats | None, info: ValidationInfo) -> Any:
        if value is not None and info.data.get("repeats") != "auto":
            raise ValueError('applies to repeats = "auto" only; set repeats = "auto" or remove it')
        return value

    @property
    def max_repeats(self) -> int:
        """Repeats per case: the count, or the most `repeats = "auto"` may take."""
        if self.repeats == "auto":
            return (self.repeats_auto or AutoRepeats()).max
        return self.repeats

    @property
    def auto(self) -> AutoRepeats | None:
        if self.repeats != "auto":
            return None
        return self.repeats_auto or AutoRepeats()

    @field_validator("transports", "xfr")
    @classmethod
    def _unique(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError(f"{value} lists a value twice")
        return value

    @model_validator(mode="after")
    def _cold_start_is_axfr(self) -> Scenario:
        if self.trigger == "cold-start" and "ixfr" in self.xfr:
            raise ValueError(
                "a cold start has no zone to update, so it is always a full transfer; "
                'set xfr = ["axfr"]'
            )
        return self

    @field_validator("verify")
    @classmethod
    def _disk_copies(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value != "disk":
            return value
        if info.data.get("trigger") == "cold-start":
            raise ValueError(
                '"disk" does not apply to a cold start: its many zones are read back over a '
                'few connections; set verify = "served" or remove the key'
            )
        sites = info.data.get("secondaries") or []
        servers = info.data.get("servers")
        kinds = [site.kind for site in sites] or ([servers.secondary.kind] if servers else [])
        for kind in kinds:
            if not DIALECTS[kind].keeps_disk_copy:
                raise ValueError(
                    f'"disk": {kind} keeps no copy of a zone the harness can read; set '
                    'verify = "served" or remove the key (each copy is then read back)'
                )
        return value

    @model_validator(mode="after")
    def _stream_table(self) -> Scenario:
        if self.trigger == "stream" and self.stream is None:
            raise ValueError(
                'trigger = "stream" needs a [stream] table, e.g. interval = "5s" and '
                'duration = "5m"'
            )
        if self.trigger != "stream" and self.stream is not None:
            raise ValueError(
                f'[stream] applies to trigger = "stream" only (this scenario\'s trigger is '
                f"{self.trigger!r}); set the trigger or remove the table"
            )
        return self

    @field_validator("timeout")
    @classmethod
    def _positive_timeout(cls, value: float) -> float:
        if value <= 0:
            raise ValueError("must be more than 0, e.g. '300s'")
        return value


def flatten_matrix(table: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """The [matrix] table as (dotted key path, values) pairs."""
    # TOML reads `link.delay = [...]` as nested tables; both spellings mean the same key path.
    for key, value in table.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict):
            yield from flatten_matrix(value, f"{path}.")
        else:
            yield path, value
