"""Seeded lookup tables that make zone content cheap to produce.

Everything random about a zone is drawn once, here, from ``random.Random`` seeded with a string
built from the spec's seed. The writers then pick entries by cheap integer arithmetic on the
record's index, never calling the RNG per record: that is what makes 1 M+ records/s possible in
pure Python, and it makes the output a pure function of (seed, index).

Labels: ``label(j) = HI[j >> LO_BITS] + LO[j & LO_MASK]`` where every LO entry is exactly
``LO_LEN`` characters long and all entries of each table are distinct, so the concatenation is
uniquely decodable and therefore unique for distinct ``j``. ``j`` itself comes from an affine
bijection of the delegation index modulo ``2**LABEL_BITS`` (odd multiplier), so neighbouring
delegations get unrelated-looking names while uniqueness stays guaranteed.
"""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass

CONSONANTS = "bcdfghjklmnprstvz"
VOWELS = "aeiou"
LO_BITS = 12
LO_MASK = (1 << LO_BITS) - 1
HI_BITS = 15
LABEL_BITS = LO_BITS + HI_BITS  # 134 M distinct labels
LABEL_SPACE = 1 << LABEL_BITS
LO_LEN = 5
_NC = len(CONSONANTS)
_NV = len(VOWELS)

# Words that give some labels a registrant-ish look ("...-shop"); all exactly LO_LEN long.
_SUFFIX_WORDS = (
    "-shop",
    "-auto",
    "-info",
    "-tech",
    "-home",
    "-mail",
    "-film",
    "-golf",
    "-moda",
    "-bike",
    "-dent",
    "-stav",
    "-byty",
    "-sklo",
    "-plus",
    "-team",
    "-park",
    "-klub",
    "-foto",
    "-art1",
    "-bau1",
    "-24cz",
    "-web1",
    "-eshp",
    "group",
    "trade",
    "servs",
    "media",
    "print",
    "sport",
)

# Top-level domains for the out-of-zone name server pool. Names under the zone's own origin
# are filtered out, since an in-zone NS target without glue would not load.
_POOL_TLDS = ("net.", "com.", "eu.", "org.", "io.", "cz.", "de.", "sk.")
_POOL_STEMS = ("host", "dns", "web", "net", "hosting", "cloud", "server", "data", "")
_POOL_NS_STYLES = (("ns1", "ns2"), ("ns", "ns2"), ("dns1", "dns2"), ("a.ns", "b.ns"))


def _syllable(rng: random.Random) -> str:
    return CONSONANTS[int(rng.random() * _NC)] + VOWELS[int(rng.random() * _NV)]


def _word(rng: random.Random) -> str:
    # 1 to 3 syllables (10/45/45 %), a trailing consonant now and then ("novak", "kral").
    u = rng.random()
    count = 1 if u < 0.1 else 2 if u < 0.55 else 3
    word = "".join([_syllable(rng) for _ in range(count)])
    if rng.random() < 0.3:
        word += CONSONANTS[int(rng.random() * _NC)]
    return word


def _unique(rng: random.Random, count: int, make: object) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    while len(out) < count:
        word = make(rng)  # type: ignore[operator]
        if word not in seen:
            seen.add(word)
            out.append(word)
    return out


@dataclass(frozen=True)
class LabelTable:
    hi: tuple[str, ...]
    lo: tuple[str, ...]
    mul: int  # odd: x -> (mul * x + add) mod 2**LABEL_BITS is a bijection
    add: int

    def label(self, index: int) -> str:
        j = (self.mul * index + self.add) & (LABEL_SPACE - 1)
        return self.hi[j >> LO_BITS] + self.lo[j & LO_MASK]


# Endings of the HI part, distinct, so (syllable, syllable, ending) decodes uniquely.
_ENDINGS = ("", "k", "n", "s", "ra", "vo", "lek", "nik")


@functools.lru_cache(maxsize=16)
def label_table(seed: int) -> LabelTable:
    rng = random.Random(f"xfrbench-labels:{seed}")
    syllables = [c + v for c in CONSONANTS for v in VOWELS]
    first, second = syllables[:], syllables[:]
    endings = list(_ENDINGS)
    rng.shuffle(first)
    rng.shuffle(second)
    rng.shuffle(endings)
    ns = len(syllables)
    assert ns * ns * len(endings) >= 1 << HI_BITS
    # Built combinatorially (two fixed-length syllables + a distinct ending): unique by
    # construction and ~20x cheaper than drawing 32 k random words one by one.
    hi = [
        first[i % ns] + second[(i // ns) % ns] + endings[i // (ns * ns)]
        for i in range(1 << HI_BITS)
    ]
    lo_words = _unique(
        rng,
        (1 << LO_BITS) - len(_SUFFIX_WORDS),
        lambda r: _syllable(r) + _syllable(r) + CONSONANTS[int(r.random() * _NC)],
    )
    lo = lo_words + list(_SUFFIX_WORDS)
    rng.shuffle(lo)
    assert all(len(x) == LO_LEN for x in lo)
    mul = rng.getrandbits(LABEL_BITS) | 1
    add = rng.getrandbits(LABEL_BITS)
    return LabelTable(tuple(hi), tuple(lo), mul, add)


def ns_pool(seed: int, origin: str, size: int = 256) -> tuple[tuple[str, str], ...]:
    """Pairs of out-of-zone name servers of made-up hosting providers, busiest first."""
    rng = random.Random(f"xfrbench-pool:{seed}")
    pairs: list[tuple[str, str]] = []
    seen: set[str] = set()
    while len(pairs) < size:
        domain = _word(rng) + rng.choice(_POOL_STEMS) + "." + rng.choice(_POOL_TLDS)
        if domain in seen or is_subdomain(domain, origin):
            continue
        seen.add(domain)
        first, second = rng.choice(_POOL_NS_STYLES)
        pairs.append((f"{first}.{domain}", f"{second}.{domain}"))
    return tuple(pairs)


def is_subdomain(name: str, origin: str) -> bool:
    return origin == "." or name == origin or name.endswith("." + origin)


def skewed_index(rng: random.Random, size: int) -> int:
    """An index biased to the front, like real hosting market shares (a few big providers)."""
    return min(size - 1, int(size * rng.random() ** 3))


def ds_rdata(rng: random.Random) -> str:
    # key tag, ECDSAP256SHA256 (13), SHA-256 (2), 32-byte digest as 64 hex digits
    bits = rng.getrandbits(272)
    return f"{bits >> 256} 13 2 {bits & ((1 << 256) - 1):064X}"


_IPV4_FIRST = (
    31,
    37,
    46,
    77,
    78,
    81,
    82,
    85,
    89,
    91,
    93,
    94,
    95,
    109,
    146,
    176,
    178,
    185,
    188,
    193,
    194,
    195,
    212,
    213,
    217,
)


def ipv4(rng: random.Random) -> str:
    bits = rng.getrandbits(24)
    first = _IPV4_FIRST[int(rng.random() * len(_IPV4_FIRST))]
    return f"{first}.{bits >> 16}.{(bits >> 8) & 255}.{(bits & 255) % 254 + 1}"


def ipv6(rng: random.Random) -> str:
    bits = rng.getrandbits(48)
    return (
        f"2a0{bits % 10}:{(bits >> 4) & 0xFFFF:x}:{(bits >> 20) & 0xFFFF:x}::{(bits >> 36) + 1:x}"
    )
