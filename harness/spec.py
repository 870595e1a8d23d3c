"""Scenario files: strict schema, matrix expansion into cases, and a content hash.

A scenario is a TOML file. Unknown keys, wrong types and out-of-range values are rejected
with one message naming the file, the key path and what is allowed. Link settings at the top
of [link] apply to both directions; [link.forward] (primary -> secondary, the way a zone
travels) and [link.reverse] override them. [matrix] maps dotted key paths to lists of values;
the cases are the cartesian product of the matrix, the transports and the xfr kinds.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import re
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from harness import units
from harness.errors import ScenarioError
from harness.schedule import check_auto_repeats
from harness.servers import DIALECTS
from harness.terms import ServerKind, Transport, Trigger, XfrKind

TsigAlgorithm = Literal["hmac-sha256", "hmac-sha384", "hmac-sha512", "hmac-sha224", "hmac-sha1"]
ZonePreset = Literal["tiny", "tld", "hosting"]
# The Debian release a server comes from (compose backend: the image xfrbench/server:<suite>).
ServerSuite = Literal["bookworm", "bookworm-backports", "trixie"]
DEFAULT_SUITE: ServerSuite = "bookworm"

# The TCP settings the kernel keeps per network namespace; anything else is global and
# cannot be set per host (net.core.rmem_max, for instance).
PER_HOST_SYSCTLS = (
    "net.ipv4.tcp_congestion_control",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.tcp_tw_reuse",
    "net.ipv4.tcp_max_tw_buckets",
    "net.ipv4.tcp_sack",
    "net.ipv4.tcp_timestamps",
    "net.ipv4.tcp_window_scaling",
    "net.ipv4.tcp_no_metrics_save",
    "net.ipv4.tcp_mtu_probing",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_syn_retries",
)
_ORIGIN_BYTE = re.compile(rb"[A-Za-z0-9_-]")
CONGESTION_CONTROLS = ("reno", "cubic", "bbr", "htcp", "hybla", "illinois", "vegas", "westwood")


def _wrap(parser: Any) -> Any:
    def parse(value: Any) -> Any:
        if value is None:
            return None
        return parser(value)

    return BeforeValidator(parse)


Duration = Annotated[float, _wrap(units.parse_duration)]  # seconds
Rate = Annotated[int, _wrap(units.parse_rate)]  # bits per second
Size = Annotated[int, _wrap(units.parse_size)]  # bytes


def _percent(value: Any, info: ValidationInfo) -> Any:
    """Bare numbers are refused where a person wrote them (a scenario file: its validation
    carries the context `written`), and read as percent elsewhere (programmatic specs)."""
    if value is None:
        return None
    written = bool(info.context and info.context.get("written"))
    return units.parse_percent(value, written=written)


Percent = Annotated[float, BeforeValidator(_percent)]  # 0..100


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=False, frozen=True)


class ZonesSpec(Strict):
    preset: ZonePreset = "tiny"
    records: int | None = Field(default=None, ge=1, le=100_000_000)
    origin: str = "example."
    seed: int = Field(default=1, ge=0)
    zones: int = Field(default=1, ge=1, le=1_000_000)
    signed: bool = False
    serial: int = Field(default=1, ge=1, le=2**32 - 1)
    ixfr_changes: int = Field(default=10, ge=1, le=10_000_000)

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
        if self.preset == "tiny" and self.records not in (None, 2):
            raise ValueError("the tiny preset is always 2 records (SOA + NS); omit 'records'")
        if self.preset != "hosting" and self.zones != 1:
            raise ValueError("'zones' applies to the hosting preset only")
        if self.preset == "hosting" and self.records is not None and self.records < 3:
            raise ValueError("a hosting zone has at least 3 records (SOA, 2 NS)")
        return self

    @property
    def record_count(self) -> int:
        defaults = {"tiny": 2, "tld": 10_000, "hosting": 12}
        return self.records if self.records is not None else defaults[self.preset]


class ServerSpec(Strict):
    kind: ServerKind
    binary: Path | None = None
    # Only the compose backend can pick a release; the netns backend runs the host's servers.
    suite: ServerSuite = DEFAULT_SUITE
    options: dict[str, int | str | bool] = Field(default_factory=dict)

    @field_validator("options")
    @classmethod
    def _known_options(
        cls, options: dict[str, int | str | bool], info: ValidationInfo
    ) -> dict[str, int | str | bool]:
        kind = info.data.get("kind")
        if kind is None:  # the kind itself failed; that error is reported
            return options
        known = DIALECTS[kind].options
        for name, value in options.items():
            if name not in known:
                raise ValueError(
                    f"unknown {kind} option {name!r}; allowed: {', '.join(sorted(known))}"
                )
            wanted = known[name]
            if not isinstance(value, wanted) or isinstance(value, bool) != (wanted is bool):
                raise ValueError(f"option {name!r} must be {wanted.__name__}, got {value!r}")
        return options


class ServersSpec(Strict):
    primary: ServerSpec = ServerSpec(kind="bind")
    secondary: ServerSpec = ServerSpec(kind="bind")


class LossSpec(Strict):
    """Loss models with netem's parameter meanings (percentages)."""

    model: Literal["random", "gemodel", "state"] = "random"
    p: Percent = 0.0  # random: loss probability; gemodel: good->bad transition
    correlation: Percent = 0.0  # random only
    r: Percent | None = None  # gemodel: bad->good transition (default 100 - p)
    h: Percent | None = None  # gemodel: 1-h = loss probability in the bad state (default 100)
    k: Percent | None = None  # gemodel: 1-k = loss probability in the good state (default 0)
    p13: Percent | None = None
    p31: Percent | None = None
    p32: Percent | None = None
    p23: Percent | None = None
    p14: Percent | None = None

    @model_validator(mode="after")
    def _fields_fit_model(self) -> LossSpec:
        allowed = {
            "random": {"model", "p", "correlation"},
            "gemodel": {"model", "p", "r", "h", "k"},
            "state": {"model", "p13", "p31", "p32", "p23", "p14"},
        }[self.model]
        extra = sorted(self.model_fields_set - allowed)
        if extra:
            raise ValueError(
                f"{', '.join(extra)} do not apply to loss model {self.model!r}; "
                f"allowed: {', '.join(sorted(allowed))}"
            )
        if self.model == "state" and self.p13 is None:
            raise ValueError("loss model 'state' needs at least p13")
        return self

    @property
    def active(self) -> bool:
        if self.model == "random":
            return self.p > 0
        if self.model == "gemodel":
            return self.p > 0
        return bool(self.p13)


def _loss_shorthand(value: Any) -> Any:
    # loss = "1%" is random loss; a table selects a model.
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        return {"model": "random", "p": value}
    return value


class DirectionSpec(Strict):
    delay: Duration = 0.0
    jitter: Duration = 0.0
    jitter_distribution: Literal["uniform", "normal", "pareto", "paretonormal"] = "normal"
    delay_correlation: Percent = 0.0
    loss: Annotated[LossSpec, BeforeValidator(_loss_shorthand)] = LossSpec()
    duplicate: Percent = 0.0
    reorder: Percent = 0.0
    reorder_gap: int = Field(default=0, ge=0)
    rate: Rate | None = None
    mtu: int = Field(default=1500, ge=576, le=9000)

    @model_validator(mode="after")
    def _jitter_below_delay(self) -> DirectionSpec:
        if self.jitter > 0 and self.delay == 0:
            raise ValueError("jitter needs a delay greater than 0")
        if self.reorder > 0 and self.delay == 0:
            raise ValueError("reorder needs a delay greater than 0 (reordered packets skip it)")
        return self

    @property
    def impaired(self) -> bool:
        """True when packets must pass through the emulator (not only a rate limit or MTU)."""
        return bool(self.delay or self.jitter or self.loss.active or self.duplicate or self.reorder)


_DIRECTION_KEYS = set(DirectionSpec.model_fields)


class LinkSpec(Strict):
    forward: DirectionSpec = DirectionSpec()  # primary -> secondary
    reverse: DirectionSpec = DirectionSpec()  # secondary -> primary
    backend: Literal["auto", "netem", "linkem"] = "auto"
    mss_clamp: bool = False
    seed: int = Field(default=1, ge=0)

    @model_validator(mode="before")
    @classmethod
    def _spread_common(cls, data: Any) -> Any:
        """Keys at the top of [link] are defaults for both directions."""
        if not isinstance(data, dict):
            return data
        common = {k: v for k, v in data.items() if k in _DIRECTION_KEYS}
        rest = {k: v for k, v in data.items() if k not in _DIRECTION_KEYS}
        for direction in ("forward", "reverse"):
            own = rest.get(direction, {})
            if isinstance(own, dict):
                rest[direction] = {**common, **own}
        return rest

    @property
    def impaired(self) -> bool:
        return self.forward.impaired or self.reverse.impaired


class HostSpec(Strict):
    congestion_control: Literal[CONGESTION_CONTROLS] | None = None  # type: ignore[valid-type]
    sysctl: dict[str, str | int] = Field(default_factory=dict)

    @field_validator("sysctl")
    @classmethod
    def _per_host_only(cls, value: dict[str, str | int]) -> dict[str, str | int]:
        for key in value:
            if key not in PER_HOST_SYSCTLS:
                raise ValueError(
                    f"{key!r} cannot be set per host; allowed: {', '.join(PER_HOST_SYSCTLS)}"
                )
        return value

    def sysctls(self) -> dict[str, str]:
        """All settings as sysctl key -> value, congestion_control included."""
        out = {key: str(value) for key, value in self.sysctl.items()}
        if self.congestion_control:
            out["net.ipv4.tcp_congestion_control"] = self.congestion_control
        return out


class HostsSpec(Strict):
    primary: HostSpec = HostSpec()
    secondary: HostSpec = HostSpec()


SITE_NAME = re.compile(r"^[a-z][a-z0-9]{0,19}$")
RESERVED_NAMES = {"primary", "router", "link", "secondary"}
# The address block (198.18.0.0/15) holds this many point-to-point segments of /30; the
# primary takes one. Memory is checked against the host at run time (plan.check_capacity).
MAX_SECONDARIES = 2 ** (32 - 15 - 2) - 1


class SiteSpec(Strict):
    """One site of a fleet: `count` identical secondaries behind one link of its own.

    Unset keys come from the scenario's defaults for every secondary: `kind`, `binary`,
    `suite` and `options` from [servers.secondary], `link` merged over [link], `host`
    merged over [hosts.secondary].
    """

    name: str
    kind: ServerKind
    binary: Path | None = None
    suite: ServerSuite = DEFAULT_SUITE
    options: dict[str, int | str | bool] = Field(default_factory=dict)
    count: int = Field(default=1, ge=1, le=MAX_SECONDARIES)
    link: LinkSpec = LinkSpec()
    host: HostSpec = HostSpec()

    @field_validator("name")
    @classmethod
    def _plain_name(cls, value: str) -> str:
        if not SITE_NAME.match(value) or value in RESERVED_NAMES:
            raise ValueError(
                f"{value!r} is not a site name: use 1-20 lowercase letters and digits, "
                f"starting with a letter, other than {', '.join(sorted(RESERVED_NAMES))}"
            )
        return value

    @property
    def server(self) -> ServerSpec:
        return ServerSpec(
            kind=self.kind, binary=self.binary, suite=self.suite, options=dict(self.options)
        )

    def host_names(self) -> list[str]:
        """Its secondaries' names: the site's own, or <site>-1 .. <site>-<count>."""
        if self.count == 1:
            return [self.name]
        return [f"{self.name}-{index}" for index in range(1, self.count + 1)]


def _deep_merge(base: Any, over: Any) -> Any:
    if isinstance(base, dict) and isinstance(over, dict):
        return {k: _deep_merge(base.get(k), v) if k in base else v for k, v in over.items()} | {
            k: v for k, v in base.items() if k not in over
        }
    return over


def _site_defaults(data: Any) -> Any:
    """Fill each [[secondaries]] table from the defaults for every secondary (raw tables)."""
    if not isinstance(data, dict) or not isinstance(data.get("secondaries"), list):
        return data
    servers = data.get("servers") if isinstance(data.get("servers"), dict) else {}
    server = servers.get("secondary") if isinstance(servers.get("secondary"), dict) else {}
    hosts = data.get("hosts") if isinstance(data.get("hosts"), dict) else {}
    host = hosts.get("secondary") if isinstance(hosts.get("secondary"), dict) else {}
    link = data.get("link") if isinstance(data.get("link"), dict) else {}
    sites = []
    for site in data["secondaries"]:
        if not isinstance(site, dict):
            sites.append(site)
            continue
        filled = dict(site)
        for key in ("kind", "binary", "suite", "options"):
            if key not in filled and key in server:
                filled[key] = copy.deepcopy(server[key])
        filled.setdefault("kind", "bind")
        filled["link"] = _deep_merge(link, site.get("link", {}))
        filled["host"] = _deep_merge(host, site.get("host", {}))
        sites.append(filled)
    return {**data, "secondaries": sites}


def _repeats(value: Any) -> Any:
    if value == "auto":
        return value
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 10_000:
        raise ValueError(f'{value!r} is not a number of repeats: give 1 to 10000, or "auto"')
    return value


class AutoRepeats(Strict):
    """`repeats = "auto"`: repeat every case until its median's confidence interval is at
    most `target` wide relative to the median (harness/schedule.py), between `min` and
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
    # interleaved: cases that share a testbed (they differ in transport or transfer kind
    # only) run their repeats in shuffled round-robin passes; blocks: one case after
    # another. Cases that need testbeds of their own always run in blocks whose order
    # alternates between `passes`.
    order: Literal["interleaved", "blocks"] = "interleaved"
    # The least time from one transfer's end to the next trigger: back to back, a small
    # zone's transfers meet the servers' own NOTIFY and refresh timers (measure/driver.py).
    settle: Duration = 1.0
    passes: int = Field(default=2, ge=1, le=1000)
    schedule_seed: int = Field(default=1, ge=0)
    timeout: Duration = 300.0
    transports: list[Transport] = Field(default_factory=lambda: ["tcp"], min_length=1)
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
    matrix: dict[str, list[Any]] = Field(default_factory=dict)

    _fill_sites = model_validator(mode="before")(_site_defaults)

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
        return dict(_flatten_matrix(value)) if isinstance(value, dict) else value

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

    @field_validator("timeout")
    @classmethod
    def _positive_timeout(cls, value: float) -> float:
        if value <= 0:
            raise ValueError("must be more than 0, e.g. '300s'")
        return value


@dataclass(frozen=True)
class Case:
    """One cell of the matrix: a fully resolved scenario for one transport and xfr kind."""

    name: str
    axes: dict[str, Any]  # the matrix values that made this case, by dotted key
    transport: Transport
    xfr: XfrKind
    scenario: Scenario

    @property
    def pair(self) -> str:
        return f"{self.scenario.servers.primary.kind}->{self.scenario.fleet_kinds}"


@dataclass(frozen=True)
class LoadedScenario:
    path: Path
    raw: dict[str, Any]
    scenario: Scenario
    spec_hash: str
    cases: tuple[Case, ...]


# Axes already visible in a case name's leading "primary-secondary" part.
_NAMED_BY_PAIR = {"servers.primary.kind", "servers.secondary.kind"}


def _flatten_matrix(table: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    # TOML reads `link.delay = [...]` as nested tables; both spellings mean the same key path.
    for key, value in table.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict):
            yield from _flatten_matrix(value, f"{path}.")
        else:
            yield path, value


def _set_path(data: dict[str, Any], dotted: str, value: Any) -> None:
    """Set a dotted key; a table value is merged into the table there, not replacing it.
    In a list of named tables (the sites of [[secondaries]]) a part picks one by name:
    "secondaries.seoul.count"."""
    parts = dotted.split(".")
    node: Any = data
    for part in parts[:-1]:
        if isinstance(node, list):
            child = next((t for t in node if isinstance(t, dict) and t.get("name") == part), None)
        else:
            child = node.setdefault(part, {})
        if not isinstance(child, dict | list):
            raise KeyError(part)
        node = child
    if not isinstance(node, dict):
        raise KeyError(parts[-1])
    existing = node.get(parts[-1])
    if isinstance(value, dict) and isinstance(existing, dict):
        node[parts[-1]] = {**existing, **copy.deepcopy(value)}
    else:
        node[parts[-1]] = copy.deepcopy(value)


def _format_loc(loc: tuple[Any, ...]) -> str:
    parts: list[str] = []
    for item in loc:
        if isinstance(item, int):
            parts[-1:] = [f"{parts[-1]}[{item}]"] if parts else [f"[{item}]"]
        elif isinstance(item, str) and not item.startswith(("function-", "literal[", "lax-")):
            parts.append(item)
    return ".".join(parts) or "(top level)"


def _model_of(annotation: Any) -> Any:
    """The model inside Annotated[...], X | None and list[X]."""
    if hasattr(annotation, "__metadata__"):  # Annotated[...]
        annotation = annotation.__origin__
    for inner in get_args(annotation):
        if isinstance(inner, type) and issubclass(inner, BaseModel):
            return inner
        found = _model_of(inner) if get_args(inner) else None
        if found is not None:
            return found
    return annotation


def _allowed_keys(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """The keys allowed in the table that holds `loc`, for 'unknown key' messages."""
    node: Any = model
    for part in loc[:-1]:
        if isinstance(part, int):  # an index into a list of tables: the same model
            continue
        if not (isinstance(node, type) and issubclass(node, BaseModel)):
            return []
        field = node.model_fields.get(part)
        if field is None:
            return []
        node = _model_of(field.annotation)
    if isinstance(node, type) and issubclass(node, BaseModel):
        keys = list(node.model_fields)
        if node is LinkSpec:
            keys += sorted(_DIRECTION_KEYS)
        return keys
    return []


def _explain(error: dict[str, Any]) -> str:
    kind = error["type"]
    loc = tuple(error["loc"])
    if kind == "extra_forbidden":
        allowed = _allowed_keys(Scenario, loc)
        hint = f"; allowed keys here: {', '.join(allowed)}" if allowed else ""
        return f"unknown key{hint}"
    message = str(error["msg"]).removeprefix("Value error, ")
    if kind == "literal_error":
        expected = error.get("ctx", {}).get("expected", "")
        return f"{error.get('input')!r} is not allowed; allowed: {expected}"
    if kind in {"greater_than_equal", "less_than_equal", "greater_than", "less_than"}:
        return f"{error.get('input')!r} is out of range: {message.lower()}"
    if kind.endswith("_type") or kind.endswith("_parsing"):
        return f"{error.get('input')!r} has the wrong type: {message.lower()}"
    return message


def _as_written(loc: tuple[Any, ...], raw: dict[str, Any]) -> tuple[Any, ...]:
    """Report link.forward.delay as link.delay when the user wrote it for both directions
    (in [link], [uplink] or a site's link)."""
    for at, part in enumerate(loc[:-2]):
        if part not in ("link", "uplink") or loc[at + 1] not in ("forward", "reverse"):
            continue
        written: Any = raw
        for step in loc[:at]:
            written = written[step] if isinstance(written, dict | list) else None
        link = written.get(part) if isinstance(written, dict) else None
        if isinstance(link, dict):
            own = link.get(loc[at + 1], {})
            if loc[at + 2] in link and not (isinstance(own, dict) and loc[at + 2] in own):
                return (*loc[: at + 1], *loc[at + 2 :])
    return loc


def _validate(raw: dict[str, Any], path: Path, context: str = "") -> Scenario:
    try:
        return Scenario.model_validate(raw, context={"written": True})
    except ValidationError as exc:
        lines: list[str] = []
        for error in exc.errors():
            key = _format_loc(_as_written(tuple(error["loc"]), raw))
            line = f"{path}: {key}: {_explain(error)}{context}"
            if line not in lines:
                lines.append(line)
        raise ScenarioError("\n".join(lines)) from None


def _case_label(value: Any) -> str:
    if isinstance(value, dict):
        return ",".join(f"{k}={_case_label(v)}" for k, v in value.items())
    return str(value)


def _only_kinds(key: str, value: Any) -> bool:
    """True when a matrix value only picks server kinds, which the case name shows anyway."""
    if key in _NAMED_BY_PAIR:
        return True
    if key == "servers" and isinstance(value, dict):
        return all(isinstance(v, dict) and set(v) == {"kind"} for v in value.values())
    return False


def expand(raw: dict[str, Any], path: Path) -> tuple[Scenario, tuple[Case, ...]]:
    """Validate the scenario and expand its matrix into cases, each validated on its own."""
    base = _validate(raw, path)
    axes = list(_flatten_matrix(raw.get("matrix", {})))
    for key, values in axes:
        if not isinstance(values, list) or not values:
            raise ScenarioError(
                f"{path}: matrix.{key}: must be a non-empty list of values, e.g. [1, 2]"
            )
        if key in {"transports", "xfr", "matrix"} or key.startswith("matrix."):
            raise ScenarioError(
                f"{path}: matrix.{key}: cannot vary {key} in the matrix; "
                "list the values in the top-level key instead"
            )
    cases: list[Case] = []
    for combo in itertools.product(*(values for _, values in axes)):
        variant = copy.deepcopy({k: v for k, v in raw.items() if k != "matrix"})
        chosen: dict[str, Any] = {}
        for (key, _), value in zip(axes, combo, strict=True):
            try:
                _set_path(variant, key, value)
            except KeyError:
                raise ScenarioError(
                    f"{path}: matrix.{key}: {key} is not a table path of the scenario"
                ) from None
            chosen[key] = value
        where = f" (in the matrix case {_case_label(chosen)})" if chosen else ""
        scenario = _validate(variant, path, where)
        for transport in base.transports:
            for xfr in base.xfr:
                name = "/".join(
                    [f"{scenario.servers.primary.kind}-{scenario.fleet_kinds}"]
                    + [
                        _case_label(v)
                        if isinstance(v, dict)
                        else f"{key.rsplit('.', 1)[-1]}={_case_label(v)}"
                        for key, v in chosen.items()
                        if not _only_kinds(key, v)
                    ]
                    + [transport, xfr]
                )
                cases.append(Case(name, chosen, transport, xfr, scenario))
    names = [case.name for case in cases]
    if len(set(names)) != len(names):
        # Two axes ending in the same key (link.delay and link.forward.delay): use full paths.
        cases = [
            Case(
                "/".join(
                    [case.pair.replace("->", "-")]
                    + [f"{k}={_case_label(v)}" for k, v in case.axes.items()]
                    + [case.transport, case.xfr]
                ),
                case.axes,
                case.transport,
                case.xfr,
                case.scenario,
            )
            for case in cases
        ]
    return base, tuple(cases)


# Keys that came after the first scenarios, at their defaults: left out of the hash.
_LATER_DEFAULTS: dict[str, Any] = {
    "repeats_auto": None,
    "order": "interleaved",
    "passes": 2,
    "schedule_seed": 1,
    "settle": 1.0,
}


def spec_hash(scenario: Scenario) -> str:
    """SHA-256 of the validated content: comments, key order and unit spelling do not count."""
    dumped = scenario.model_dump(mode="json")
    for server in dumped.get("servers", {}).values():
        # The default suite is left out: scenarios written before it existed keep their hash.
        if server.get("suite") == DEFAULT_SUITE:
            del server["suite"]
    # So are keys at their defaults that came later (fleets, the uplink), for the same reason.
    if dumped.get("secondaries") is None:
        dumped.pop("secondaries", None)
    if dumped.get("uplink") == LinkSpec().model_dump(mode="json"):
        dumped.pop("uplink", None)
    for key, default in _LATER_DEFAULTS.items():
        if dumped.get(key) == default:
            dumped.pop(key, None)
    canonical = json.dumps(dumped, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def load(path: str | Path) -> LoadedScenario:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ScenarioError(
            "no such scenario file", file=path, fix="give a path such as scenarios/quick.toml"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ScenarioError(f"cannot read: {exc}", file=path) from None
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(
            f"TOML syntax error: {exc}", file=path, fix="see https://toml.io for the syntax"
        ) from None
    raw.setdefault("name", path.stem)
    base, cases = expand(raw, path)
    # The hash covers the matrix too: two files with the same cases have the same hash.
    return LoadedScenario(path, raw, base, spec_hash(base), cases)
