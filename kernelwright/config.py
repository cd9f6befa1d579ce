"""One configuration object for every command.

Precedence, lowest to highest: built-in defaults < config file (TOML) < environment variables
(`KERNELWRIGHT_*`) < command-line flags. The config file is the first of: `--config FILE`,
`$KERNELWRIGHT_CONFIG`, `./kernelwright.toml`, `$KERNELWRIGHT_HOME/config.toml`.
"""

from __future__ import annotations

import contextvars
import os
import tomllib
from pathlib import Path
from typing import Any, Literal

import platformdirs
from pydantic import BaseModel, Field, SecretStr, ValidationError, model_validator
from pydantic_settings import (
    BaseSettings,
    InitSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from kernelwright.errors import ConfigError
from kernelwright.vocabulary import DeviceChoice, Policy, SandboxMode, StructuredOutput

ENV_PREFIX = "KERNELWRIGHT_"
_SECRETS: set[str] = set()  # every secret a Settings object was given: redacted from logs and evidence
_file_values: contextvars.ContextVar[dict[str, Any]] = contextvars.ContextVar("_file_values")


class RolePrices(BaseModel):
    """One role's prices (`llm_role_prices`), USD per 1,000 tokens; a price left out is the run's."""

    model_config = {"extra": "forbid"}

    in_per_1k: float | None = Field(default=None, ge=0, description="Prompt tokens.")
    out_per_1k: float | None = Field(default=None, ge=0, description="Completion tokens (reasoning included).")
    cached_in_per_1k: float | None = Field(default=None, ge=0, description="Prompt tokens read from the cache.")


class Settings(BaseSettings):
    """Every setting kernelwright reads. Each field can be set in the config file, as
    `KERNELWRIGHT_<FIELD>` in the environment, or (for some) by a command-line flag."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="forbid", validate_default=True)

    home: Path = Field(
        default_factory=lambda: Path(platformdirs.user_data_dir("kernelwright")),
        description="Folder for kernelwright's own state: memory database, build cache, "
        "torch.compile cache. Default: the platform's user data folder.",
    )
    runs_dir: Path = Field(
        default=Path("runs"), description="Folder holding one sub-folder per run (evidence, checkpoints)."
    )
    build_cache_dir: Path | None = Field(
        default=None, description="Content-addressed build cache for candidate kernels. Default: HOME/build-cache."
    )
    inductor_cache_dir: Path | None = Field(
        default=None, description="torch.compile (inductor) cache for baselines. Default: HOME/inductor-cache."
    )
    memory_db: Path | None = Field(
        default=None, description="SQLite database of candidates, results and lessons. Default: HOME/memory.sqlite."
    )
    device: DeviceChoice = Field(
        default=DeviceChoice.AUTO,
        description="Where candidates run: `cuda`, `cpu`, or `auto` (cuda when a GPU is visible).",
    )
    build_jobs: int = Field(default=0, ge=0, description="Parallel candidate builds; 0 means one per CPU core.")
    build_timeout_s: float = Field(default=600.0, gt=0, description="Time limit of one candidate build, seconds.")
    run_timeout_s: float = Field(
        default=300.0, gt=0, description="Time limit of one candidate's correctness or timing phase, seconds."
    )
    llm_base_url: str | None = Field(
        default=None, description="OpenAI-compatible endpoint (OpenAI, vLLM, SGLang, Ollama, OpenRouter)."
    )
    llm_model: str = Field(default="gpt-4.1", description="Model name sent to the LLM endpoint.")
    llm_api_key: SecretStr | None = Field(default=None, description="API key for the LLM endpoint.")
    llm_temperature: float = Field(default=0.2, ge=0, le=2, description="Sampling temperature of every role.")
    llm_max_tokens: int = Field(default=8192, gt=0, description="Most completion tokens one LLM reply may use.")
    llm_timeout_s: float | None = Field(
        default=None,
        gt=0,
        description="Time limit of one LLM request, seconds (between streamed bytes). Default: 120, or 600 for a "
        "role with a reasoning effort (a reasoning model may think for minutes before its first token).",
    )
    llm_reasoning_effort: str | None = Field(
        default=None,
        pattern=r"^[a-z]+$",
        description="`reasoning_effort` sent to every role's model (none, minimal, low, medium, high, ...: what "
        "the model accepts); unset: not sent. A model that refuses it has it dropped with a note.",
    )
    llm_planner_reasoning_effort: str | None = Field(
        default=None, pattern=r"^[a-z]+$", description="The planner's reasoning effort; None: `llm_reasoning_effort`."
    )
    llm_coder_reasoning_effort: str | None = Field(
        default=None, pattern=r"^[a-z]+$", description="The coder's reasoning effort; None: `llm_reasoning_effort`."
    )
    llm_reviewer_reasoning_effort: str | None = Field(
        default=None, pattern=r"^[a-z]+$", description="The reviewer's reasoning effort; None: `llm_reasoning_effort`."
    )
    llm_max_retries: int = Field(
        default=4, ge=0, description="Retries (exponential backoff) of a rate-limited (429) or failed (5xx) request."
    )
    llm_structured_output: StructuredOutput = Field(
        default=StructuredOutput.FUNCTION_CALLING,
        description="How plans and reviews come back: a tool call, a JSON schema, JSON mode, or JSON in the "
        "text (`plain_json`, for endpoints without function calling; the planner and reviewer get no tools then).",
    )
    llm_planner_model: str | None = Field(default=None, description="Model of the planner; None: `llm_model`.")
    llm_coder_model: str | None = Field(default=None, description="Model of the coder; None: `llm_model`.")
    llm_reviewer_model: str | None = Field(default=None, description="Model of the reviewer; None: `llm_model`.")
    llm_price_in_per_1k: float = Field(
        default=0.0, ge=0, description="USD per 1,000 prompt tokens, for the cost meter and the cost budget."
    )
    llm_price_out_per_1k: float = Field(
        default=0.0, ge=0, description="USD per 1,000 completion tokens (reasoning tokens are billed as completion)."
    )
    llm_price_cached_in_per_1k: float | None = Field(
        default=None,
        ge=0,
        description="USD per 1,000 prompt tokens read from the provider's cache; unset: the prompt price.",
    )
    llm_role_prices: dict[Literal["planner", "coder", "reviewer"], RolePrices] = Field(
        default_factory=dict,
        description="Prices of one role where it differs from the run's, e.g. `[llm_role_prices.coder]` with "
        "`in_per_1k` / `out_per_1k` / `cached_in_per_1k` (env: JSON). A role's own price beats the run's "
        "(`llm_price_*`, `--price-in` / `--price-out`).",
    )
    sandbox: SandboxMode = Field(
        default=SandboxMode.BEST_EFFORT,
        description="Candidate isolation: `best-effort` runs with whatever layers the machine offers "
        "(scrubbed environment, network namespace, Landlock, resource limits) and records which were in "
        "force; `strict` refuses to evaluate (exit 5) unless all of them are available.",
    )

    policy: Policy = Field(
        default=Policy.STRICT,
        description="What counts as the candidate's work: `strict` (KernelBench's rule) rejects a candidate whose "
        "library ops (aten, cuBLAS, cuDNN) take half the reference's time; `engineering` accepts library calls for "
        "part of the work beside at least one kernel of the candidate's own on the hot path, and reports their share. "
        "Every hack check applies under both.",
    )

    @model_validator(mode="after")
    def _derive_locations(self) -> Settings:
        self.home = self.home.expanduser()
        if self.build_cache_dir is None:
            self.build_cache_dir = self.home / "build-cache"
        if self.inductor_cache_dir is None:
            self.inductor_cache_dir = self.home / "inductor-cache"
        if self.memory_db is None:
            self.memory_db = self.home / "memory.sqlite"
        if self.llm_api_key is not None:
            _SECRETS.add(self.llm_api_key.get_secret_value())
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        file_source = InitSettingsSource(settings_cls, init_kwargs=_file_values.get({}))
        return (init_settings, env_settings, file_source)


def known_secrets() -> frozenset[str]:
    """Secret values any Settings in this process was given (for redaction, never for display)."""
    return frozenset(_SECRETS)


def find_config_file(explicit: Path | None = None) -> Path | None:
    """The config file in force, or None. An explicitly named file must exist."""
    if explicit is not None:
        if not explicit.is_file():
            raise ConfigError(f"config file {explicit} does not exist")
        return explicit
    env = os.environ.get(f"{ENV_PREFIX}CONFIG")
    if env:
        path = Path(env).expanduser()
        if not path.is_file():
            raise ConfigError(f"config file {path} (from {ENV_PREFIX}CONFIG) does not exist")
        return path
    local = Path("kernelwright.toml")
    if local.is_file():
        return local
    home = os.environ.get(f"{ENV_PREFIX}HOME")
    home_path = Path(home).expanduser() if home else Path(platformdirs.user_data_dir("kernelwright"))
    candidate = home_path / "config.toml"
    return candidate if candidate.is_file() else None


def load_settings(
    config_file: Path | None = None, *, home: Path | None = None, runs_dir: Path | None = None
) -> Settings:
    """Build the Settings: defaults < file < env < the global flags `--home` and `--runs-dir`
    (None: not given)."""
    overrides: dict[str, Any] = {"home": home, "runs_dir": runs_dir}
    path = find_config_file(config_file)
    file_values: dict[str, Any] = {}
    if path is not None:
        try:
            file_values = tomllib.loads(path.read_text())
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"cannot read config file {path}: {exc}") from exc
        file_values = file_values.get("kernelwright", file_values)
    token = _file_values.set(file_values)
    try:
        return Settings(**{k: v for k, v in overrides.items() if v is not None})
    except ValidationError as exc:
        where = f" (config file {path})" if path else ""
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'settings'}: {err['msg']}" for err in exc.errors()
        )
        raise ConfigError(f"{problems}{where}") from exc
    finally:
        _file_values.reset(token)
