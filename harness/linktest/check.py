"""`xfrbench link test`: build a testbed, measure its link, print configured | measured | bound.

Flag parsing is pure (build_specs): the flags become the same dicts a scenario's [link] and
[hosts] tables are, validated by the same pydantic models, with errors naming the flag.
"""

from __future__ import annotations

import math
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from harness.core import units
from harness.core.errors import UserInputError
from harness.link.losscheck import expected_loss_percent
from harness.link.path import compute_bound, configured_rtt
from harness.linktest import tools as measure
from harness.spec import HostsSpec, LinkSpec
from harness.testbed import Testbed

ENDPOINTS = ("primary", "secondary")
# Tolerances the testbed is held to (see bench/README-link.md).
RTT_TOLERANCE_MS = 1.0
RTT_TOLERANCE_REL = 0.02
LOSS_TOLERANCE_PP = 0.5
RATE_TOLERANCE_REL = 0.03


@dataclass
class LinkTestOptions:
    link: LinkSpec
    hosts: HostsSpec
    duration: float = 5.0
    omit: int = 0
    pings: int = 100
    packets: int = 20_000
    block: str = "198.18.0.0/15"
    run_dir: Path | None = None
    global_sysctls: dict[str, str] = field(default_factory=dict)


_FLAG_FOR = {
    "delay": "--delay",
    "jitter": "--jitter",
    "loss": "--loss",
    "rate": "--rate",
    "mtu": "--mtu",
    "backend": "--backend",
    "congestion_control": "--cc",
    "sysctl": "--sysctl",
}
_REVERSE_FLAG_FOR = {"delay": "--reverse-delay", "loss": "--reverse-loss"}


def _flag(loc: tuple[Any, ...], given_reverse: set[str]) -> str:
    names = [part for part in loc if isinstance(part, str)]
    if not names:
        return "--delay"
    if names[0] == "reverse" and len(names) > 1 and names[1] in given_reverse:
        return _REVERSE_FLAG_FOR[names[1]]
    for name in names[1:] if names[0] in ("forward", "reverse", *ENDPOINTS) else names:
        if name in _FLAG_FOR:
            return _FLAG_FOR[name]
    # A whole-direction check (jitter without delay, reorder without delay).
    return "--jitter" if names[0] in ("forward", "reverse") else _FLAG_FOR.get(names[0], names[0])


def _raise_validation(exc: ValidationError, given_reverse: set[str]) -> None:
    error = exc.errors()[0]
    message = str(error["msg"]).removeprefix("Value error, ")
    if error["type"] == "literal_error":
        message = (
            f"{error.get('input')!r} is not allowed; allowed: "
            f"{error.get('ctx', {}).get('expected', '')}"
        )
    raise UserInputError(message, key=_flag(tuple(error["loc"]), given_reverse)) from None


def parse_sysctl_flag(text: str) -> tuple[str, str, str]:
    """'primary:net.ipv4.tcp_rmem=4096 131072 6291456' -> (host, key, value)."""
    host, sep, rest = text.partition(":")
    key, eq, value = rest.partition("=")
    if not sep or not eq or not key.strip():
        raise UserInputError(
            f"{text!r} is not HOST:KEY=VALUE",
            key="--sysctl",
            fix="e.g. --sysctl secondary:net.ipv4.tcp_rmem='4096 131072 8388608'",
        )
    if host not in ENDPOINTS:
        raise UserInputError(
            f"{host!r} is not a host", key="--sysctl", fix="HOST is primary or secondary"
        )
    return host, key.strip(), value.strip()


def build_specs(
    *,
    delay: str | None = None,
    reverse_delay: str | None = None,
    jitter: str | None = None,
    loss: str | None = None,
    reverse_loss: str | None = None,
    rate: str | None = None,
    mtu: str | None = None,
    backend: str = "auto",
    cc: str | None = None,
    sysctls: list[str] | None = None,
    mss_clamp: bool = False,
    seed: int | None = None,
) -> tuple[LinkSpec, HostsSpec]:
    """Flags -> (LinkSpec, HostsSpec), exactly as [link] and [hosts] would be validated.

    --delay, --jitter, --loss, --rate and --mtu apply to both directions (like keys at the
    top of [link]); --reverse-delay and --reverse-loss override the reverse direction.
    """
    raw: dict[str, Any] = {"backend": backend, "mss_clamp": mss_clamp}
    if seed is not None:
        raw["seed"] = seed
    for key, value in (
        ("delay", delay),
        ("jitter", jitter),
        ("loss", loss),
        ("rate", rate),
        ("mtu", mtu),
    ):
        if value is not None:
            raw[key] = value
    reverse: dict[str, Any] = {}
    if reverse_delay is not None:
        reverse["delay"] = reverse_delay
    if reverse_loss is not None:
        reverse["loss"] = reverse_loss
    if reverse:
        raw["reverse"] = reverse
    try:
        link = LinkSpec.model_validate(raw, context={"written": True})  # flags: units needed
    except ValidationError as exc:
        _raise_validation(exc, set(reverse))
    hosts_raw: dict[str, dict[str, Any]] = {host: {} for host in ENDPOINTS}
    if cc is not None:
        for host in ENDPOINTS:
            hosts_raw[host]["congestion_control"] = cc
    for text in sysctls or []:
        host, key, value = parse_sysctl_flag(text)
        hosts_raw[host].setdefault("sysctl", {})[key] = value
    try:
        hosts = HostsSpec.model_validate(hosts_raw)
    except ValidationError as exc:
        _raise_validation(exc, set())
    return link, hosts


def parse_duration_flag(text: str, flag: str) -> float:
    try:
        return units.parse_duration(text)
    except ValueError as exc:
        raise UserInputError(str(exc), key=flag, fix="e.g. 10s") from None


# --- the run ------------------------------------------------------------------------------


def run(options: LinkTestOptions) -> dict[str, Any]:
    run_dir = options.run_dir or Path(tempfile.mkdtemp(prefix="xfrbench-link-"))
    try:
        return _run(options, run_dir)
    except UserInputError as exc:
        # The testbed names the scenario key (hosts.primary.sysctl.KEY); here it was a flag.
        parts = (exc.key or "").split(".", 3)
        if parts[0] != "hosts":
            raise
        flag = "--cc" if parts[-1] == "net.ipv4.tcp_congestion_control" else "--sysctl"
        raise UserInputError(
            exc.problem, key=f"{flag} ({parts[1]}:{parts[-1]})", fix=exc.fix
        ) from None
    finally:
        if options.run_dir is None:
            shutil.rmtree(run_dir, ignore_errors=True)


def _run(options: LinkTestOptions, run_dir: Path) -> dict[str, Any]:
    with Testbed(
        options.link, options.hosts, run_dir, block=options.block, label="link-test"
    ) as bed:
        for key, value in options.global_sysctls.items():
            bed.set_global_sysctl(key, value)
        rtt = measure.measure_rtt(bed, options.pings)
        loss = measure.measure_loss(bed, options.packets)
        counters_before = bed.link_counters()
        throughput = measure.measure_throughput(bed, options.duration, omit=options.omit)
        counters = bed.link_counters()
        described = bed.describe()
    return report(options, described, rtt, loss, throughput, counters_before, counters)


def report(
    options: LinkTestOptions,
    described: dict[str, Any],
    rtt: measure.RttSample,
    loss: dict[str, measure.LossSample],
    throughput: dict[str, Any],
    counters_before: dict[str, Any],
    counters: dict[str, Any],
) -> dict[str, Any]:
    """The JSON result (pure): configured, measured, bound and the tolerance checks."""
    link = options.link
    bound = compute_bound(link, described)
    rtt_ms = configured_rtt(link) * 1000
    expected = {
        name: expected_loss_percent(getattr(link, name).loss) for name in ("forward", "reverse")
    }
    configured = {
        "rtt_ms": rtt_ms,
        "delay_forward_ms": link.forward.delay * 1000,
        "delay_reverse_ms": link.reverse.delay * 1000,
        "jitter_ms": link.forward.jitter * 1000,
        "loss_forward": expected["forward"],
        "loss_reverse": expected["reverse"],
        "rate_bps": link.forward.rate,
        "mtu": min(link.forward.mtu, link.reverse.mtu),
        "hosts": {role: described["hosts"][role]["sysctls_applied"] for role in ENDPOINTS},
    }
    measured = {
        "rtt_ms": rtt.mean_ms,
        "rtt": asdict_rtt(rtt),
        "loss_forward": loss["forward"].loss_percent,
        "loss_reverse": loss["reverse"].loss_percent,
        "loss_packets": {name: sample.to_json() for name, sample in loss.items()},
        "throughput_bps": throughput["throughput_bps"],
        "throughput": throughput,
        "link_counters": counters,
        "link_counters_after_loss_probe": counters_before,
    }
    checks: dict[str, Any] = {
        "rtt": {
            "ok": measure.within(
                rtt.mean_ms, rtt_ms, absolute=RTT_TOLERANCE_MS, relative=RTT_TOLERANCE_REL
            ),
            "tolerance": f"{RTT_TOLERANCE_MS:g} ms + {RTT_TOLERANCE_REL:.0%}",
        },
    }
    for name in ("forward", "reverse"):
        want = expected[name]
        got = loss[name].loss_percent
        if want is not None and not math.isnan(got):
            checks[f"loss_{name}"] = {
                "ok": abs(got - want) <= LOSS_TOLERANCE_PP,
                "tolerance": f"{LOSS_TOLERANCE_PP:g} percentage points over {loss[name].sent} "
                "packets",
            }
    # The rate is checked only where it is the binding limit (no window or loss bound lower).
    if link.forward.rate and bound.rate_goodput_bps and bound.limited_by == "rate":
        checks["rate"] = {
            "ok": measure.within(
                throughput["throughput_bps"],
                bound.rate_goodput_bps,
                absolute=0,
                relative=RATE_TOLERANCE_REL,
            ),
            "tolerance": f"{RATE_TOLERANCE_REL:.0%} of the TCP goodput the rate allows",
        }
    return {
        "backend": described["backend"],
        "loss_unit": "percent",
        "configured": configured,
        "measured": measured,
        "bound": bound.to_json(),
        "checks": checks,
        "testbed": described,
    }


def asdict_rtt(rtt: measure.RttSample) -> dict[str, Any]:
    from dataclasses import asdict

    return {
        key: (None if isinstance(v, float) and math.isnan(v) else v)
        for key, v in asdict(rtt).items()
    }
