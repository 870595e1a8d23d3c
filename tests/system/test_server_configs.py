"""Each dialect's rendered config, with the options an operator sets, passes the server's own
config checker (named-checkconf, knotc conf-check, nsd-checkconf): the journal knobs land
where the server reads them (a server option, or each zone's)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from harness.core.terms import ServerKind
from harness.servers import DIALECTS, ServerSetup, ZoneEntry, make_server
from harness.xfr.secrets import new_tsig

pytestmark = pytest.mark.servers

JOURNALS: dict[ServerKind, dict[str, int | str | bool]] = {
    "bind": {"max-journal-size": "8k", "ixfr-from-differences": False},
    "knot": {"journal-max-depth": 2, "journal-max-usage": "1M"},
    "nsd": {"ixfr-number": 2, "ixfr-size": 4096},
}


def checker(kind: ServerKind, config: Path) -> list[str]:
    return {
        "bind": ["named-checkconf", str(config)],
        "knot": ["knotc", "-c", str(config), "conf-check"],
        "nsd": ["nsd-checkconf", str(config)],
    }[kind]


@pytest.mark.parametrize("kind", sorted(JOURNALS))
def test_journal_options_render_where_the_server_reads_them(
    kind: ServerKind, tmp_path: Path
) -> None:
    zone = tmp_path / "example.zone"
    zone.write_text("")
    setup = ServerSetup(
        role="primary",
        address="198.18.0.1",
        peers=("198.18.0.2",),
        zones=[ZoneEntry("example.", zone)],
        workdir=tmp_path / kind,
        options=dict(JOURNALS[kind]),
        update_key=new_tsig(name="xfrbench-update."),
    )
    server = make_server(kind, setup, Path("/usr/sbin") / DIALECTS[kind].daemon)
    server.render()
    text = server.config.read_text()
    result = subprocess.run(checker(kind, server.config), capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    if kind == "bind":
        assert "max-journal-size 8k;" in text
        assert text.count("ixfr-from-differences") == 1 and "ixfr-from-differences no;" in text
    elif kind == "knot":  # template options, after the template's id
        template = text.split("template:")[1].split("zone:")[0]
        assert "journal-max-depth: 2" in template and "journal-max-usage: 1M" in template
        # A primary takes new versions by update, signed with the harness's key only.
        assert "action: update" in text and "harness_update" in template
    else:  # each zone's
        assert "ixfr-number: 2" in text.split("zone:")[1]
