"""The first screen (pure): which of the report's answers this run leads with, which follow,
and which have nothing to say for it, with why.

A run asks one question, told by its trigger and its shape: a fault run how its
secondaries healed, a stream how fast its serials reached the fleet, a catalog how fast
its consumers provisioned its members, a fleet whether it
converged, a cold start how long its secondaries took to serve every zone, an update or
pull run what each transport costs. Each question is a `Question` in `QUESTIONS`, tried in
order (a fleet under a fault asks the fault's question); it names the sections it leads
with and the sections that say nothing for it whatever their data. The other sections
follow when they have something to say; those that do not are named in one line at the end
(`FirstScreen.left_out_line`), in the HTML report and the terminal summary alike.

A new kind of run adds its question with `register` (before the one it refines) and its
section: a name in `SECTIONS`, a template `section_<name>.html.j2` beside report.html.j2 and
a printer in text.py's `PRINTERS`. Nothing else orders sections.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # data.py imports this module for ReportData.screen
    from harness.report.data import ReportData


@dataclass(frozen=True)
class Section:
    name: str
    title: str  # as the report's heading says it
    has: Callable[[ReportData], bool]  # whether it has anything to say for this run
    empty: str  # why it has nothing, when it has not
    anchor: str = ""  # its heading's id in report.html ("q-<name>" unless given)
    nav: str = ""  # its word in the page's navigation (the name unless given)

    @property
    def id(self) -> str:
        return self.anchor or self.name

    @property
    def word(self) -> str:
        return self.nav or self.name


SECTIONS: dict[str, Section] = {
    s.name: s
    for s in (
        Section(
            "transports",
            "What each transport costs",
            lambda d: bool(d.transports),
            "no server pair, zone and kind ran both TCP and another transport",
            "q-transports",
        ),
        Section(
            "phases",
            "Where the time went",
            lambda d: bool(d.phases),
            "no transfer was timed in phases",
            "q-phases",
            "where the time went",
        ),
        Section(
            "link",
            "Did the link do what was asked",
            lambda d: bool(d.links or d.real_paths),
            "no verified transfer recorded the emulator's counters",
            "q-link",
            "the link",
        ),
        Section(
            "bound",
            "How close to the bound",
            lambda d: bool(d.bounds or d.bounds_missing),
            "no verified server-to-server transfer with a byte count",
            "q-bound",
            "the bound",
        ),
        Section("fleet", "Fleet", lambda d: d.fleet is not None, "one secondary per case"),
        Section("faults", "Faults", lambda d: d.faults is not None, "no fault was asked for"),
        Section("stream", "Change stream", lambda d: d.stream is not None, "not a stream"),
        Section("cold-start", "Cold start", lambda d: bool(d.cold_starts), "no cold start"),
        Section("catalog", "Catalog zones", lambda d: bool(d.catalog), "no catalog"),
    )
}
# The order of the sections that follow a question's lead.
ORDER = tuple(SECTIONS)
# Sections said only where their question is asked: a run that is no stream has no stream
# section to miss, so the line at the end does not name them.
OWN = ("fleet", "faults", "stream", "cold-start", "catalog")


@dataclass(frozen=True)
class Question:
    name: str  # "transports", "fleet", "stream", "faults", "cold-start", ...
    asks: Callable[[ReportData], bool]
    lead: tuple[str, ...]  # the sections it opens with, in order
    # Sections that say nothing for this question even with data, and why.
    silent: dict[str, str] = field(default_factory=dict)


QUESTIONS: list[Question] = [
    Question(
        "faults",
        lambda d: d.faults is not None,
        ("faults", "link"),
        {
            "bound": "a faulted transfer is broken on purpose: its throughput says nothing "
            "of the link's bound",
            "transports": "a fault run compares how each transport heals (the faults table), "
            "not what it costs",
        },
    ),
    Question(
        "stream",
        lambda d: d.stream is not None,
        ("stream", "link"),
        {
            "phases": "a stream's serials are not timed in phases: their latency runs from "
            "the primary serving each (the stream's table)",
            "bound": "a stream's transfers are deltas timed from the primary serving them, "
            "not from connect: no throughput to set against the bound",
            "transports": "a stream compares no transports",
        },
    ),
    Question(
        "catalog",
        lambda d: bool(d.catalog),
        ("catalog", "link"),
        {
            "phases": "a catalog's members are timed from the primary serving the catalog "
            "version that names them (the catalog's table), not in a transfer's phases",
            "bound": "a member's provisioning is paced by the consumer, not by the link: no "
            "throughput to set against the bound",
            "transports": "a catalog run compares no transports",
        },
    ),
    Question(
        "cold-start",
        lambda d: bool(d.cold_starts),
        ("cold-start", "link", "phases"),
        {"transports": "a cold start compares no transports"},
    ),
    Question("fleet", lambda d: d.fleet is not None, ("fleet", "link")),
    Question("transports", lambda d: True, ("transports", "phases", "link", "bound")),
]


def register(question: Question, before: str = "transports") -> None:
    """Add a question (catalog, capacity) ahead of `before`, the one it refines."""
    at = next(i for i, q in enumerate(QUESTIONS) if q.name == before)
    QUESTIONS.insert(at, question)


def add_section(section: Section, after: str | None = None) -> None:
    """Add a section to the order (after `after`, else at the end)."""
    global ORDER
    SECTIONS[section.name] = section
    order = [name for name in ORDER if name != section.name]
    order.insert(order.index(after) + 1 if after in order else len(order), section.name)
    ORDER = tuple(order)


@dataclass(frozen=True)
class FirstScreen:
    question: str
    shown: list[str]  # section names, in order
    left_out: list[tuple[str, str]]  # (section title, why)

    @property
    def nav(self) -> list[tuple[str, str]]:
        """(anchor, word) of each section shown, in order."""
        return [(SECTIONS[n].id, SECTIONS[n].word) for n in self.shown]

    @property
    def templates(self) -> list[str]:
        return [f"section_{name.replace('-', '_')}.html.j2" for name in self.shown]

    @property
    def left_out_line(self) -> str | None:
        if not self.left_out:
            return None
        return (
            "Not shown, as nothing in it applies to this run: "
            + "; ".join(f"{title} ({why})" for title, why in self.left_out)
            + "."
        )


def first_screen(data: ReportData) -> FirstScreen:
    question = next(q for q in QUESTIONS if q.asks(data))
    shown: list[str] = []
    left_out: list[tuple[str, str]] = []
    for name in [*question.lead, *(n for n in ORDER if n not in question.lead)]:
        section = SECTIONS[name]
        if name in question.silent:
            left_out.append((section.title, question.silent[name]))
        elif section.has(data):
            shown.append(name)
        elif name not in OWN:
            left_out.append((section.title, section.empty))
    return FirstScreen(question.name, shown, left_out)
