"""Fast zone writers, presets and IXFR change sets (their digests: harness.xfr.digest).

Presets (``ZoneSpec.preset``):

- ``tiny``: SOA + one NS (2 records), the smallest zone every server loads.
- ``tld``: a delegation-only zone like .cz: SOA, 4 apex NS with glue, then delegations with
  2 NS each (10 % in-bailiwick with A + AAAA glue), 40 % with a DS. Exactly ``records``
  records; written as text at over a million records per second in bounded memory.
- ``hosting``: ``zones`` small zones ``<label>.<origin>`` of a hosting mix (SOA, 2 NS, A, AAAA,
  www CNAME, mail A + MX, SPF TXT, ftp/webmail/smtp A, then hostN A), ``records`` each (3+).

Output is a pure function of the spec (same spec, same bytes, same digest), except signed
zones (fresh keys, randomized ECDSA): those are reproducible only through the cache, and for
them ``records`` counts the unsigned input while ``ZoneFile.records`` counts the signed file.

Files go to a cache (``<repo>/zones/cache``, or ``$XFRBENCH_ZONE_CACHE``, or ``cache_dir``)
keyed by every field of the spec and ``GENERATOR_VERSION``; see cache.py for atomicity.
"""

from harness.zonegen.changes import change_set
from harness.zonegen.diff import apply_diff, read_diff
from harness.zonegen.generate import generate
from harness.zonegen.model import (
    GENERATOR_VERSION,
    ChangeSet,
    GeneratedZones,
    ZoneFile,
    ZoneSpec,
    validate,
)

__all__ = [
    "GENERATOR_VERSION",
    "ChangeSet",
    "GeneratedZones",
    "ZoneFile",
    "ZoneSpec",
    "apply_diff",
    "change_set",
    "generate",
    "read_diff",
    "validate",
]
