"""Loading the packaged spec table (`gpus.yaml`) and looking GPUs up in it."""

from __future__ import annotations

import functools
import logging
from importlib import resources
from typing import Any

import yaml
from pydantic import ValidationError

from kernelwright.errors import InternalError, UsageError
from kernelwright.hardware_specs.matching import Match, NoMatch, match
from kernelwright.hardware_specs.schema import GpuSpec, SpecTable

log = logging.getLogger(__name__)

# Top-level YAML blocks that exist only to define anchors the entries cite.
_ANCHOR_BLOCKS = ("references", "limits_by_cc", "features_by_arch")


def parse_table(text: str) -> SpecTable:
    """Parse and validate a table document (the packaged one, or a test's)."""
    raw: Any = yaml.safe_load(text)
    if not isinstance(raw, dict):
        raise ValueError("the spec table must be a mapping with a `gpus` list")
    body = {k: v for k, v in raw.items() if k not in _ANCHOR_BLOCKS}
    return SpecTable.model_validate(body)


@functools.cache
def load_table() -> SpecTable:
    """The packaged table, validated once per process. A broken table is a bug: InternalError."""
    text = resources.files("kernelwright.hardware_specs").joinpath("gpus.yaml").read_text(encoding="utf-8")
    try:
        return parse_table(text)
    except (ValidationError, ValueError, yaml.YAMLError) as exc:
        raise InternalError(f"the packaged GPU spec table is invalid: {exc}") from exc


def known_gpus() -> list[str]:
    return [spec.name for spec in load_table().gpus]


def find(gpu: str) -> Match | NoMatch:
    """Match without raising (live detection uses this: an unknown GPU is not an error)."""
    return match(gpu, load_table().gpus)


def lookup(gpu: str) -> Match:
    """Match a user-given name; unknown or ambiguous names are a UsageError naming the choices."""
    found = find(gpu)
    if isinstance(found, NoMatch):
        raise UsageError(found.message, hint=f"known GPUs: {', '.join(known_gpus())}")
    if found.note:
        log.debug(found.note)
    return found


def get_spec(gpu: str) -> GpuSpec:
    """The table entry for a name or alias, case-insensitive ('h100' -> H100 SXM)."""
    return lookup(gpu).spec
