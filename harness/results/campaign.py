"""A campaign folder: several runs of one question, linked (`xfrbench capacity`'s search).

    results/<campaign-id>/
        capacity.json      the question, each step (its load, verdict, figure and run id),
                           the answer and its evidence, rewritten after every step
        capacity.html      the same drawn as a page: the answer, the curve, the evidence
        steps/<NN>-<load>  a link to each step's own run folder, results/<run-id>/

The steps are ordinary run folders beside it (report and compare read them as any run);
the campaign only links them, so deleting it loses no measurement. Written here, as every
file of the results, and read back by `read_campaign`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from harness.core.errors import UserInputError
from harness.results.access import read_text
from harness.results.store import check_new_run_folder, new_run_id, write_json_atomic

CAPACITY_JSON = "capacity.json"
CAPACITY_HTML = "capacity.html"
STEPS = "steps"


def new_campaign(root: Path, campaign_id: str | None = None) -> Path:
    """Make results/<campaign-id>/ (refused when another's files are there)."""
    folder = check_new_run_folder(root, campaign_id or f"capacity-{new_run_id()}")
    (folder / STEPS).mkdir(parents=True, exist_ok=True)
    return folder


def link_step(campaign: Path, index: int, label: str, run_dir: Path) -> Path:
    """steps/<NN>-<label> -> the step's run folder (relative, so the results move whole)."""
    link = campaign / STEPS / f"{index:02d}-{label}"
    target = os.path.relpath(run_dir.resolve(), link.parent.resolve())
    if link.is_symlink():
        link.unlink()
    link.symlink_to(target, target_is_directory=True)
    return link


def write_campaign(campaign: Path, data: dict[str, Any]) -> Path:
    path = campaign / CAPACITY_JSON
    write_json_atomic(path, data)
    return path


def read_campaign(folder: Path) -> dict[str, Any]:
    """capacity.json of a campaign folder; exit 2 when it is not one."""
    path = Path(folder) / CAPACITY_JSON
    try:
        data = json.loads(read_text(path, Path(folder)))
    except FileNotFoundError:
        raise UserInputError(
            f"{folder} is not a capacity campaign (no {CAPACITY_JSON})",
            fix="give a folder written by `xfrbench capacity`",
        ) from None
    except json.JSONDecodeError as exc:
        raise UserInputError(f"not valid JSON: {exc}", file=path) from None
    if not isinstance(data, dict):
        raise UserInputError("not a JSON object", file=path)
    return data
