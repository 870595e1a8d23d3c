"""What the flows need from a live case (`Bench`), and the values they trade with it: the
interface the driver (measure/live.py, remote/bench.py) implements on real servers and unit
tests on a fake with a fake clock. The flows themselves are measure/protocol.py (an update),
faults.py, stream.py, cold_start_flow.py, built of the steps in measure/steps.py."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from harness.measure.logged import ColdStartLog, Logged
from harness.measure.wall import WallClock
from harness.plan.case import CasePlan
from harness.results.model import Failure, TransferRecord

START_TIMEOUT = 120.0  # a server that does not serve its zones by then has failed to start
Emit = Callable[[TransferRecord], None]
Control = Literal["retransfer", "refresh"]


class PublishFailed(Exception):
    """The harness could not put the new version on the primary, or the primary serves
    something other than what the harness published: the harness's error, not a transfer's.
    The case cannot go on (its change-set chain no longer starts from what the primary
    holds). `recorded`: the repeat's records already say so."""

    def __init__(self, message: str, *, recorded: bool = False) -> None:
        super().__init__(message)
        self.recorded = recorded


@dataclass(frozen=True)
class Publication:
    """A new serial put on the primary: when it was asked for and when the primary served
    it. Its NOTIFYs are read from the wire afterwards (Bench.notifications)."""

    issued: float
    served: float
    method: str = "reload"  # how the serial was put there (Server.publish_method)
    # The change set it carried (records removed / added, bytes; an own zone's version).
    change: dict[str, Any] | None = None


@dataclass(frozen=True)
class Verification:
    ok: bool
    problem: str | None
    records: int | None  # the copy's record count; None when it could not be read
    reread: str | None = None  # the first read's problem, when the copy was read twice
    # Seconds the server took to send its copy (connect to last message; both reads when
    # it was read twice): the part of the verification that is a transfer out of the
    # secondary, not the harness's digest.
    read_s: float | None = None
    # How: "served", the copy read back by AXFR; "disk+sample", the server's own file
    # summed and what it serves checked at `sample` names (measure/disk_copy.py), after
    # `flush_s` seconds of the server writing that file.
    by: str = "served"
    sample: int | None = None
    flush_s: float | None = None

    @property
    def failure(self) -> Failure:
        """A copy the harness could not read is its own failure, not the transfer's."""
        return "harness" if self.records is None else "verification"

    def facts(self) -> dict[str, Any]:
        """How the copy was verified, for the record's extra."""
        facts: dict[str, Any] = {"verified_by": self.by}
        if self.sample is not None:
            facts["verify_sample"] = self.sample
        return facts


@dataclass(frozen=True)
class Pulled:
    """One client pull: the puller's result and whether its copy matched the primary's."""

    ok: bool
    error: str | None
    serial: int | None
    records: int
    bytes: int
    messages: int
    duration_s: float | None
    started_at: float
    phases: dict[str, float]
    digest_matches: bool


class Bench(Protocol):
    """What the flows need from a live case. Times are the bench's monotonic clock."""

    plan: CasePlan
    first_zone: str
    zones: list[str]
    base_serial: int
    spent: WallClock  # where the wall time goes (measure/wall.py), on the bench's clock

    def clock(self) -> float: ...

    def wall(self) -> float: ...

    def prepare_secondaries(self) -> None:
        """Render every secondary with every zone configured and none on disk (stopping
        any that run)."""

    def start_secondaries(self) -> None:
        """Spawn the prepared secondaries."""

    def stop_secondaries(self) -> None: ...

    def wait_served(
        self,
        hosts: list[str],
        zone: str,
        serial: int,
        deadline: float,
        straggle: float | None = None,
    ) -> dict[str, float]:
        """When each host first served `serial` of `zone`; hosts that did not by the
        deadline are missing (`straggle`: once one served, the others get this long more
        at most). Raises CaseFailed when a server exits."""

    def last_unserved(self, host: str) -> float | None:
        """When the last SOA query that `host` answered without the serial of the last
        `wait_served` was sent (None: it answered none so): where its error bar begins."""

    def wait_all_zones(
        self, hosts: list[str], zones: list[str], serial: int, deadline: float
    ) -> tuple[dict[str, dict[str, float]], dict[str, str]]:
        """Per host, when it first served each zone at `serial` (hosts that served them all),
        and why the others did not (a timeout naming the zones still pending)."""

    def zones_last_unserved(self, host: str) -> dict[str, float]:
        """`last_unserved` per zone of the last `wait_all_zones` (zones `host` answered
        without the serial; the others are missing)."""

    def publish(self, serial: int) -> Publication:
        """Put `serial` of the first zone on the primary (raises XfrTimeout, or
        PublishFailed when the primary refused it). Returns once the primary serves it,
        without waiting for its NOTIFYs: a server paces them (BIND sends 20 a second), and
        the secondaries must be polled from the first one on."""

    def check_primary(self, serial: int) -> str | None:
        """None when the primary serves what the harness published at `serial`; else what
        differs. Asked after the transfers, so that it delays no secondary's polling."""

    def notifications(self, serial: int, since: float, wait: float) -> dict[str, float]:
        """When the primary's NOTIFY of `serial` to each secondary left its host (seen on
        the wire after `since`), waiting up to `wait` seconds for those not seen yet."""

    def control(self, host: str, action: Control, zone: str) -> None: ...

    def connect_ports(self, host: str, since: float) -> list[int]:
        """The primary's ports `host` connected to since `since` (its SYNs on the primary's
        wire): 53 for TCP, 853 for XoT."""

    def verify(self, host: str, zone: str, serial: int) -> Verification: ...

    def verify_zones(self, host: str, zones: list[str], serial: int) -> dict[str, Verification]:
        """verify() for many small zones at once (a cold start)."""

    def logged(self, host: str, zone: str, serial: int, since: float) -> Logged:
        """The transfer as the servers logged it, the secondary's failure lines since
        `since` (unix time), and the primary's refusals since then (to any secondary)."""

    def cold_start_log(self, host: str) -> ColdStartLog: ...

    def mark(self, event: str, repeat: int) -> None:
        """Sample every server now: a transfer's start or end."""

    def between_repeats(self) -> dict[str, Any] | None:
        """Wait until the last transfer left nothing that could bias the next (at most the
        plan's settle), and make repeats start alike (forget cached route metrics); returns
        what was waited for (measure/settle.py), for the records."""

    def begin_observation(self) -> None:
        """Start watching the wire for one repeat's transfers (counters, TCP, packets)."""

    def finish_observation(self) -> None:
        """Every transfer of the repeat ended (or failed): stop watching."""

    def observation(self, host: str, t0: float, served: float) -> dict[str, Any]:
        """What the transfer to `host` did on the wire and left in the TCP tables
        (measure/watch.py); asked after its copy was read back, so that the harness's own
        connections are told from the servers'."""

    def cold_start_polling(self, host: str) -> dict[str, Any]:
        """How a cold start's zones were polled on `host` (rounds, slowest round)."""

    def link_counters(self) -> dict[str, Any]: ...

    def pull(self, method: str, host: str) -> Pulled: ...


def secondary_names(plan: CasePlan) -> list[str]:
    return [host.name for host in plan.secondaries]


def timeout_text(timeout: float, host: str, zone: str, serial: int) -> str:
    return f"timeout after {timeout:g} s: the {host} never served {zone} serial {serial}"
