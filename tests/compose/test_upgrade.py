"""An upgrade gate end to end: scenarios/quick.toml run against BIND 9.18 (bookworm) and
against BIND 9.20 (bookworm-backports) on the compose backend, then `xfrbench compare`: the
scenarios differ only in their servers' suite, so they compare as they are, and compare
prints its benchstat-style tables."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness import spec
from harness.cli import main
from harness.compose import daemon, images
from harness.compose.backend import Backend
from harness.results.folder import read_run
from harness.run.runner import run_scenario

pytestmark = [pytest.mark.root, pytest.mark.compose, pytest.mark.slow]

QUICK = Path(__file__).resolve().parents[2] / "scenarios" / "quick.toml"
OLD, NEW = "bookworm", "bookworm-backports"  # BIND 9.18 and 9.20


@pytest.fixture(scope="module")
def upgrade_images() -> Iterator[None]:
    if os.geteuid() != 0:
        pytest.skip("needs root (dockerd, debootstrap, namespaces)")
    ours_before = daemon.started_dockerd()
    plan = images.ImagePlan(servers=(OLD, NEW), link_suite=OLD)
    try:
        for step in images.build_images(plan):
            print(step.describe())
        yield
    finally:
        if ours_before is None and daemon.started_dockerd() is not None:
            daemon.stop_dockerd()


def with_suite(text: str, suite: str) -> str:
    """quick.toml with both servers from another Debian suite."""
    for role in ("primary", "secondary"):
        header = f'[servers.{role}]\nkind = "bind"\n'
        assert header in text
        text = text.replace(header, f'{header}suite = "{suite}"\n')
    return text


def test_quick_against_bind_9_18_and_9_20(
    upgrade_images: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = {}
    for name, suite in (("old", OLD), ("new", NEW)):
        path = tmp_path / f"{name}.toml"
        # Its whole matrix with 3 repeats of its 5: enough for the gate's table, shorter CI.
        text = with_suite(QUICK.read_text(), suite)
        assert "\nrepeats = 5\n" in text
        path.write_text(text.replace("\nrepeats = 5\n", "\nrepeats = 3\n"))
        loaded = spec.load(path)
        runs[name] = run_scenario(
            loaded, results_root=tmp_path, run_id=name, backend=Backend("compose")
        )
        meta, records = read_run(runs[name])
        versions = {s.version for s in meta.servers.values()}
        assert all(str(v).startswith("9.18." if name == "old" else "9.20.") for v in versions)
        assert len(records) == len(loaded.cases) * loaded.scenario.repeats
    capsys.readouterr()

    status = main(["compare", str(runs["old"]), str(runs["new"])])
    out, err = capsys.readouterr()
    with capsys.disabled():
        print(out)  # the table, for the test log (pytest -s)
    assert status in (0, 1), err  # a regression of 9.20 is the gate's answer, not the test's
    assert "  servers.primary.suite: bookworm -> bookworm-backports" in out
    assert "  bind version: 9.18." in out and "-> 9.20." in out
    lines = out.splitlines()
    for title in ("duration (trigger to served)", "CPU per transfer", "peak memory",
                  "TIME_WAIT peak"):  # fmt: skip
        assert title in lines, title
    table = lines[lines.index("duration (trigger to served)") :]
    rows = [line for line in table if line.startswith("│ ")]
    assert sum("ms ±" in row for row in rows) >= 16  # a line per case, medians in ms
    assert any(row.startswith("│ geomean (16 cases)") for row in rows)
    assert lines[-1].endswith("(exit 1)" if status else "(exit 0)")

    status_json = main(["compare", str(runs["old"]), str(runs["new"]), "--json"])
    data = json.loads(capsys.readouterr().out)
    assert data["exit_status"] == status == status_json
