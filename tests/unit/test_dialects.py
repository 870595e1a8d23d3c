"""What every dialect says about its installation, held to the lists that install it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.core.terms import SERVER_KINDS
from harness.remote import fleet
from harness.servers import DIALECTS

MAKEFILE = Path(__file__).resolve().parents[2] / "Makefile"


def _make_list(name: str) -> set[str]:
    """The words of a Makefile variable, its continuation lines included."""
    text = MAKEFILE.read_text()
    match = re.search(rf"^{name} := ((?:.*\\\n)*.*)$", text, re.M)
    assert match, name
    return set(match[1].replace("\\\n", " ").split())


def test_every_kind_has_a_dialect() -> None:
    assert set(DIALECTS) == set(SERVER_KINDS)


@pytest.mark.parametrize("kind", SERVER_KINDS)
def test_make_setup_installs_each_dialect_and_stops_its_services(kind: str) -> None:
    dialect = DIALECTS[kind]
    assert dialect.packages and set(dialect.packages) <= _make_list("APT_PACKAGES")
    assert dialect.services and set(dialect.services) <= _make_list("SERVICES")
    # A real host of an inventory gets the same.
    assert set(dialect.packages) <= set(fleet.PACKAGES)
    assert set(dialect.services) <= set(fleet.SERVICES)
