"""The RRSUM digest (``harness.xfr.rrsum``) computed by the compiled extension
``xfrbench_rrsum`` (Rust, rrsum/ in this repository, built by ``uv sync``), with the Python
reference as the fallback: same interface, same sums, byte for byte.

The extension walks transfer messages and zone-file lines itself for every type the Python
fast paths convert; what it does not convert goes back to the reference, so no record is
canonicalised differently: in messages, a type it does not know is handed to
``digest.canonical_rdata`` (dnspython), and zone-file lines it does not read (other types,
escapes, comments after the rdata, directives) are summed, or rejected with the reference's
own error, by ``rrsum_text.LineSummer``. Sums add up, so the two parts make the whole.

``implementation()`` says which one runs and why: ``rust`` unless the extension is missing
or ``XFRBENCH_RRSUM=python`` asks for the reference (benchmarks, tests, a suspected bug).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Any

from harness.xfr.digest import canonical_rdata
from harness.xfr.rrsum import ZoneSum
from harness.xfr.rrsum import sum_stream as python_sum_stream
from harness.xfr.rrsum_text import LineSummer
from harness.xfr.wire import WireError

ENV = "XFRBENCH_RRSUM"  # "python": use the reference even where the extension is installed

try:
    import xfrbench_rrsum as _native

    _MISSING: str | None = None
except ImportError as exc:  # not built (no cargo at `uv sync`), or another interpreter
    _native = None
    _MISSING = f"the xfrbench_rrsum extension is not installed ({exc}); run `make setup`"


def native_module() -> Any | None:
    """The extension when it should be used now, else None."""
    if _native is None or os.environ.get(ENV, "").lower() == "python":
        return None
    return _native


def implementation() -> dict[str, str]:
    """Which RRSUM implementation runs: ``{"implementation": "rust"|"python", ...}`` with the
    extension's version, or the reason for the Python reference (run.json, doctor)."""
    if native_module() is not None:
        return {"implementation": "rust", "version": str(_native.__version__)}
    reason = _MISSING or f"{ENV}=python asks for the Python reference"
    return {"implementation": "python", "reason": reason}


def digest_warning(digest: dict[str, str] | None) -> str | None:
    """The first screen's line for a run whose copies were summed by the Python reference
    (run.json's ``digest``), None for the compiled sum or a run that did not record it. The
    sums are the same; the time is not: verifying takes many times longer, so the run's
    verify phase and wall time are not those of a run on a working build."""
    if not digest or digest.get("implementation") != "python":
        return None
    return (
        "copies were verified by the Python reference RRSUM, not the compiled extension "
        f"({digest.get('reason') or 'no reason recorded'}): the same sums, many times slower, "
        "so verify and wall times are not a working build's"
    )


def _fallback(msg: bytes, rtype: int, rclass: int, off: int, rdlen: int) -> bytes:
    return canonical_rdata(msg, rtype, rclass, off, rdlen, {})


def _zone_sum(records: int, total: bytes) -> ZoneSum:
    return ZoneSum(int.from_bytes(total, "big"), records)


class StreamSummer:
    """The sum of transfer messages added one at a time (``message``) or as runs of
    length-prefixed messages (``stream``); ``result()`` at any point. Raises ``WireError``
    on a malformed message, like ``rrsum.sum_message``."""

    def __init__(self) -> None:
        native = native_module()
        self.implementation = "python" if native is None else "rust"
        self._native = None if native is None else native.StreamSum(_fallback)
        self._total = ZoneSum()

    def message(self, msg: bytes, drop_last: bool = False) -> None:
        if self._native is None:
            self._total = self._total + python_sum_stream(
                len(msg).to_bytes(2, "big") + msg, drop_last
            )
            return
        try:
            self._native.message(msg, drop_last)
        except ValueError as exc:
            raise WireError(str(exc)) from None

    def stream(self, data: bytes, drop_last: bool = False) -> None:
        if self._native is None:
            self._total = self._total + python_sum_stream(data, drop_last)
            return
        try:
            self._native.stream(bytes(data), drop_last)
        except ValueError as exc:
            raise WireError(str(exc)) from None

    def result(self) -> ZoneSum:
        if self._native is None:
            return self._total
        return _zone_sum(*self._native.result())


def sum_stream(data: bytes | bytearray | memoryview, drop_last: bool = False) -> ZoneSum:
    """``rrsum.sum_stream``, compiled where available."""
    summer = StreamSummer()
    summer.stream(bytes(data), drop_last)
    return summer.result()


def _origin_forms(origin: str) -> tuple[bytes, bytes]:
    import dns.name

    name = dns.name.from_text(origin)
    return name.canonicalize().to_wire(), name.to_text().encode().lower()


def sum_text(data: bytes, origin: str, skip: Callable[[bytes], bool] | None = None) -> ZoneSum:
    """The sum of the zone-file lines in ``data`` (``rrsum_text.sum_lines`` of
    ``data.splitlines()``), compiled where available. Raises ``LineError`` on a line the
    reference rejects. ``skip``: lines to leave out; it sees only the lines the compiled
    summer does not read (every type but A, AAAA, NS-like, MX, SOA, DS and TXT: kdig's
    TSIG line is one)."""
    native = native_module()
    if native is None:
        summer = LineSummer(origin)
        lines = data.splitlines()
        summer.add_lines(lines if skip is None else (ln for ln in lines if not skip(ln)))
        return summer.result()
    wire, text = _origin_forms(origin)
    records, total, deferred = native.sum_text(data, wire, text)
    value = _zone_sum(records, total)
    if deferred:
        summer = LineSummer(origin)
        summer.add_lines(_lines(data, deferred, skip))
        value = value + summer.result()
    return value


def _lines(
    data: bytes, ranges: Iterable[tuple[int, int]], skip: Callable[[bytes], bool] | None
) -> Iterable[bytes]:
    for start, end in ranges:
        for line in data[start:end].splitlines():
            if skip is None or not skip(line):
                yield line
