"""What runs on each host and how: its server ([servers.primary], [servers.secondary]:
kind, Debian release, dialect options) and its per-namespace TCP settings ([hosts.primary],
[hosts.secondary]: congestion control, sysctls).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from harness.core.terms import ServerKind
from harness.servers import DIALECTS
from harness.servers.snippet import SnippetError
from harness.spec.fields import Strict

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
CONGESTION_CONTROLS = ("reno", "cubic", "bbr", "htcp", "hybla", "illinois", "vegas", "westwood")


class ConfigSnippet(Strict):
    """An operator's configuration snippet: the file as written in the scenario (relative
    to it), its text and the text's SHA-256 (the text counts, not the path)."""

    path: str
    text: str
    sha256: str

    @classmethod
    def read(cls, given: str, folder: Path) -> ConfigSnippet:
        file = Path(given) if Path(given).is_absolute() else folder / given
        try:
            text = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = "no such file" if isinstance(exc, FileNotFoundError) else str(exc)
            raise ValueError(
                f"cannot read the snippet {file}: {reason}; give a file of the server's own "
                "configuration syntax, relative to the scenario"
            ) from None
        return cls(path=given, text=text, sha256=hashlib.sha256(text.encode()).hexdigest())


def read_snippet(value: Any, info: ValidationInfo) -> Any:
    """A `config` key's file, read relative to the scenario being loaded."""
    if not isinstance(value, str):
        return value  # a snippet already read (a stored scenario), or not given
    folder = (info.context or {}).get("folder")
    if folder is None:
        raise ValueError("a snippet file can only be read from a scenario file")
    return ConfigSnippet.read(value, Path(folder))


class ServerSpec(Strict):
    kind: ServerKind
    binary: Path | None = None
    # Only the compose backend can pick a release; the netns backend runs the host's servers.
    suite: ServerSuite = DEFAULT_SUITE
    options: dict[str, int | str | bool] = Field(default_factory=dict)
    # The operator's own configuration snippet, added where the dialect puts it
    # (Server.snippet_place); a file path in the scenario, its text once loaded.
    config: ConfigSnippet | None = None

    @field_validator("config", mode="before")
    @classmethod
    def _read_snippet(cls, value: Any, info: ValidationInfo) -> Any:
        return read_snippet(value, info)

    @model_validator(mode="after")
    def _snippet_fits(self) -> ServerSpec:
        if self.config is None:
            return self
        dialect = DIALECTS[self.kind]
        try:
            settings = dialect.check_snippet(self.config.text)
        except SnippetError as exc:
            raise ValueError(
                f"{self.config.path} {exc} ({self.kind} puts a snippet {dialect.snippet_place}); "
                f"fix: {exc.fix}"
            ) from None
        for setting in settings:
            if setting.name in self.options:
                raise ValueError(
                    f"{self.config.path} line {setting.line}: {setting.name!r} is also in "
                    "options; fix: set it in one place"
                )
        return self

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
