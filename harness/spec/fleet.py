"""A fleet of secondaries ([[secondaries]]): sites of identical secondaries, each site behind
a link of its own, their names and how many fit; a site's unset keys come from the defaults
for every secondary.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationInfo, field_validator, model_validator

from harness.core.terms import ServerKind
from harness.spec.fields import Strict
from harness.spec.hosts import (
    DEFAULT_SUITE,
    ConfigSnippet,
    HostSpec,
    ServerSpec,
    ServerSuite,
    read_snippet,
)
from harness.spec.link import LinkSpec

SITE_NAME = re.compile(r"^[a-z][a-z0-9]{0,19}$")
RESERVED_NAMES = {"primary", "router", "link", "secondary"}
# The address block (198.18.0.0/15) holds this many point-to-point segments of /30; the
# primary takes one. Memory is checked against the host before a run (capacity.check_memory).
MAX_SECONDARIES = 2 ** (32 - 15 - 2) - 1


class SiteSpec(Strict):
    """One site of a fleet: `count` identical secondaries behind one link of its own.

    Unset keys come from the scenario's defaults for every secondary: `kind`, `binary`,
    `suite`, `options` and `config` from [servers.secondary], `link` merged over [link], `host`
    merged over [hosts.secondary].
    """

    name: str
    kind: ServerKind
    binary: Path | None = None
    suite: ServerSuite = DEFAULT_SUITE
    options: dict[str, int | str | bool] = Field(default_factory=dict)
    config: ConfigSnippet | None = None
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

    @field_validator("config", mode="before")
    @classmethod
    def _read_snippet(cls, value: Any, info: ValidationInfo) -> Any:
        return read_snippet(value, info)

    @model_validator(mode="after")
    def _server_fits(self) -> SiteSpec:
        self.server  # noqa: B018 -- its own checks (a snippet for this site's kind)
        return self

    @property
    def server(self) -> ServerSpec:
        return ServerSpec(
            kind=self.kind,
            binary=self.binary,
            suite=self.suite,
            options=dict(self.options),
            config=self.config,
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


def fill_site_defaults(data: Any) -> Any:
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
        for key in ("kind", "binary", "suite", "options", "config"):
            if key not in filled and key in server:
                filled[key] = copy.deepcopy(server[key])
        filled.setdefault("kind", "bind")
        filled["link"] = _deep_merge(link, site.get("link", {}))
        filled["host"] = _deep_merge(host, site.get("host", {}))
        sites.append(filled)
    return {**data, "secondaries": sites}
