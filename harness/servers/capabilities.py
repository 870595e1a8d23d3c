"""What a server version can do (structured, never prose to grep) and about how much memory
it holds: the values each dialect's `capabilities(version)` and `footprint` give, which the
plan reads to declare a case unsupported, with the reason, or a fleet too large."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Footprint:
    """About how much memory one server of a kind holds while it takes a zone: a base, and
    bytes per record and per zone (measured here: servers' RSS during transfers of the tld
    and hosting presets). An estimate to refuse fleets that cannot fit, not a figure."""

    base_mib: float
    record_bytes: float
    zone_bytes: float

    def bytes_for(self, records: int, zones: int) -> float:
        return self.base_mib * 2**20 + records * self.record_bytes + zones * self.zone_bytes


@dataclass(frozen=True)
class Support:
    """One capability of one version: whether it has it, and why not when it has not."""

    ok: bool
    reason: str = ""

    @classmethod
    def since(cls, version: tuple[int, int, int], first: tuple[int, int, int], why: str) -> Support:
        return cls(True) if version >= first else cls(False, why)


@dataclass(frozen=True)
class Capabilities:
    """What one installed version can do: XoT and IXFR in each role, and TSIG. `caveats`:
    known problems that do not stop a case (a bug on lossy links, say), shown beside its
    results."""

    xot_primary: Support
    xot_secondary: Support
    ixfr_primary: Support  # serves IXFR (out)
    ixfr_secondary: Support  # asks for and applies IXFR (in)
    tsig: Support  # signs and checks transfers and NOTIFYs with TSIG, in both roles
    # A secondary that can be told to ask AXFR only (it asks IXFR of a primary that provides
    # it otherwise), and a primary whose reconfiguration stops it providing IXFR (it answers
    # an IXFR with the whole zone) while it keeps its history: the two ways an AXFR case
    # sharing its servers with IXFR cases gets AXFRs.
    axfr_only_secondary: Support
    withholds_ixfr_primary: Support
    caveats: tuple[str, ...] = ()
    # Asks for and applies IXFR of a zone that carries its own DNSSEC records.
    ixfr_signed_secondary: Support = Support(True)
    # Serves, as a primary, a zone that carries its own DNSSEC records exactly as its file.
    signed_primary: Support = Support(True)

    @property
    def notes(self) -> tuple[str, ...]:
        missing = (
            self.xot_primary,
            self.xot_secondary,
            self.ixfr_primary,
            self.ixfr_secondary,
            self.tsig,
        )
        return tuple(dict.fromkeys(s.reason for s in missing if not s.ok)) + self.caveats
