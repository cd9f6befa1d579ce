"""The words every layer shares: where candidates run, how big the inputs are, which policy and
which sandbox judge them, which backend the agent writes in, how structured replies come back.

Each is a `StrEnum`, so a member is its string (`Device.CUDA == "cuda"`, JSON and files hold the
plain value) and a typer option typed with one lists its choices in `--help` and rejects any
other value. Written once here, not as a `Literal[...]` in every module that passes them on.
Imports nothing from kernelwright: every layer may import it.
"""

from __future__ import annotations

from enum import StrEnum


class Device(StrEnum):
    """Where candidates run, once resolved (never `auto`)."""

    CPU = "cpu"
    CUDA = "cuda"


class DeviceChoice(StrEnum):
    """What the settings and `--device` may ask for: a device, or `auto` (cuda when a GPU is visible)."""

    AUTO = "auto"
    CUDA = "cuda"
    CPU = "cpu"


class Size(StrEnum):
    """The problem's input sizes: its own (`default`) or its small variant (quick CPU runs)."""

    DEFAULT = "default"
    SMALL = "small"


class Policy(StrEnum):
    """What counts as the candidate's work (`Settings.policy`, `harness/reasons.py`)."""

    STRICT = "strict"
    ENGINEERING = "engineering"


class SandboxMode(StrEnum):
    """Candidate isolation: all layers or refuse (`strict`), or whatever the machine offers."""

    STRICT = "strict"
    BEST_EFFORT = "best-effort"


class Backend(StrEnum):
    """The language the agent writes candidates in."""

    CUDA = "cuda"
    TRITON = "triton"
    CPP = "cpp"


class StructuredOutput(StrEnum):
    """How plans and reviews come back from the LLM (`Settings.llm_structured_output`)."""

    FUNCTION_CALLING = "function_calling"
    JSON_SCHEMA = "json_schema"
    JSON_MODE = "json_mode"
    PLAIN_JSON = "plain_json"


class TemperatureSchedule(StrEnum):
    """The temperatures of an idea's `--width` samples (`agent/sampling.temperature_schedule`)."""

    FLAT = "flat"
    """Every sample at the coder's temperature: the default (benchmarks/search/README.md: the spread
    schedule did not beat it)."""
    SPREAD = "spread"
    """The first sample at the coder's temperature, the others evenly up to 1.0."""
