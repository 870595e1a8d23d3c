"""The emulated link between two hosts ([link], [uplink], a site's link): per direction its
delay, jitter, loss model, duplication, reordering, rate and MTU, and the emulator to use.

Keys at the top of a link table apply to both directions; [link.forward] (primary ->
secondary, the way a zone travels) and [link.reverse] override them.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, model_validator

from harness.spec.fields import Duration, Percent, Rate, Strict


class LossSpec(Strict):
    """Loss models with netem's parameter meanings (percentages)."""

    model: Literal["random", "gemodel", "state"] = "random"
    p: Percent = 0.0  # random: loss probability; gemodel: good->bad transition
    correlation: Percent = 0.0  # random only
    r: Percent | None = None  # gemodel: bad->good transition (default 100 - p)
    h: Percent | None = None  # gemodel: 1-h = loss probability in the bad state (default 100)
    k: Percent | None = None  # gemodel: 1-k = loss probability in the good state (default 0)
    p13: Percent | None = None
    p31: Percent | None = None
    p32: Percent | None = None
    p23: Percent | None = None
    p14: Percent | None = None

    @model_validator(mode="after")
    def _fields_fit_model(self) -> LossSpec:
        allowed = {
            "random": {"model", "p", "correlation"},
            "gemodel": {"model", "p", "r", "h", "k"},
            "state": {"model", "p13", "p31", "p32", "p23", "p14"},
        }[self.model]
        extra = sorted(self.model_fields_set - allowed)
        if extra:
            raise ValueError(
                f"{', '.join(extra)} do not apply to loss model {self.model!r}; "
                f"allowed: {', '.join(sorted(allowed))}"
            )
        if self.model == "state" and self.p13 is None:
            raise ValueError("loss model 'state' needs at least p13")
        return self

    @property
    def active(self) -> bool:
        if self.model == "random":
            return self.p > 0
        if self.model == "gemodel":
            return self.p > 0
        return bool(self.p13)


def loss_shorthand(value: Any) -> Any:
    # loss = "1%" is random loss; a table selects a model.
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        return {"model": "random", "p": value}
    return value


class DirectionSpec(Strict):
    delay: Duration = 0.0
    jitter: Duration = 0.0
    jitter_distribution: Literal["uniform", "normal", "pareto", "paretonormal"] = "normal"
    delay_correlation: Percent = 0.0
    loss: Annotated[LossSpec, BeforeValidator(loss_shorthand)] = LossSpec()
    duplicate: Percent = 0.0
    reorder: Percent = 0.0
    reorder_gap: int = Field(default=0, ge=0)
    rate: Rate | None = None
    mtu: int = Field(default=1500, ge=576, le=9000)

    @model_validator(mode="after")
    def _jitter_below_delay(self) -> DirectionSpec:
        if self.jitter > 0 and self.delay == 0:
            raise ValueError("jitter needs a delay greater than 0")
        if self.reorder > 0 and self.delay == 0:
            raise ValueError("reorder needs a delay greater than 0 (reordered packets skip it)")
        return self

    @property
    def impaired(self) -> bool:
        """True when packets must pass through the emulator (not only a rate limit or MTU)."""
        return bool(self.delay or self.jitter or self.loss.active or self.duplicate or self.reorder)


# One direction's keys: also allowed at the top of a link table, for both directions.
DIRECTION_KEYS = set(DirectionSpec.model_fields)


class LinkSpec(Strict):
    forward: DirectionSpec = DirectionSpec()  # primary -> secondary
    reverse: DirectionSpec = DirectionSpec()  # secondary -> primary
    backend: Literal["auto", "netem", "linkem"] = "auto"
    mss_clamp: bool = False
    seed: int = Field(default=1, ge=0)

    @model_validator(mode="before")
    @classmethod
    def _spread_common(cls, data: Any) -> Any:
        """Keys at the top of [link] are defaults for both directions."""
        if not isinstance(data, dict):
            return data
        common = {k: v for k, v in data.items() if k in DIRECTION_KEYS}
        rest = {k: v for k, v in data.items() if k not in DIRECTION_KEYS}
        for direction in ("forward", "reverse"):
            own = rest.get(direction, {})
            if isinstance(own, dict):
                rest[direction] = {**common, **own}
        return rest

    @property
    def impaired(self) -> bool:
        return self.forward.impaired or self.reverse.impaired
