"""From a scenario file to its cases: TOML reading, validation with one message per problem
(file, key path as the user wrote it, what is allowed), expansion of the matrix into cases
(the cartesian product of the matrix, the transports and the xfr kinds), and a content hash.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

from pydantic import BaseModel, ValidationError

from harness.core.errors import ScenarioError
from harness.core.terms import XfrKind
from harness.core.transport import Transport
from harness.spec import zonefiles
from harness.spec.catalog import catalog_problem
from harness.spec.faults import FaultSpec
from harness.spec.hosts import DEFAULT_SUITE
from harness.spec.link import DIRECTION_KEYS, LinkSpec
from harness.spec.scenario import DEFAULT_COLD_START_POLL, Scenario, flatten_matrix
from harness.spec.stream import stream_problem


@dataclass(frozen=True)
class Case:
    """One cell of the matrix: a fully resolved scenario for one transport and xfr kind (and
    one of its [[faults]], when it has any)."""

    name: str
    axes: dict[str, Any]  # the matrix values that made this case, by dotted key
    transport: Transport  # made once here, from the name and the scenario's tsig_algorithm
    xfr: XfrKind
    scenario: Scenario
    fault: FaultSpec | None = None

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


def _set_path(data: dict[str, Any], dotted: str | Sequence[str], value: Any) -> None:
    """Set a dotted key (or its parts, when a part holds dots: a sysctl's name); a table
    value is merged into the table there, not replacing it. In a list of named tables (the
    sites of [[secondaries]]) a part picks one by name: "secondaries.seoul.count"."""
    parts = dotted.split(".") if isinstance(dotted, str) else list(dotted)
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
            keys += sorted(DIRECTION_KEYS)
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
        scenario = Scenario.model_validate(raw, context={"written": True, "folder": path.parent})
    except ValidationError as exc:
        lines: list[str] = []
        for error in exc.errors():
            key = _format_loc(_as_written(tuple(error["loc"]), raw))
            line = f"{path}: {key}: {_explain(error)}{context}"
            if line not in lines:
                lines.append(line)
        raise ScenarioError("\n".join(lines)) from None
    try:
        scenario.check_faults()
    except ValueError as exc:
        raise ScenarioError(f"{path}: {exc}{context}") from None
    return scenario


def _labelled(path: Path, key: str, value: Any) -> tuple[str | None, Any]:
    """(its label, the value) for one value of a matrix axis. A table may name itself with
    `label = "..."` (a name for the case instead of every key of the table); the label is
    not part of the value."""
    if not isinstance(value, dict) or "label" not in value:
        return None, value
    label = value["label"]
    if not isinstance(label, str) or not label or not all(c.isalnum() or c in "-_." for c in label):
        raise ScenarioError(
            f"{path}: matrix.{key}: label {label!r} must be a short name of letters, digits, "
            "'-', '_' or '.', e.g. label = \"tw-reuse\""
        )
    return label, {k: v for k, v in value.items() if k != "label"}


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


def _check_stream(scenario: Scenario, path: Path, where: str) -> None:
    problem = stream_problem(scenario) or catalog_problem(scenario)
    if problem is not None:
        key, text = problem
        raise ScenarioError(f"{path}: {key}: {text}{where}")


def expand(raw: dict[str, Any], path: Path) -> tuple[Scenario, tuple[Case, ...]]:
    """Validate the scenario and expand its matrix into cases, each validated on its own."""
    base = _validate(raw, path)
    axes = list(flatten_matrix(raw.get("matrix", {})))
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
    axes = [(key, [_labelled(path, key, v) for v in values]) for key, values in axes]
    cases: list[Case] = []
    for combo in itertools.product(*(values for _, values in axes)):
        variant = copy.deepcopy({k: v for k, v in raw.items() if k != "matrix"})
        chosen: dict[str, Any] = {}
        for (key, _), (label, value) in zip(axes, combo, strict=True):
            try:
                _set_path(variant, key, value)
            except KeyError:
                raise ScenarioError(
                    f"{path}: matrix.{key}: {key} is not a table path of the scenario"
                ) from None
            chosen[key] = value if label is None else label
        where = f" (in the matrix case {_case_label(chosen)})" if chosen else ""
        scenario = _validate(variant, path, where)
        faults: list[FaultSpec | None] = list(scenario.faults) or [None]
        _check_stream(scenario, path, where)
        for name in base.transports:
            transport = Transport.parse(name, scenario.tsig_algorithm)
            for xfr in base.xfr:
                for fault in faults:
                    name = "/".join(
                        [f"{scenario.servers.primary.kind}-{scenario.fleet_kinds}"]
                        + [
                            _case_label(v)
                            if isinstance(v, dict)
                            else f"{key.rsplit('.', 1)[-1]}={_case_label(v)}"
                            for key, v in chosen.items()
                            if not _only_kinds(key, v)
                        ]
                        + [transport.name, xfr]
                        + ([fault.label] if fault is not None else [])
                    )
                    cases.append(Case(name, chosen, transport, xfr, scenario, fault))
    names = [case.name for case in cases]
    if len(set(names)) != len(names):
        # Two axes ending in the same key (link.delay and link.forward.delay): use full paths.
        cases = [
            Case(
                "/".join(
                    [case.pair.replace("->", "-")]
                    + [f"{k}={_case_label(v)}" for k, v in case.axes.items()]
                    + [case.transport.name, case.xfr]
                    + ([case.fault.label] if case.fault is not None else [])
                ),
                case.axes,
                case.transport,
                case.xfr,
                case.scenario,
                case.fault,
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
    "settle_fixed": False,
    "prove": "once",
    "cold_start_poll": DEFAULT_COLD_START_POLL,
    "stream": None,
    "catalog": None,
    "verify": None,
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
    if not dumped.get("faults"):
        dumped.pop("faults", None)
    for key, default in _LATER_DEFAULTS.items():
        if dumped.get(key) == default:
            dumped.pop(key, None)
    canonical = json.dumps(dumped, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def key_parts(key: str) -> list[str]:
    """A key path as TOML writes it: dotted, a part with dots in double quotes
    (`hosts.secondary.sysctl."net.ipv4.tcp_tw_reuse"`). ValueError when it is not one."""
    parts, part, quoted, closed = [], "", False, False
    for char in key:
        if char == '"':
            quoted, closed = not quoted, quoted
        elif char == "." and not quoted:
            parts.append(part)
            part, closed = "", False
        elif closed:
            raise ValueError(f"{key!r}: a quoted part must end at a dot")
        else:
            part += char
    parts.append(part)
    if quoted or not all(parts):
        raise ValueError(f"{key!r} is not a key path such as secondaries.edge.count")
    return parts


def with_values(loaded: LoadedScenario, values: dict[str, Any], what: str) -> LoadedScenario:
    """The scenario again with each key path set to its value (as [matrix] sets one, a
    site of [[secondaries]] picked by name), validated and expanded as a file is; an error
    names the key and `what` set it (a flag)."""
    raw = copy.deepcopy(loaded.raw)
    for key, value in values.items():
        try:
            _set_path(raw, key_parts(key), value)
        except (KeyError, ValueError):
            raise ScenarioError(
                f"{loaded.path}: {what} {key}: {key} is not a table path of the scenario"
            ) from None
    base, cases = expand(zonefiles.resolve(raw, loaded.path), loaded.path)
    return LoadedScenario(loaded.path, raw, base, spec_hash(base), cases)


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
    # Your own zone is read here, before anything runs (refused naming its file and line).
    base, cases = expand(zonefiles.resolve(raw, path), path)
    # The hash covers the matrix too: two files with the same cases have the same hash.
    return LoadedScenario(path, raw, base, spec_hash(base), cases)
