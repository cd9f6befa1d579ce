"""AgentConfig: everything one optimization run is asked to do, built in one call.

`AgentConfig.from_settings(settings, **flags)` merges the settings (LLM endpoint, locations) with
the command's flags; `AgentConfig.from_runnable_config(config)` is how a node gets it back from
LangGraph's RunnableConfig. Live objects (chat models, the evaluation session, the event stream)
are not configuration: they travel in `Deps` (see `deps.py`).
"""

from __future__ import annotations

import os
import secrets
import time
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal, get_args

from langchain_core.runnables import RunnableConfig

from kernelwright.config import Settings
from kernelwright.errors import UsageError

Role = Literal["planner", "coder", "reviewer"]
ROLES: tuple[Role, ...] = ("planner", "coder", "reviewer")
StructuredMethod = Literal["function_calling", "json_schema", "json_mode", "plain_json"]


def new_run_id(problem: str) -> str:
    """A sortable, unique, file-name-safe run id: `20261123-182400-relu-a1b2`."""
    safe = "".join(c if c.isalnum() or c in "-_" else "-" for c in problem)[:40]
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{safe}-{secrets.token_hex(2)}"


@dataclass(frozen=True)
class RoleModel:
    """Which model a role talks to, and how."""

    model: str
    temperature: float = 0.2
    max_tokens: int = 8192


@dataclass(frozen=True)
class AgentConfig:
    problem: str
    run_id: str
    runs_dir: Path
    device: Literal["cpu", "cuda"] = "cpu"
    backend: Literal["cuda", "triton", "cpp"] = "cpp"
    size: Literal["default", "small"] = "default"
    policy: Literal["strict", "engineering"] = "strict"
    timing: bool = True
    timing_cap_s: float | None = None
    num_threads: int | None = None
    target: float = 1.0
    max_rounds: int = 8
    max_tokens: int = 2_000_000
    max_cost_usd: float = 20.0
    max_wall_s: float = 3600.0
    max_gpu_s: float | None = None
    """GPU-time budget in seconds: the evaluations' device phases and Nsight Compute (None: none)."""
    no_improvement_rounds: int = 4
    coder_retries: int = 2
    no_code_retries: int = 2
    width: int = 1
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    roles: dict[str, RoleModel] = field(default_factory=dict)
    request_timeout_s: float = 120.0
    max_retries: int = 4
    structured_method: StructuredMethod = "function_calling"
    price_in_per_1k: float = 0.0
    price_out_per_1k: float = 0.0
    scripted: str | None = None
    approve_plans: bool = False
    """Steering point: pause before the coder (a LangGraph interrupt) so a person can approve or edit the plan."""
    feedback_chars: int = 1500
    tool_rounds: int = 4
    """Planner and reviewer: at most this many rounds of tool calls before they must answer."""
    tool_result_chars: int = 2000
    branch_from: str | None = None
    """The run this one branched from (`--from RUN_ID`)..."""
    branch_candidate: int | None = None
    """...and the candidate of that run its first plan starts from (`--from-candidate N`)."""
    memory: bool = True
    """Read and write the memory database (`--no-memory`: neither)."""
    memory_db: Path | None = None
    """The memory database (the `memory_db` setting)."""
    memory_tokens: int = 1500
    """The planner prompt's budget for what memory recalls (estimated tokens)."""

    @property
    def run_dir(self) -> Path:
        return self.runs_dir / self.run_id

    def role(self, role: Role) -> RoleModel:
        return self.roles.get(role) or RoleModel(model="gpt-4.1")

    @classmethod
    def from_settings(cls, settings: Settings, **flags: Any) -> AgentConfig:
        """Settings (endpoint, key, models, sampling, timeouts, prices, runs folder), then OPENAI_*
        from the environment where the settings leave a gap, then `flags` (None values ignored).
        `model` sets every role; `planner_model` / `coder_model` / `reviewer_model` set one (a flag
        beats `llm_<role>_model`, which beats `model` / `llm_model`)."""
        flags = {k: v for k, v in flags.items() if v is not None}
        model = flags.pop("model", None) or settings.llm_model
        temperature = flags.pop("temperature", settings.llm_temperature)
        max_tokens_out = flags.pop("max_output_tokens", settings.llm_max_tokens)
        per_role = {
            "planner": settings.llm_planner_model,
            "coder": settings.llm_coder_model,
            "reviewer": settings.llm_reviewer_model,
        }
        roles: dict[str, RoleModel] = {
            r: RoleModel(
                model=flags.pop(f"{r}_model", None) or per_role[r] or model,
                temperature=temperature,
                max_tokens=max_tokens_out,
            )
            for r in ROLES
        }
        key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else os.environ.get("OPENAI_API_KEY")
        base_url = settings.llm_base_url or os.environ.get("OPENAI_BASE_URL")
        problem = flags.pop("problem")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(flags) - known)
        if unknown:
            raise TypeError(f"unknown AgentConfig field(s): {', '.join(unknown)}")
        base = cls(
            problem=problem,
            run_id=flags.pop("run_id", None) or new_run_id(problem),
            runs_dir=Path(settings.runs_dir),
            base_url=base_url,
            api_key=key,
            roles=roles,
            request_timeout_s=settings.llm_timeout_s,
            max_retries=settings.llm_max_retries,
            structured_method=settings.llm_structured_output,
            price_in_per_1k=settings.llm_price_in_per_1k,
            price_out_per_1k=settings.llm_price_out_per_1k,
            policy=settings.policy,
            memory_db=settings.memory_db,
        )
        config = replace(base, **flags)
        config.validate()
        return config

    def with_credentials(self, settings: Settings) -> AgentConfig:
        """The same config with the API key and endpoint from the settings / OPENAI_* env (a
        resumed run's config.json never holds the key)."""
        key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else os.environ.get("OPENAI_API_KEY")
        return replace(
            self, api_key=key, base_url=self.base_url or settings.llm_base_url or os.environ.get("OPENAI_BASE_URL")
        )

    def validate(self) -> None:
        if self.structured_method not in get_args(StructuredMethod):
            choices = ", ".join(get_args(StructuredMethod))
            raise UsageError(f"--structured-output must be one of {choices}, not {self.structured_method!r}")
        if self.target <= 0:
            raise UsageError(f"--target must be positive, not {self.target}")
        if self.width < 1:
            raise UsageError("--width must be at least 1")
        if self.max_gpu_s is not None and self.max_gpu_s <= 0:
            raise UsageError(f"--max-gpu-time must be positive, not {self.max_gpu_s:g}")
        if self.max_rounds < 1:
            raise UsageError("--rounds must be at least 1")
        if self.tool_rounds < 0:
            raise UsageError("tool_rounds must be 0 or more")
        if self.memory_tokens < 0:
            raise UsageError("memory_tokens must be 0 or more")
        if self.backend in ("cuda", "triton") and self.device == "cpu":
            raise UsageError(f"--backend {self.backend} needs --device cuda", hint="use --backend cpp on the CPU")

    @classmethod
    def from_runnable_config(cls, config: RunnableConfig | None) -> AgentConfig:
        """The run's AgentConfig from LangGraph's config (`configurable.agent_config`)."""
        configurable = (config or {}).get("configurable", {})
        value = configurable.get("agent_config")
        if not isinstance(value, cls):
            raise TypeError("the graph was invoked without configurable.agent_config (an AgentConfig)")
        return value
