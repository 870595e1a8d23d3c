"""The tiny preset (SOA + NS) and the hosting preset (many small zones of a hosting mix)."""

from __future__ import annotations

import functools

from harness.zonegen.tables import label_table, ns_pool

TTL = 3600
HOST_TTL = 300  # hosters publish short TTLs on addresses so that moves are quick
_MASK64 = (1 << 64) - 1


def mix64(x: int) -> int:
    """splitmix64 finalizer: a cheap, well-spread hash of an integer (zone index, seed)."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


def ip4_from(h: int) -> str:
    first = (185, 46, 93, 109, 195, 217, 88, 37)[h & 7]
    return f"{first}.{(h >> 3) & 255}.{(h >> 11) & 255}.{(h >> 19) % 254 + 1}"


def ip6_from(h: int) -> str:
    return f"2a0{h % 10}:{(h >> 4) & 0xFFFF:x}:{(h >> 20) & 0xFFFF:x}::{((h >> 36) & 0xFFF) + 1:x}"


def tiny_lines(origin: str, serial: int, seed: int) -> list[str]:
    # The NS target is out of zone (a made-up provider): an in-zone one would need glue.
    ns = ns_pool(seed, origin)[0][0]
    return [
        f"{origin}\t{TTL}\tIN\tSOA\t{ns} hostmaster.{ns} {serial} 900 300 604800 900\n",
        f"{origin}\t{TTL}\tIN\tNS\t{ns}\n",
    ]


@functools.lru_cache(maxsize=8)
def _pool(seed: int, origin: str) -> tuple[tuple[str, str], ...]:
    return ns_pool(seed, origin)


def hosting_zone_name(origin: str, seed: int, index: int) -> str:
    return f"{label_table(seed).label(index)}.{origin}"


def hosting_lines(origin: str, seed: int, index: int, records: int, serial: int) -> list[str]:
    """Zone ``index`` under ``origin``: the first ``records`` lines of the hosting mix.

    The order is such that every prefix of 3 or more lines is a valid zone (the MX comes after
    the A of its target, for instance).
    """
    name = hosting_zone_name(origin, seed, index)
    pool = _pool(seed, origin)
    h = mix64(mix64(seed) ^ index)
    ns1, ns2 = pool[min(len(pool) - 1, int(len(pool) * ((h & 0xFFFF) / 65536.0) ** 3))]
    web = ip4_from(h >> 16)
    mail = web if (h >> 40) & 1 else ip4_from(mix64(h))
    mandatory = [
        f"{name}\t{TTL}\tIN\tSOA\t{ns1} hostmaster.{name} {serial} 10800 3600 1209600 300\n",
        f"{name}\t{TTL}\tIN\tNS\t{ns1}\n",
        f"{name}\t{TTL}\tIN\tNS\t{ns2}\n",
        f"{name}\t{HOST_TTL}\tIN\tA\t{web}\n",
        f"{name}\t{HOST_TTL}\tIN\tAAAA\t{ip6_from(h)}\n",
        f"www.{name}\t{HOST_TTL}\tIN\tCNAME\t{name}\n",
        f"mail.{name}\t{HOST_TTL}\tIN\tA\t{mail}\n",
        f"{name}\t{TTL}\tIN\tMX\t10 mail.{name}\n",
        f'{name}\t{TTL}\tIN\tTXT\t"v=spf1 a mx ~all"\n',
        f"ftp.{name}\t{HOST_TTL}\tIN\tA\t{web}\n",
        f"webmail.{name}\t{HOST_TTL}\tIN\tA\t{mail}\n",
        f"smtp.{name}\t{HOST_TTL}\tIN\tA\t{mail}\n",
    ]
    if records <= len(mandatory):
        return mandatory[:records]
    extra = [
        f"host{i}.{name}\t{HOST_TTL}\tIN\tA\t{ip4_from(mix64(h + i))}\n"
        for i in range(1, records - len(mandatory) + 1)
    ]
    return mandatory + extra
