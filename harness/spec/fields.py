"""The base of every scenario model and the field types that read units.

``Strict`` rejects unknown keys and freezes the model. ``Duration``, ``Rate``, ``Size`` and
``Percent`` accept the unit spellings of ``harness.core.units`` and hold base values: seconds,
bits per second, bytes and percent.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationInfo

from harness.core import units


def _wrap(parser: Any) -> Any:
    def parse(value: Any) -> Any:
        if value is None:
            return None
        return parser(value)

    return BeforeValidator(parse)


Duration = Annotated[float, _wrap(units.parse_duration)]  # seconds
Rate = Annotated[int, _wrap(units.parse_rate)]  # bits per second
Size = Annotated[int, _wrap(units.parse_size)]  # bytes


def _percent(value: Any, info: ValidationInfo) -> Any:
    """Bare numbers are refused where a person wrote them (a scenario file: its validation
    carries the context `written`), and read as percent elsewhere (programmatic specs)."""
    if value is None:
        return None
    written = bool(info.context and info.context.get("written"))
    return units.parse_percent(value, written=written)


Percent = Annotated[float, BeforeValidator(_percent)]  # 0..100


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=False, frozen=True)
