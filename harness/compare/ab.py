"""`xfrbench compare RUN --axis KEY`: the two sides of one interleaved A/B run (pure, but for
``load_and_compare_axis``).

An A/B run holds two server versions (a suite, a binary, a config) as one matrix axis, e.g.

    [matrix]
    "servers.primary.options" = [{label = "default"},
                                 {label = "one-answer", transfer-format = "one-answer"}]

and its slots are interleaved like transports, so that whatever the machine does over the
run (a warming cache, a neighbour's load) reaches both sides alike: the run-to-run component
two separate runs carry is not in the comparison. A is the axis's first value and B its
second (`--a`/`--b` pick others); each A case is matched with the B case whose other axes,
transport and kind agree (cases/<visit>/.../case.json holds each case's axes), both are
renamed to the name they share without the axis, and the two halves go through the same
gate as two runs (compare/gate.py)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from harness.compare.gate import Comparison, compare_runs
from harness.core.errors import UserInputError
from harness.results.folder import RunFolder, open_run
from harness.results.meta import CaseMeta


def token(value: Any) -> str:
    """One axis value as case.json holds it (a label, or the value itself), comparable."""
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def value_name(value: Any) -> str:
    """As a case name shows it: a label, "k=v,k2=v2" for a table, the value else."""
    if isinstance(value, dict):
        return ",".join(f"{k}={value_name(v)}" for k, v in value.items())
    return str(value)


def axis_values(folder: RunFolder, axis: str) -> list[Any]:
    """The axis's values in the scenario's order (labels for labelled tables), else in the
    order the cases name them."""
    matrix = folder.meta.scenario.get("matrix") if folder.meta.scenario else None
    listed = matrix.get(axis) if isinstance(matrix, dict) else None
    if isinstance(listed, list) and listed:
        return [v["label"] if isinstance(v, dict) and "label" in v else v for v in listed]
    seen: dict[str, Any] = {}
    for meta in folder.cases:
        if axis in meta.axes:
            seen.setdefault(token(meta.axes[axis]), meta.axes[axis])
    return list(seen.values())


def _pick(values: list[Any], wanted: str | None, default: int, flag: str, axis: str) -> Any:
    if wanted is None:
        return values[default]
    for value in values:
        if wanted in (value_name(value), token(value)):
            return value
    raise UserInputError(
        f"{axis} has no value {wanted!r}",
        key=flag,
        fix=f"pick one of: {', '.join(value_name(v) for v in values)}",
    )


def _partner_key(meta: CaseMeta, axis: str) -> str:
    others = {k: token(v) for k, v in meta.axes.items() if k != axis}
    tail = meta.case.rsplit("/", 1)[-1]  # the xfr, or a fault's label after it
    return json.dumps([others, meta.transport, meta.xfr, tail], sort_keys=True)


def shared_name(name_a: str, name_b: str) -> str:
    """The case name both sides share: the segments where they differ (the axis's) left
    out; A's name when they differ in length."""
    parts_a, parts_b = name_a.split("/"), name_b.split("/")
    if len(parts_a) != len(parts_b):
        return name_a
    return "/".join(a for a, b in zip(parts_a, parts_b, strict=True) if a == b)


def pairs(folder: RunFolder, axis: str, a: Any, b: Any) -> tuple[dict[str, str], dict[str, str]]:
    """(A's case -> shared name, B's case -> shared name); an A case without a B partner
    keeps its name (the gate then names it as missing in B)."""
    metas = list(folder.case_metas.values())  # one per case: a case visited twice has two
    mine_a = [m for m in metas if axis in m.axes and token(m.axes[axis]) == token(a)]
    mine_b = {_partner_key(m, axis): m for m in metas
              if axis in m.axes and token(m.axes[axis]) == token(b)}  # fmt: skip
    names_a: dict[str, str] = {}
    names_b: dict[str, str] = {}
    for meta in mine_a:
        partner = mine_b.pop(_partner_key(meta, axis), None)
        shared = meta.case if partner is None else shared_name(meta.case, partner.case)
        names_a[meta.case] = shared
        if partner is not None:
            names_b[partner.case] = shared
    for meta in mine_b.values():
        names_b[meta.case] = meta.case
    return names_a, names_b


def _renamed(folder: RunFolder, names: dict[str, str], side: str) -> RunFolder:
    """The run folder cut to one side's cases, each under its shared name."""
    records = [replace(r, case=names[r.case]) for r in folder.records if r.case in names]
    samples = None
    if folder.samples is not None:
        samples = [s | {"case": names[s["case"]]} for s in folder.samples
                   if s.get("case") in names]  # fmt: skip
    summary = None
    if folder.summary is not None:
        resources = folder.summary.get("resources") or {}
        summary = {"resources": {names[c]: v for c, v in resources.items() if c in names}}
    cases = [meta.model_copy(update={"case": names[meta.case]}) for meta in folder.cases
             if meta.case in names]  # fmt: skip
    path = folder.path.parent / f"{folder.path.name} [{side}]"
    return RunFolder(path, folder.meta, records, summary, cases, samples)


def split_axis(
    folder: RunFolder, axis: str, a: str | None = None, b: str | None = None
) -> tuple[RunFolder, RunFolder, str]:
    """The two sides of an A/B run as two run folders, and the axis as printed."""
    known = sorted({key for meta in folder.cases for key in meta.axes})
    if axis not in known:
        raise UserInputError(
            f"{folder.path} has no matrix axis {axis!r}"
            + (f" (its axes: {', '.join(known)})" if known else " (it has no matrix axis)"),
            key="--axis",
            fix="give one of its [matrix] keys, e.g. --axis servers.primary.options",
        )
    values = axis_values(folder, axis)
    if len(values) < 2:
        raise UserInputError(
            f"the axis {axis} of {folder.path} has one value: nothing to compare",
            key="--axis",
            fix="an A/B run's axis has two values: A first, B second",
        )
    side_a, side_b = _pick(values, a, 0, "--a", axis), _pick(values, b, 1, "--b", axis)
    if token(side_a) == token(side_b):
        raise UserInputError(f"--a and --b are both {value_name(side_a)}", key="--b",
                             fix="pick two different values of the axis")  # fmt: skip
    names_a, names_b = pairs(folder, axis, side_a, side_b)
    name_a, name_b = value_name(side_a), value_name(side_b)
    return (
        _renamed(folder, names_a, name_a),
        _renamed(folder, names_b, name_b),
        f"{axis}: {name_a} -> {name_b}",
    )


def compare_axis(
    folder: RunFolder, axis: str, *, a: str | None = None, b: str | None = None, **options: Any
) -> Comparison:
    side_a, side_b, described = split_axis(folder, axis, a, b)
    result = compare_runs(side_a, side_b, same_run=True, **options)
    result.axis = described
    return result


def load_and_compare_axis(
    run: Path, axis: str, *, a: str | None = None, b: str | None = None, **options: Any
) -> Comparison:
    return compare_axis(open_run(run), axis, a=a, b=b, **options)
