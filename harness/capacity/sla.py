"""The SLA a capacity search holds each step to, and a step's verdict (pure).

Written as the user writes it on the command line:

    --sla "p95 load time 30s"   95 % of the fleet served the new serial within 30 s
    --sla "all served 60s"      every secondary served it within 60 s
    --sla "no failures"         no transfer failed or went unverified

or the scenario's own: `[stream] sla` is a p95 load time (RSSAC002's), else the scenario's
`timeout` is "all served" within it (a fleet that did not converge failed it).

Its figure is one value per repeat, never per secondary (a repeat's secondaries share
its NOTIFY, primary and links: results/fleet.py). An update's repeat: the fleet time by
which that share of its secondaries served (results/fleet.py, nearest rank over all N, one
that never served ranking last); a stream's: the 95th percentile over its serials of their
load time at that share (results/stream.py); records outside a fleet (a cold start): the
share's time over the repeat's records. "no failures": the repeat's transfers that
did not count. A figure never reached (not enough secondaries served) is infinitely late.

A step's verdict sets the median's distribution-free interval against the SLA: the order
statistics (k, n + 1 - k) with the largest k whose confidence, 1 - 2 P(Bin(n, 1/2) < k), is
at least 75 % (with 3 to 5 repeats: the lowest and the highest). It passes when the whole
interval meets the SLA, fails when none of it does, and is noisy, too noisy to call,
otherwise: more repeats narrow it.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from harness.core.errors import UserInputError
from harness.core.stats import nearest_rank
from harness.core.units import parse_duration
from harness.results.fleet import fleet_percentile, fleet_repeats
from harness.results.model import TransferRecord
from harness.results.stream import FLEET, serial_loads

if TYPE_CHECKING:
    from harness.capacity.search import Verdict
    from harness.spec.scenario import Scenario

SlaKind = Literal["load", "all", "no-failures"]
CONFIDENCE = 0.75  # of the median's interval a verdict is called on

_LOAD = re.compile(r"^p(\d{1,2}(?:\.\d+)?) load time (\S+)$")
_ALL = re.compile(r"^all served (\S+)$")
_FORMS = '"p95 load time 30s", "all served 60s" or "no failures"'


@dataclass(frozen=True)
class Sla:
    kind: SlaKind
    seconds: float | None = None  # the time to meet; None for "no failures"
    percentile: float = 95.0  # the share of the fleet, for "load"
    source: str = "--sla"  # where it came from: --sla, [stream] sla, timeout

    def describe(self) -> str:
        """ "p95 load time 30 s", "all served 60 s", "no failures"."""
        if self.kind == "no-failures":
            return "no failures"
        if self.kind == "all":
            return f"all served {self.seconds:g} s"
        return f"p{self.percentile:g} load time {self.seconds:g} s"

    @property
    def threshold(self) -> float:
        """The largest figure that meets it (a count of failures for "no failures")."""
        return 0.0 if self.seconds is None else self.seconds

    def meets(self, figure: float) -> bool:
        return figure <= self.threshold

    def to_dict(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "seconds": self.seconds,
            "percentile": self.percentile if self.kind == "load" else None,
            "source": self.source,
            "text": self.describe(),
        }


def _seconds(text: str, written: str) -> float:
    try:
        seconds = parse_duration(text)
    except ValueError:
        seconds = math.nan
    if not seconds > 0:  # also nan
        raise UserInputError(
            f"{text!r} in {written!r} is not a time",
            key="--sla",
            fix=f"give a duration such as 30s, 1m or 500ms: {_FORMS}",
        )
    return seconds


def parse_sla(text: str) -> Sla:
    """The SLA as written after --sla; an exit-2 error naming the flag and its forms."""
    written = " ".join(text.lower().split())
    if written in {"no failures", "no failure"}:
        return Sla("no-failures")
    if match := _LOAD.match(written):
        share = float(match.group(1))
        if not 0 < share <= 100:
            raise UserInputError(
                f"p{match.group(1)} in {text!r} is no share of the fleet",
                key="--sla",
                fix='give p1 to p100, e.g. "p95 load time 30s"',
            )
        return Sla("load", _seconds(match.group(2), text), share)
    if match := _ALL.match(written):
        return Sla("all", _seconds(match.group(1), text))
    raise UserInputError(f"{text!r} is not an SLA", key="--sla", fix=f"write {_FORMS}")


def scenario_sla(scenario: Scenario) -> Sla:
    """The scenario's own: its stream's SLA, else all served within its timeout."""
    if scenario.stream is not None and scenario.stream.sla is not None:
        return Sla("load", scenario.stream.sla, 95.0, "[stream] sla")
    return Sla("all", scenario.timeout, source="timeout")


def repeat_figures(sla: Sla, records: Iterable[TransferRecord]) -> list[float]:
    """One figure per repeat, in repeat order (math.inf: never reached)."""
    records = list(records)
    if sla.kind == "no-failures":
        measured = [r for r in records if r.repeat >= 1 and r.failure != "unsupported"]
        repeats = sorted({r.repeat for r in measured})
        return [float(sum(1 for r in measured if r.repeat == n and not r.counts)) for n in repeats]
    if any(r.trigger == "stream" for r in records):
        return _stream_figures(sla, records)
    repeats = fleet_repeats(records)
    if not repeats:
        return _plain_figures(sla, records)
    figures = []
    for repeat in repeats:
        if sla.kind == "all":
            figures.append(math.inf if repeat.last_s is None else repeat.last_s)
            continue
        value = fleet_percentile(sorted(repeat.times.values()), repeat.secondaries, sla.percentile)
        figures.append(math.inf if value is None else value)
    return figures


def _plain_figures(sla: Sla, records: list[TransferRecord]) -> list[float]:
    """Per repeat of records outside a fleet (one secondary, a cold start): the share's
    time over its records by nearest rank, one that did not count ranking last."""
    measured = [r for r in records if r.repeat >= 1 and r.failure != "unsupported"]
    figures = []
    for repeat in sorted({r.repeat for r in measured}):
        mine = [r for r in measured if r.repeat == repeat]
        times = sorted(r.duration_s for r in mine if r.counts and r.duration_s is not None)
        share = 100.0 if sla.kind == "all" else sla.percentile
        value = fleet_percentile(times, len(mine), share)
        figures.append(math.inf if value is None else value)
    return figures


def _stream_figures(sla: Sla, records: list[TransferRecord]) -> list[float]:
    """Per repeat, the 95th percentile over its serials of the time its fleet served each
    (every secondary for "all", the SLA's share otherwise)."""
    loads = [s for s in serial_loads(records) if s.site == FLEET]
    figures = []
    for repeat in sorted({s.repeat for s in loads}):
        mine = [s for s in loads if s.repeat == repeat]
        if sla.kind == "all":
            times = [s.all_s for s in mine]
        else:
            times = [
                fleet_percentile(
                    sorted(r.duration_s for r in records if r.repeat == repeat
                           and r.serial == s.serial and r.counts and r.duration_s is not None),
                    s.secondaries, sla.percentile,
                )
                for s in mine
            ]  # fmt: skip
        figures.append(nearest_rank([math.inf if t is None else t for t in times], 95.0))
    return figures


def median_interval(values: Sequence[float]) -> tuple[float, float]:
    """The median's distribution-free interval at CONFIDENCE or more (order statistics)."""
    ordered = sorted(values)
    n = len(ordered)
    best = 1
    for k in range(1, n // 2 + 1):
        below = sum(math.comb(n, i) for i in range(k)) / 2**n
        if 1 - 2 * below >= CONFIDENCE:
            best = k
    return ordered[best - 1], ordered[n - best]


@dataclass(frozen=True)
class Call:
    verdict: Verdict
    figure: float | None  # the median; None: never reached
    low: float | None
    high: float | None  # None: never reached
    repeats: int
    met: int  # repeats that met the SLA

    def note(self, sla: Sla) -> str:
        return f"{self.met} of {self.repeats} repeats met {sla.describe()}"


def call(sla: Sla, figures: Sequence[float]) -> Call:
    """The step's verdict from its repeats' figures (no repeat: a fail, nothing served)."""

    def finite(x: float) -> float | None:
        return None if math.isinf(x) else x

    if not figures:
        return Call("fail", None, None, None, 0, 0)
    low, high = median_interval(figures)
    met = sum(1 for f in figures if sla.meets(f))
    verdict: Verdict = "pass" if sla.meets(high) else "fail" if not sla.meets(low) else "noisy"
    median = statistics.median(figures)
    return Call(verdict, finite(median), finite(low), finite(high), len(figures), met)
