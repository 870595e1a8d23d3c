"""Every generated zone loads cleanly in named-checkzone, kzonecheck and nsd-checkzone."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from harness.zonegen import ZoneSpec, change_set, generate

pytestmark = [
    pytest.mark.servers,
    pytest.mark.xdist_group("zone-checkers"),  # its zones generated once (module fixture)
]

CHECKERS = {
    # -k/-n/-m/-M/-S/-r fail: every name and integrity warning is an error (stricter than
    # named at load time). -i local: the default "full" also resolves out-of-zone NS/MX
    # targets through the system resolver, ~35 s of timeouts per zone without a network.
    "named-checkzone": lambda origin, path: [
        "named-checkzone",
        "-i",
        "local",
        "-k",
        "fail",
        "-n",
        "fail",
        "-m",
        "fail",
        "-M",
        "fail",
        "-S",
        "fail",
        "-r",
        "fail",
        origin,
        str(path),
    ],
    "kzonecheck": lambda origin, path: ["kzonecheck", "-o", origin, str(path)],
    "nsd-checkzone": lambda origin, path: ["nsd-checkzone", origin, str(path)],
}

SPECS = {
    "tiny": ZoneSpec("tiny", 2, "example."),
    "tld-5k": ZoneSpec("tld", 5_000, "cz.", seed=11),
    "tld-odd": ZoneSpec("tld", 5_003, "test.", seed=12),
    "hosting": ZoneSpec("hosting", 12, "hosting.example.", zones=4),
    "hosting-min": ZoneSpec("hosting", 3, "hosting.example.", zones=2),
    "hosting-big": ZoneSpec("hosting", 30, "hosting.example.", zones=2),
    "tiny-signed": ZoneSpec("tiny", 2, "example.", signed=True),
    "tld-signed": ZoneSpec("tld", 2_000, "cz.", signed=True),
    "hosting-signed": ZoneSpec("hosting", 12, "hosting.example.", zones=2, signed=True),
}


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("zonecache")


def check(checker: str, origin: str, path: Path) -> None:
    argv = CHECKERS[checker](origin, path)
    if shutil.which(argv[0]) is None:
        pytest.skip(f"{argv[0]} not installed")
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=300)
    assert proc.returncode == 0, f"{' '.join(argv)}:\n{proc.stdout}\n{proc.stderr}"
    # belt and braces: no checker may even mention an error or a warning
    text = (proc.stdout + proc.stderr).lower()
    assert "error" not in text and "warning" not in text, text


@pytest.mark.parametrize("checker", sorted(CHECKERS))
@pytest.mark.parametrize("name", sorted(SPECS))
def test_presets_load(cache_dir: Path, name: str, checker: str) -> None:
    result = generate(SPECS[name], cache_dir=cache_dir)
    for f in result.files:
        check(checker, f.origin, f.path)


@pytest.mark.parametrize("checker", sorted(CHECKERS))
@pytest.mark.parametrize(
    ("name", "changes"), [("tld-5k", 20), ("tld-odd", 3), ("hosting", 5), ("tiny", 1)]
)
def test_change_set_zones_load(cache_dir: Path, name: str, changes: int, checker: str) -> None:
    spec = SPECS[name]
    for k in (1, 2):
        cs = change_set(spec, spec.serial + k, changes, cache_dir=cache_dir)
        check(checker, cs.origin, cs.zone_path)
