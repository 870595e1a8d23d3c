"""Seeds derived from a scenario's seed: one independent, reproducible stream per use.

A scenario holds one seed per purpose (`link.seed`, a zone's `seed`); each user of random
numbers (a case's link emulator, a direction, a schedule) needs its own stream, and a stream
must not change when an unrelated case is added to the matrix or the cases are reordered.
Hashing the base seed with names (not positions) gives exactly that.
"""

from __future__ import annotations

import hashlib

SEED_BITS = 63  # fits a signed 64-bit integer wherever it is stored (JSON readers, SQL)
_DOMAIN = b"xfrbench-seed\x00"


def derive_seed(base: int, *parts: str) -> int:
    """The seed for the stream named by `parts` under `base`: 0 <= seed < 2**63.

    The first 8 bytes of SHA-256 over a fixed domain tag, `base` in decimal and each part
    length-prefixed (so ("ab", "c") and ("a", "bc") differ), as a big-endian integer with the
    top bit cleared. Pure: the same arguments give the same seed on any machine and Python
    version. Different arguments give unrelated seeds (SHA-256 is the assumption: two
    streams collide with probability about 2**-63).
    """
    if isinstance(base, bool) or not isinstance(base, int):
        raise TypeError(f"base seed must be an int, not {type(base).__name__}")
    digest = hashlib.sha256(_DOMAIN)
    digest.update(str(base).encode("ascii"))
    for part in parts:
        if not isinstance(part, str):
            raise TypeError(f"seed parts must be str, not {type(part).__name__}: {part!r}")
        data = part.encode("utf-8")
        digest.update(len(data).to_bytes(8, "big"))
        digest.update(data)
    return int.from_bytes(digest.digest()[:8], "big") >> (64 - SEED_BITS)
