"""RFC 1982 serial number arithmetic for 32-bit SOA serials (pure functions).

Serials wrap around: 1 follows 4294967295, and "a is newer than b" holds when a is less than
2^31 steps ahead of b. The pair whose distance is exactly 2^31 is undefined by the RFC; it
compares as neither greater nor less here, so a poller never mistakes it for "arrived".
"""

from __future__ import annotations

SERIAL_BITS = 32
_MOD = 1 << SERIAL_BITS
_HALF = 1 << (SERIAL_BITS - 1)


def _check(value: int) -> int:
    if not 0 <= value < _MOD:
        raise ValueError(f"SOA serial {value} is outside 0..{_MOD - 1}")
    return value


def serial_gt(a: int, b: int) -> bool:
    """a is newer than b (RFC 1982 section 3.2)."""
    _check(a)
    _check(b)
    return (a < b and b - a > _HALF) or (a > b and a - b < _HALF)


def serial_lt(a: int, b: int) -> bool:
    """a is older than b."""
    return serial_gt(b, a)


def serial_ge(a: int, b: int) -> bool:
    """a equals b or is newer: the test for "the secondary has (at least) serial b"."""
    return _check(a) == _check(b) or serial_gt(a, b)


def serial_add(a: int, n: int) -> int:
    """a + n modulo 2^32; RFC 1982 allows 0 <= n <= 2^31 - 1."""
    if not 0 <= n < _HALF:
        raise ValueError(f"cannot add {n} to a serial (allowed: 0..{_HALF - 1})")
    return (_check(a) + n) % _MOD
