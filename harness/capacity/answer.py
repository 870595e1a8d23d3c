"""A capacity search told in words (pure, from capacity.json's dicts): the answer first,
then the curve, then the evidence table; the what-if's answer and how far it moved.

    capacity: 48 secondaries within p95 load time 30 s (49 fails: 52.3 s);
    binding: BIND transfers-out 10 (1,214 refusals logged at 49)
"""

from __future__ import annotations

from typing import Any

from harness.core import fmt

# Candidates read as counts of what their servers logged (no share of a limit to show).
COUNTED = {"quota", "retry", "harness-cpu"}


def load_text(load: float | None) -> str:
    if load is None:
        return "-"
    return f"{int(load):,}" if float(load).is_integer() else f"{load:g}"


def unit_of(key: str) -> str:
    """What a load of `key` counts, in the answer's words."""
    last = key.rsplit(".", 1)[-1]
    if key.startswith("secondaries.") and last == "count":
        return "secondaries"
    return {
        "zones": "zones",
        "records": "records",
        "interval": "serials a minute",
        "members": "catalog members",
    }.get(last, key)


def _figure(step: dict[str, Any] | None, sla: dict[str, Any]) -> str:
    if step is None:
        return "-"
    value = step.get("figure")
    if value is None:
        return "not reached"
    return fmt.count(value) + " failed" if sla["kind"] == "no-failures" else fmt.duration(value)


def _step(search: dict[str, Any], load: float | None) -> dict[str, Any] | None:
    found = [s for s in search["result"]["steps"] if s["load"] == load]
    return found[-1] if found else None


def binding_text(search: dict[str, Any]) -> str:
    line = search.get("binding")
    if line is None:
        return "none stood out"
    at = search["result"]["first_fail"]
    reading = line["at_fail"] or line["at_pass"]
    where = f" at {load_text(at)}" if at is not None else ""
    return f"{line['title']} ({reading['text']}{where})"


def answer(search: dict[str, Any], unit: str, sla: dict[str, Any]) -> str:
    """The one line that opens every view of a search."""
    result = search["result"]
    capacity, fail = result["capacity"], result["first_fail"]
    within = sla["text"]
    if result["reached_max"]:
        head = (
            f"capacity: at least {load_text(capacity)} {unit} within {within} "
            f"(nothing failed up to --max {load_text(capacity)})"
        )
        closest = search.get("binding")
        tail = f"closest: {binding_text(search)}" if closest else "no limit came close"
        return f"{head}; {tail}"
    failing = f"{load_text(fail)} fails: {_figure(_step(search, fail), sla)}"
    if capacity is None:
        head = f"capacity: below {load_text(fail)} {unit} within {within} ({failing})"
    else:
        head = f"capacity: {load_text(capacity)} {unit} within {within} ({failing})"
    return f"{head}; binding: {binding_text(search)}"


def curve_rows(search: dict[str, Any], sla: dict[str, Any]) -> list[list[str]]:
    """load, verdict, figure, interval, repeats, run: one row per step, by load."""
    rows = []
    for step in sorted(search["result"]["steps"], key=lambda s: (s["load"])):
        low, high = step.get("low"), step.get("high")
        if sla["kind"] == "no-failures":
            interval = f"{fmt.count(low)} to {fmt.count(high)}"
        else:
            interval = f"{fmt.duration(low)} to " + (
                "not reached" if high is None else fmt.duration(high)
            )
        rows.append(
            [
                load_text(step["load"]),
                step["verdict"] + (" (too noisy to call)" if step["verdict"] == "noisy" else ""),
                _figure(step, sla),
                interval,
                str(step["repeats"]),
                step.get("run") or "-",
            ]
        )
    return rows


def evidence_rows(search: dict[str, Any]) -> list[list[str]]:
    """candidate, at the last pass, at the first fail, moved with the load."""
    rows = []
    named = (search.get("binding") or {}).get("candidate")
    for line in search.get("evidence", []):

        def cell(reading: dict[str, Any] | None) -> str:
            if reading is None:
                return "-"
            close = reading["closeness"]
            if close is None or reading["candidate"] in COUNTED:
                return str(reading["text"])
            return f"{close:.0%} of its limit: {reading['text']}"

        title = line["title"] + (" <- binding" if line["candidate"] == named else "")
        moved = "-" if line["at_pass"] is None else "yes" if line["moved"] else "no"
        rows.append([title, cell(line["at_pass"]), cell(line["at_fail"]), moved])
    return rows


def moved_text(before: dict[str, Any], after: dict[str, Any], unit: str) -> str:
    """How far the what-if moved the capacity, and the next limit."""
    old, new = before["result"]["capacity"], after["result"]["capacity"]
    if old is None or new is None:
        change = f"{load_text(old)} -> {load_text(new)} {unit}"
    else:
        change = f"{load_text(old)} -> {load_text(new)} {unit} ({new - old:+g})"
    if after["result"]["reached_max"]:
        change += f", at least: --max {load_text(new)} passed"
    return f"what if {after['label']}: capacity {change}; next limit: {binding_text(after)}"


def compare_lines(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """Two campaigns (an upgrade: did capacity move?): each one's answers, then how far its
    first search's capacity moved; refused by the caller when they vary different keys."""
    out = []
    for name, data in (("A", before), ("B", after)):
        for one in data["searches"]:
            out.append(f"{name} {data['campaign']} ({one['label']}): {one['answer']}")
    first, second = before["searches"][0], after["searches"][0]
    moved = moved_text(first, second | {"label": f"B ({after['campaign']})"}, before["unit"])
    out.append(moved.replace("what if ", "from A to ", 1))
    return out
