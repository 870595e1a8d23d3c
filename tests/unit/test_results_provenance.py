"""Provenance parsers on captured /proc text."""

from __future__ import annotations

from harness.results import provenance

CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 1
model name\t: AMD EPYC
stepping\t: 1
flags\t\t: fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov

processor\t: 1
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC
flags\t\t: fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov
"""

CPUINFO_ARM = """processor\t: 0
BogoMIPS\t: 108.00
CPU implementer\t: 0x41
CPU part\t: 0xd08

processor\t: 1
BogoMIPS\t: 108.00

Hardware\t: BCM2835
"""

MEMINFO = """MemTotal:       24684096 kB
MemFree:        23400860 kB
MemAvailable:   24161188 kB
Buffers:            5304 kB
"""

OS_RELEASE = 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nNAME="Debian GNU/Linux"\n'


def test_cpuinfo() -> None:
    assert provenance.parse_cpuinfo(CPUINFO) == {"cpu_model": "AMD EPYC", "cpu_count": 2}
    assert provenance.parse_cpuinfo(CPUINFO_ARM) == {"cpu_model": "BCM2835", "cpu_count": 2}
    assert provenance.parse_cpuinfo("") == {"cpu_model": None, "cpu_count": None}


def test_meminfo_and_os_release() -> None:
    assert provenance.parse_meminfo(MEMINFO) == {
        "mem_total_bytes": 24684096 * 1024,
        "mem_available_bytes": 24161188 * 1024,
    }
    assert provenance.parse_os_release(OS_RELEASE) == "Debian GNU/Linux 12 (bookworm)"
    assert provenance.parse_os_release("") is None


def test_git_status() -> None:
    assert provenance.parse_git_status("") is False
    assert provenance.parse_git_status(" M harness/cli.py\n?? new.py\n") is True


def test_collect_has_the_facts_run_json_needs() -> None:
    facts = provenance.collect()
    for name in ("hostname", "kernel", "cpu_model", "cpu_count", "mem_total_bytes", "python"):
        assert facts[name]
    assert "git_commit" in facts and "git_dirty" in facts
    assert facts["packages"]["dnspython"]
