"""The live case of a change stream: `LiveCase` plus what `stream.StreamBench` needs.

Publishing does not wait for the primary to serve (the follower sees when it does); every
server's serial is followed by one poller thread (xfr/follow.py); each secondary's transfers
come from the servers' logs afterwards, in their own words (servers/<kind>.py); its lag
goes to samples.jsonl (and so to Prometheus, live) as the stream goes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from harness.measure import processes as srv
from harness.measure.live import LiveCase, poll_interval
from harness.measure.stream_logs import stream_transfers
from harness.measure.stream_records import PRIMARY, Put, StreamTransfer
from harness.xfr.follow import SerialChange, SerialFollower

ALIVE_EVERY_S = 1.0  # how often the servers are checked while following them
LAG_EVERY_S = 1.0  # the most often a secondary's unchanged lag is written again


class _Following:
    """The follower, with the servers checked about every second (a server that exits
    ends the stream with CaseFailed, as in the other flows)."""

    def __init__(self, case: LiveCase, follower: SerialFollower) -> None:
        self.case = case
        self.follower = follower
        self.checked = case.clock()

    def expect(self, serial: int) -> None:
        self.follower.expect(serial)

    def take(self, timeout: float) -> list[SerialChange]:
        now = self.case.clock()
        if now - self.checked >= ALIVE_EVERY_S:
            self.case._alive()
            self.checked = now
        return self.follower.take(min(timeout, ALIVE_EVERY_S))

    def queries(self) -> dict[str, int]:
        return self.follower.queries()


class LiveStreamCase(LiveCase):
    """A LiveCase that can also run a change stream (measure/stream.py)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._lag_written: dict[str, tuple[int, float]] = {}  # host -> (serials, when)

    def prepare_stream(self, serials: list[int]) -> None:
        """Every change set of the stream, generated (or found in the cache) now."""
        for serial in serials:
            self.change_set(serial)

    def put_serial(self, serial: int) -> Put:
        issued, method = self.put_version(serial)
        return Put(issued, self.clock(), method)

    @contextlib.contextmanager
    def follow(self, hosts: list[str]) -> Iterator[_Following]:
        assert self.primary is not None
        places = {PRIMARY: self.primary.place}
        places |= {name: self.secondaries[name].place for name in hosts}
        interval = poll_interval(len(places))
        with self.places.follow_serials(places, self.first_zone, interval) as follower:
            yield _Following(self, follower)

    def stream_transfers(self, host: str, since: float) -> list[StreamTransfer]:
        """`host`'s incoming transfers since `since` (unix), from its log and its primary's
        (servers/base.py stream_transfers: what each dialect's lines say)."""
        assert self.primary is not None
        running = self.secondaries[host]
        return stream_transfers(
            type(running.server),
            srv.log_of(running),
            type(self.primary.server),
            srv.log_of(self.primary),
            self.first_zone,
            running.place.address,
            since,
        )

    def stream_lag(self, case: str, lag: dict[str, tuple[int, float]]) -> None:
        """Each secondary's lag as a line of samples.jsonl (role "stream"): written when
        its serials behind change, else at most every LAG_EVERY_S."""
        if self.sampler is None:
            return
        now = self.clock()
        lines = []
        for host, (serials, seconds) in lag.items():
            last = self._lag_written.get(host)
            if last is not None and last[0] == serials and now - last[1] < LAG_EVERY_S:
                continue
            self._lag_written[host] = (serials, now)
            plan = next(h for h in self.plan.secondaries if h.name == host)
            lines.append(
                {
                    "role": "stream",
                    "host": host,
                    "site": plan.site if self.plan.is_fleet else "",
                    "behind_serials": serials,
                    "behind_s": round(seconds, 6),
                }
            )
        if lines:
            self.sampler.note(case, lines)
