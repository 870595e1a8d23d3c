"""What runs on each host and how: its server ([servers.primary], [servers.secondary]:
kind, Debian release, dialect options) and its per-namespace TCP settings ([hosts.primary],
[hosts.secondary]: congestion control, sysctls).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationInfo, field_validator

from harness.core.terms import ServerKind
from harness.servers import DIALECTS
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
