"""A link in words, as a scenario file would say it: 'delay 50ms, loss random 1%'.

Works on the JSON form of a direction (what case.json stores and `model_dump` gives), so
the dry run, the terminal summary and the report describe links with the same words.
"""

from __future__ import annotations

from typing import Any

from harness.core.units import format_duration, format_rate


def describe_direction(direction: dict[str, Any]) -> str:
    parts = [f"delay {format_duration(float(direction.get('delay') or 0))}"]
    if direction.get("jitter"):
        parts.append(f"jitter {format_duration(float(direction['jitter']))}")
    loss = direction.get("loss") if isinstance(direction.get("loss"), dict) else {}
    assert isinstance(loss, dict)
    p = loss.get("p") or loss.get("p13")
    if p:
        parts.append(f"loss {loss.get('model', 'random')} {p:g}%")
    if direction.get("rate"):
        parts.append(f"rate {format_rate(float(direction['rate']))}")
    if direction.get("mtu") not in (None, 1500):
        parts.append(f"mtu {direction['mtu']}")
    return ", ".join(parts)


def describe_link(link: dict[str, Any]) -> str | None:
    """Both directions in one line; None when `link` is not a link's JSON form."""
    forward, reverse = link.get("forward"), link.get("reverse")
    if not isinstance(forward, dict) or not isinstance(reverse, dict):
        return None
    there, back = describe_direction(forward), describe_direction(reverse)
    if there == back:
        return f"{there} (each way)"
    return f"primary->secondary {there}; secondary->primary {back}"
