"""The Problem model: what the loader knows about a problem file without running it."""

from __future__ import annotations

import re
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

_CONSTRAINT = re.compile(r"^(any|positive|nonnegative|unit|mask|fixed|distribution|indices)(?::(\d+))?$")


class InputConstraint(StrEnum):
    """How the fuzzer may redraw one input of `get_inputs()`.

    any          any finite values (default for floating tensors)
    positive     values > 0 (e.g. inputs of log, sqrt, divisors)
    nonnegative  values >= 0
    unit         values in [0, 1) (probabilities, dropout masks)
    distribution non-negative, summing to 1 over the last dim (targets of KL divergence)
    mask         0/1 (or bool) values of the input's own dtype
    indices      integer indices; `indices:N` bounds them to [0, N)
    fixed        never redrawn (shape tensors, lookup tables the model relies on)
    """

    ANY = "any"
    POSITIVE = "positive"
    NONNEGATIVE = "nonnegative"
    UNIT = "unit"
    DISTRIBUTION = "distribution"
    MASK = "mask"
    INDICES = "indices"
    FIXED = "fixed"


def parse_constraint(text: str) -> tuple[InputConstraint, int | None]:
    """`"indices:1000"` -> (INDICES, 1000); `"positive"` -> (POSITIVE, None)."""
    match = _CONSTRAINT.match(text.strip())
    if match is None:
        allowed = ", ".join(c.value for c in InputConstraint)
        raise ValueError(f"unknown input constraint {text!r} (allowed: {allowed}; `indices:N` bounds indices)")
    bound = int(match.group(2)) if match.group(2) else None
    return InputConstraint(match.group(1)), bound


class ProblemMeta(BaseModel):
    """The optional `PROBLEM = {...}` dict of a problem file (KernelBench files lack it)."""

    model_config = ConfigDict(extra="forbid")

    level: int | None = Field(default=None, ge=1, le=4, description="KernelBench-style level, 1 to 4.")
    tags: list[str] = Field(default_factory=list, description="Free-form tags, e.g. 'matmul', 'reduction'.")
    dtype: str = Field(default="float32", description="The dtype the problem computes in.")
    atol: float | None = Field(default=None, gt=0, description="Absolute tolerance override.")
    rtol: float | None = Field(default=None, gt=0, description="Relative tolerance override.")
    description: str = Field(default="", description="One line saying what the problem computes.")
    region: dict[str, str] | None = Field(
        default=None,
        description="Where an extracted region came from (`kernelwright model extract --region`): kind "
        "('module'), path (the dotted submodule path in the model) and spec (FILE.py:FACTORY).",
    )
    input_constraints: dict[int, str] = Field(
        default_factory=dict,
        description="Per position in get_inputs(): how the fuzzer may redraw it (see InputConstraint).",
    )

    @field_validator("input_constraints")
    @classmethod
    def _check_constraints(cls, value: dict[int, str]) -> dict[int, str]:
        for text in value.values():
            parse_constraint(text)
        return value

    @field_validator("dtype")
    @classmethod
    def _check_dtype(cls, value: str) -> str:
        allowed = {"float32", "float16", "bfloat16", "float64", "int32", "int64"}
        if value not in allowed:
            raise ValueError(f"dtype must be one of {sorted(allowed)}, not {value!r}")
        return value

    def constraint(self, index: int) -> tuple[InputConstraint, int | None]:
        text = self.input_constraints.get(index)
        return parse_constraint(text) if text else (InputConstraint.ANY, None)

    def tolerance(self) -> tuple[float, float]:
        """(atol, rtol): the problem's override, else dtype-aware defaults (fp32 1e-4, fp16/bf16 1e-2)."""
        default = 1e-2 if self.dtype in ("float16", "bfloat16") else 1e-4
        return (self.atol or default, self.rtol or default)


class Problem(BaseModel):
    """A problem file as the loader sees it: parsed and checked statically, not yet run."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(description="Short name: the file stem without its numeric id ('relu', 'Matmul').")
    stem: str = Field(description="The file stem, e.g. '19_ReLU'.")
    id: int | None = Field(default=None, description="The numeric id of a KernelBench-style file name.")
    level: int | None = None
    path: Path
    source: str = Field(repr=False)
    sha256: str
    meta: ProblemMeta
    builtin: bool = False
    has_small: bool = Field(default=False, description="Defines get_small_inputs() for quick CPU runs.")
    has_variants: bool = Field(default=False, description="Defines get_input_variants() (held-out shapes).")

    @property
    def qualified(self) -> str:
        return f"level{self.level}/{self.stem}" if self.level else self.stem

    def summary(self) -> dict[str, Any]:
        """A JSON-friendly description (what `problems list --json` prints)."""
        return {
            "name": self.name,
            "qualified": self.qualified,
            "level": self.level,
            "id": self.id,
            "path": str(self.path),
            "sha256": self.sha256,
            "builtin": self.builtin,
            "dtype": self.meta.dtype,
            "tags": self.meta.tags,
            "description": self.meta.description,
            "has_small": self.has_small,
            "has_variants": self.has_variants,
        }
