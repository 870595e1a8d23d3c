"""Live Prometheus view of a run: serves a ``MetricState`` (``harness.metrics.series``) over
HTTP through prometheus-client, with its own registry (never the global one), while the run
feeds it transfer records and samples from any thread.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterable
from types import TracebackType
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.exposition import generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from harness.core.errors import UserInputError
from harness.core.terms import SERVER_TO_SERVER
from harness.metrics.series import MetricState
from harness.results.model import TransferRecord

if TYPE_CHECKING:
    from harness.plan.case import CasePlan


LAST_SCRAPE_WAIT_MAX = 30.0  # seconds a closing exporter waits for its last figures' scrape


class _StateCollector(Collector):
    """Hands the registry a consistent snapshot of the state, taken under its lock, and
    keeps when it was last collected (a scrape)."""

    def __init__(self, state: MetricState, lock: threading.Lock) -> None:
        self._state = state
        self._lock = lock
        self.scraped: list[float] = []  # time.monotonic() of each collection

    def collect(self) -> Iterable[Metric]:
        with self._lock:
            self.scraped = [*self.scraped[-3:], time.monotonic()]
            return list(self._state.families())

    def describe(self) -> Iterable[Metric]:
        return []  # no fixed names to reserve; the registry need not collect at register time


class Exporter:
    """Serves a run's metrics on ``address:port`` while the ``with`` block lasts; port 0 picks
    a free port (see ``.port``), port None serves nothing (``exposition()`` still works).
    ``observe_*`` may be called from any thread. Without ``run_info`` it serves no
    xfrbench_run_info: an inventory host's agent serves its own samples beside the run's
    exporter, which says what the run is."""

    def __init__(
        self,
        run_id: str,
        scenario: str,
        spec_hash: str,
        port: int | None,
        address: str = "127.0.0.1",
        run_info: bool = True,
    ) -> None:
        self.run_id = run_id
        self.address = address
        self._requested_port = port
        self._lock = threading.Lock()
        self._state = MetricState(run_id, scenario, spec_hash)
        if not run_info:  # an agent's: the run's own exporter says which run this is
            self._state.values.pop(("xfrbench_run_info", (run_id, scenario, spec_hash)))
        self.registry = CollectorRegistry(auto_describe=False)
        self._collector = _StateCollector(self._state, self._lock)
        self.registry.register(self._collector)
        self._changed_at = 0.0  # time.monotonic() of the last record or sample
        self._server: Any = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int | None:
        """The port actually served (after ``__enter__``), or None when not serving."""
        if self._server is None:
            return None
        return int(self._server.server_port)

    @property
    def url(self) -> str | None:
        port = self.port
        return None if port is None else f"http://{_host(self.address)}:{port}/metrics"

    def observe_transfer(self, record: TransferRecord) -> None:
        with self._lock:
            self._state.add_transfer(record)
            self._changed_at = time.monotonic()

    def expect_transfers(
        self,
        case: str,
        primary: str,
        secondary: str,
        transport: str,
        xfr: str,
        methods: Iterable[str] = ("server-to-server",),
        host: str = "secondary",
        site: str = "",
    ) -> None:
        """Announce a case before its first transfer (see ``MetricState.expect_transfers``)."""
        with self._lock:
            for method in methods:
                self._state.expect_transfers(
                    case, primary, secondary, transport, xfr, method, host, site
                )

    def expect_case(self, plan: CasePlan) -> None:
        """Announce every transfer series of a case with the labels its records will carry:
        one per secondary (server to server), client pulls on the first secondary's host."""
        for index, host in enumerate(plan.secondaries):
            self.expect_transfers(
                plan.name,
                plan.primary.server.kind,
                host.server.kind,
                plan.transport.name,
                plan.xfr,
                plan.methods if index == 0 else (SERVER_TO_SERVER,),
                host=host.name if plan.is_fleet else "secondary",
                site=host.site if plan.is_fleet else "",
            )

    def observe_sample(self, sample: dict[str, Any]) -> None:
        with self._lock:
            self._state.add_sample(sample)
            self._changed_at = time.monotonic()

    def exposition(self) -> bytes:
        """The Prometheus text format, as a scrape would get it."""
        return generate_latest(self.registry)

    def __enter__(self) -> Exporter:
        if self._requested_port is not None:
            try:
                self._server, self._thread = start_http_server(
                    self._requested_port, addr=self.address, registry=self.registry
                )
            except OSError as exc:
                raise UserInputError(
                    f"cannot serve metrics on {self.address}:{self._requested_port}: "
                    f"{exc.strerror or exc}",
                    key="--prometheus-port",
                    fix="pick a free port, or 0 for any",
                ) from None
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _await_last_scrape(self) -> None:
        """A run's last figures (its final records) change just before it ends: while a
        Prometheus scrapes this exporter, wait for one scrape after the last change, at most
        two of its scrape intervals (LAST_SCRAPE_WAIT_MAX at most); nobody scraping, no
        wait (metrics.om keeps every figure anyway)."""
        with self._lock:
            scraped, changed = list(self._collector.scraped), self._changed_at
        if len(scraped) < 2 or scraped[-1] >= changed:
            return
        interval = max(b - a for a, b in itertools.pairwise(scraped))
        deadline = time.monotonic() + min(2 * interval, LAST_SCRAPE_WAIT_MAX)
        while time.monotonic() < deadline:
            with self._lock:
                if self._collector.scraped[-1] >= changed:
                    return
            time.sleep(0.05)

    def close(self) -> None:
        if self._server is not None:
            self._await_last_scrape()
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None


def _host(address: str) -> str:
    return f"[{address}]" if ":" in address else address
