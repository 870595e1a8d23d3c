"""A cold start's wait on running secondaries: each host's zones polled by a thread of its
own, many queries in flight (xfr/poll_zones.py wait_for_zones), or, with
`cold_start_poll = "off"`, read from the secondary's own log (measure/served_log.py)."""

from __future__ import annotations

import threading
from collections.abc import Callable

from harness.measure.processes import RunningServer
from harness.measure.served_log import wait_logged_zones
from harness.xfr.poll_zones import ZonesServed, ZonesTimeout


def wait_all_zones(
    secondaries: dict[str, RunningServer],
    zones: list[str],
    serial: int,
    deadline: float,
    rate: int | str,
    clock: Callable[[], float],
    progress: Callable[[str, int, int], None] | None = None,
) -> tuple[dict[str, dict[str, float]], dict[str, str], dict[str, ZonesServed]]:
    """Per host, when it first served each zone at `serial` (hosts that served them all),
    why the others did not (a timeout naming the zones still pending), and how each was
    polled. `rate`: SOA queries a second to each host at most, or "off". An error in a
    poller's thread is raised here. `progress(host, served, total)`, when given, is called
    between polling rounds from the host's thread (a remote place: once, before)."""
    served: dict[str, dict[str, float]] = {}
    errors: dict[str, str] = {}
    seen_by: dict[str, ZonesServed] = {}
    failure: list[BaseException] = []
    since = clock()

    def watch(name: str) -> None:
        running = secondaries[name]

        def between(done: int, total: int) -> None:
            running.alive()
            if progress is not None:
                progress(name, done, total)

        try:
            if rate == "off":  # no query at all: the secondary's own log is the clock
                seen = wait_logged_zones(running, zones, since, deadline, clock)
            else:
                seen = running.place.wait_zones(
                    zones,
                    serial,
                    timeout=max(0.0, deadline - since),
                    since=since,
                    max_rate=float(rate),
                    between_rounds=between,
                )
        except ZonesTimeout as exc:
            errors[name] = str(exc)
            seen_by[name] = exc.result
        except BaseException as exc:  # re-raised in the caller's thread
            failure.append(exc)
        else:
            served[name] = seen.served
            seen_by[name] = seen
            if progress is not None:  # done: said now, not when the slowest host is
                progress(name, len(seen.served), len(zones))

    threads = [threading.Thread(target=watch, args=(name,), daemon=True) for name in secondaries]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failure:
        raise failure[0]
    return served, errors, seen_by
