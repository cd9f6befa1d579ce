"""Which coder sample a request is, and how hot it is drawn (#31).

With `--ideas N --width K` one coder turn sends N x K requests at once, and they finish in any
order. Two things follow from that, both decided here:

- **The key.** Every request carries its `SampleKey` (round, idea, sample, turn) in the
  `metadata` of the RunnableConfig it is streamed with (`metadata_of`). LangChain hands metadata to
  callbacks and tracers only, never to the endpoint, so a real OpenAI client sends the same request
  as without it; the scripted model (`scripted.py`) reads it back (`key_of`) and answers a keyed
  reply by it, so a scripted run is reproducible whatever order its replies finish in.
- **The temperature.** Sample k of an idea is drawn at `temperature_schedule(...)[k - 1]`: by
  default every sample at the coder's temperature (`--temperature-schedule flat`), or spread up
  to 1.0 (`spread`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from langchain_core.language_models import BaseChatModel

from kernelwright.vocabulary import TemperatureSchedule

METADATA_KEY = "kernelwright_sample"
"""The RunnableConfig metadata entry that names a request's sample: `[round, idea, sample, turn]`."""
TEMPERATURE_CAP = 1.0
"""The hottest a sample is drawn: the OpenAI API's default temperature (and the only one its
reasoning models take), so no sample is hotter than what the provider itself calls normal."""


@dataclass(frozen=True, order=True)
class SampleKey:
    """One coder request of a run: `round`; `idea` and `sample`, both from 1 (idea i of the round,
    sample k of that idea's `--width`); `turn`, the round's coder turn (1 its first drafts; each
    repair or retry of the round the next)."""

    round: int
    idea: int
    sample: int
    turn: int = 1

    def as_tuple(self) -> tuple[int, int, int, int]:
        return (self.round, self.idea, self.sample, self.turn)


@dataclass(frozen=True)
class Sample:
    """What a request is for: its key and the temperature it is drawn at (None: the model's own)."""

    key: SampleKey
    temperature: float | None


def temperature_schedule(
    base: float | None,
    width: int,
    schedule: TemperatureSchedule = TemperatureSchedule.FLAT,
    cap: float = TEMPERATURE_CAP,
) -> list[float | None]:
    """The temperatures of an idea's `width` samples under `schedule`.

    - `flat` (the default): every sample at `base`. The samples still differ: each is its own
      draw, and a scripted or seeded model keys them apart (`SampleKey`).
    - `spread`: the first at `base`, the others spread evenly up to `cap` (sample k at
      `base + (cap - base) * (k - 1) / (width - 1)`, to 2 decimals). The idea behind it: K samples
      of one prompt at a low temperature are near copies (the repeated-sampling results, Large
      Language Monkeys and the like, come from drawing hot), while far above 1.0 code models break
      syntax more often than they find ideas. A base at or above the cap is kept for every sample
      (the schedule never cools what was asked for).

    Why flat is the default: the search benchmark (benchmarks/search/README.md, 30 seeds, three
    settings) found spread no better than flat (2x2: 58 vs 60 of 90 runs reached the target; 1x4:
    63 vs 65), under a stand-in whose hotter samples repeat less, reach further and break more.
    Spread stays a setting for endpoints where hot samples pay; either way `--width 1` draws the
    one sample at `base`. None (the endpoint's default, or a model that refused temperature)
    stays None."""
    if width < 1:
        raise ValueError("width must be at least 1")
    if base is None:
        return [None] * width
    if schedule not in tuple(TemperatureSchedule):
        raise ValueError(f"unknown temperature schedule {schedule!r}")
    if schedule == TemperatureSchedule.FLAT or width == 1 or base >= cap:
        return [base] * width
    return [round(base + (cap - base) * k / (width - 1), 2) for k in range(width)]


def metadata_of(sample: Sample | None) -> dict[str, Any]:
    """The RunnableConfig metadata that names a request's sample (empty for a request of no sample)."""
    if sample is None:
        return {}
    return {METADATA_KEY: list(sample.key.as_tuple())}


def key_of(metadata: Mapping[str, Any] | None) -> SampleKey | None:
    """The sample a request's metadata names, or None (a planner or reviewer request, or a caller
    that names none)."""
    value = (metadata or {}).get(METADATA_KEY)
    if not isinstance(value, list | tuple) or len(value) != 4:
        return None
    return SampleKey(*(int(v) for v in value))


def at_temperature(model: BaseChatModel, temperature: float | None) -> BaseChatModel:
    """The model drawing at `temperature`; unchanged when it has no temperature set (its default
    stands, or the endpoint refused the parameter and `mending.without` left it out), or when
    `temperature` is None or already its own."""
    current = getattr(model, "temperature", None)
    if (
        temperature is None
        or current is None
        or current == temperature
        or "temperature" not in type(model).model_fields
    ):
        return model
    return model.model_copy(update={"temperature": temperature})


def as_role_model(used: BaseChatModel, base: BaseChatModel) -> BaseChatModel:
    """The role's model to keep after a sample's call: the model the call ended with (a refused
    parameter left out), at the role's own temperature again, unless temperature itself was refused."""
    kept = getattr(base, "temperature", None)
    if getattr(used, "temperature", None) is None or kept is None or "temperature" not in type(used).model_fields:
        return used
    return used if used.temperature == kept else used.model_copy(update={"temperature": kept})  # type: ignore[attr-defined]
