"""AgentConfig: everything one optimization run is asked to do, built in one call.

`AgentConfig.from_settings(settings, problem, RunFlags(...))` merges the settings (LLM endpoint,
locations) with the command's flags, each a typed field of `RunFlags`; `AgentConfig.from_runnable_config(config)` is how a node gets it back from
LangGraph's RunnableConfig. Live objects (chat models, the evaluation session, the event stream)
are not configuration: they travel in `Deps` (see `deps.py`).
"""

from __future__ import annotations

import os
import secrets
import time
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal, TypeVar

from langchain_core.runnables import RunnableConfig

from kernelwright.agent.prices import PRICE_TABLE_DATE, Price, known_price
from kernelwright.config import Settings
from kernelwright.errors import UsageError
from kernelwright.vocabulary import Backend, Device, Policy, Size, StructuredOutput, TemperatureSchedule

T = TypeVar("T")
Role = Literal["planner", "coder", "reviewer"]
ROLES: tuple[Role, ...] = ("planner", "coder", "reviewer")
DEFAULT_TIMEOUT_S = 120.0
"""One LLM request's time limit when none is set (httpx's: between bytes, so a streamed reply may
take longer as a whole as long as it keeps coming)."""
REASONING_TIMEOUT_S = 600.0
"""The same for a role with a reasoning effort: such a model may think for minutes before its first
streamed token (Chat Completions streams no reasoning), so it gets the OpenAI client's own default."""


def problem_name(problem: str) -> str:
    """The name a run id shows for a problem: a file's stem (`~/ops/my_relu.py` and
    `my_relu.py:Factory` are `my_relu`), a built-in's name as given (`relu`, `level1/1_relu`)."""
    ref = problem.split(":", 1)[0] if ".py:" in problem else problem
    return Path(ref).stem if ref.endswith(".py") else problem


def new_run_id(problem: str) -> str:
    """A sortable, unique, file-name-safe run id: `20261123-182400-relu-a1b2`. A problem given as
    a file is named by its stem, not its path."""
    safe = "".join(c if c.isalnum() or c in "-_" else "-" for c in problem_name(problem))[:40]
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{safe}-{secrets.token_hex(2)}"


@dataclass(frozen=True)
class RoleModel:
    """Which model a role talks to, and how. The prices None: the run's (`AgentConfig.price_*`)."""

    model: str
    temperature: float = 0.2
    max_tokens: int = 8192
    reasoning_effort: str | None = None
    """Sent as `reasoning_effort` (none, minimal, low, medium, high, ...) to a reasoning model; None: not sent."""
    price_in_per_1k: float | None = None
    price_out_per_1k: float | None = None
    price_cached_in_per_1k: float | None = None


@dataclass(frozen=True)
class RunFlags:
    """What a command's flags (or a form, or a batch) ask of one run, each field typed; None: not
    given, so the settings' value (else AgentConfig's default) stands. The fields named like
    AgentConfig's set them; `model`, the per-role models, `temperature`, `max_output_tokens` and
    `reasoning_effort` make the roles' `RoleModel`s."""

    device: Device | None = None
    backend: Backend | None = None
    size: Size | None = None
    policy: Policy | None = None
    timing: bool | None = None
    timing_cap_s: float | None = None
    num_threads: int | None = None
    target: float | None = None
    max_rounds: int | None = None
    max_tokens: int | None = None
    max_cost_usd: float | None = None
    max_wall_s: float | None = None
    max_gpu_s: float | None = None
    no_improvement_rounds: int | None = None
    coder_retries: int | None = None
    no_code_retries: int | None = None
    width: int | None = None
    temperature_schedule: TemperatureSchedule | None = None
    ideas: int | None = None
    seed: int | None = None
    base_url: str | None = None
    request_timeout_s: float | None = None
    max_retries: int | None = None
    structured_method: StructuredOutput | None = None
    price_in_per_1k: float | None = None
    price_out_per_1k: float | None = None
    price_cached_in_per_1k: float | None = None
    scripted: str | None = None
    approve_plans: bool | None = None
    feedback_chars: int | None = None
    tool_rounds: int | None = None
    tool_result_chars: int | None = None
    memory: bool | None = None
    memory_tokens: int | None = None
    # the roles' models and sampling (not AgentConfig fields: they make `AgentConfig.roles`)
    model: str | None = None
    planner_model: str | None = None
    coder_model: str | None = None
    reviewer_model: str | None = None
    temperature: float | None = None
    max_output_tokens: int | None = None
    reasoning_effort: str | None = None

    def applied_to(self, config: AgentConfig) -> AgentConfig:
        """`config` with every field these flags give set (the role flags excepted: see `from_settings`)."""

        def given(flag: T | None, value: T) -> T:
            return value if flag is None else flag

        c = config
        return replace(
            config,
            device=given(self.device, c.device),
            backend=given(self.backend, c.backend),
            size=given(self.size, c.size),
            policy=given(self.policy, c.policy),
            timing=given(self.timing, c.timing),
            timing_cap_s=given(self.timing_cap_s, c.timing_cap_s),
            num_threads=given(self.num_threads, c.num_threads),
            target=given(self.target, c.target),
            max_rounds=given(self.max_rounds, c.max_rounds),
            max_tokens=given(self.max_tokens, c.max_tokens),
            max_cost_usd=given(self.max_cost_usd, c.max_cost_usd),
            max_wall_s=given(self.max_wall_s, c.max_wall_s),
            max_gpu_s=given(self.max_gpu_s, c.max_gpu_s),
            no_improvement_rounds=given(self.no_improvement_rounds, c.no_improvement_rounds),
            coder_retries=given(self.coder_retries, c.coder_retries),
            no_code_retries=given(self.no_code_retries, c.no_code_retries),
            width=given(self.width, c.width),
            temperature_schedule=given(self.temperature_schedule, c.temperature_schedule),
            ideas=given(self.ideas, c.ideas),
            seed=given(self.seed, c.seed),
            base_url=given(self.base_url, c.base_url),
            request_timeout_s=given(self.request_timeout_s, c.request_timeout_s),
            max_retries=given(self.max_retries, c.max_retries),
            structured_method=given(self.structured_method, c.structured_method),
            price_in_per_1k=given(self.price_in_per_1k, c.price_in_per_1k),
            price_out_per_1k=given(self.price_out_per_1k, c.price_out_per_1k),
            price_cached_in_per_1k=given(self.price_cached_in_per_1k, c.price_cached_in_per_1k),
            scripted=given(self.scripted, c.scripted),
            approve_plans=given(self.approve_plans, c.approve_plans),
            feedback_chars=given(self.feedback_chars, c.feedback_chars),
            tool_rounds=given(self.tool_rounds, c.tool_rounds),
            tool_result_chars=given(self.tool_result_chars, c.tool_result_chars),
            memory=given(self.memory, c.memory),
            memory_tokens=given(self.memory_tokens, c.memory_tokens),
        )

    def config_fields(self) -> dict[str, Any]:
        """The AgentConfig fields these flags set (those given)."""
        names = {f.name for f in fields(AgentConfig)}
        return {f.name: v for f in fields(self) if f.name in names and (v := getattr(self, f.name)) is not None}

    def given(self) -> dict[str, Any]:
        """Every flag given, by name (JSON-ready: a batch sends them to its workers)."""
        return {f.name: v for f in fields(self) if (v := getattr(self, f.name)) is not None}

    @classmethod
    def from_given(cls, data: dict[str, Any]) -> RunFlags:
        """The flags `given()` wrote (an unknown name is a TypeError), the vocabulary's words as its members."""
        flags = cls(**data)
        return replace(
            flags,
            device=None if flags.device is None else Device(flags.device),
            backend=None if flags.backend is None else Backend(flags.backend),
            size=None if flags.size is None else Size(flags.size),
            policy=None if flags.policy is None else Policy(flags.policy),
            structured_method=None if flags.structured_method is None else StructuredOutput(flags.structured_method),
            temperature_schedule=None
            if flags.temperature_schedule is None
            else TemperatureSchedule(flags.temperature_schedule),
        )


@dataclass(frozen=True)
class AgentConfig:
    problem: str
    run_id: str
    runs_dir: Path
    device: Device = Device.CPU
    backend: Backend = Backend.CPP
    size: Size = Size.DEFAULT
    policy: Policy = Policy.STRICT
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
    """Samples the coder draws per idea (`--width K`), all in flight at once."""
    temperature_schedule: TemperatureSchedule = TemperatureSchedule.FLAT
    """The samples' temperatures (`--temperature-schedule`; `sampling.temperature_schedule`)."""
    ideas: int = 1
    """Distinct ideas the planner proposes per round, each from its own parent (`--ideas N`; `parents.py`)."""
    seed: int = 0
    """Seeds the parent choice's draws (`parents.choose`), so a run's search is reproducible."""
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    roles: dict[str, RoleModel] = field(default_factory=dict)
    request_timeout_s: float | None = None
    """One LLM request's time limit (`--llm-timeout`); None: DEFAULT_TIMEOUT_S, or REASONING_TIMEOUT_S
    for a role with a reasoning effort (see `timeout_for`)."""
    max_retries: int = 4
    structured_method: StructuredOutput = StructuredOutput.FUNCTION_CALLING
    price_in_per_1k: float = 0.0
    price_out_per_1k: float = 0.0
    price_cached_in_per_1k: float | None = None
    """USD per 1,000 prompt tokens read from the provider's cache; None: the prompt price."""
    scripted: str | None = None
    approve_plans: bool = False
    """Steering point: pause before the coder (a LangGraph interrupt) so a person can approve or edit the plan."""
    feedback_chars: int = 1500
    tool_rounds: int = 4
    """Planner and reviewer: at most this many rounds of tool calls before they must answer."""
    tool_result_chars: int = 12_000
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

    def timeout_for(self, role: Role) -> float:
        """A request's time limit for this role: the one set, else the default for its kind of model."""
        if self.request_timeout_s is not None:
            return self.request_timeout_s
        return REASONING_TIMEOUT_S if self.role(role).reasoning_effort else DEFAULT_TIMEOUT_S

    def price_for(self, role: Role) -> Price:
        """The role's prices where its `RoleModel` sets them, else the run's (`--price-in` /
        `--price-out`), else the dated table's for its model (`prices.KNOWN_PRICES`), else 0
        (`cost_uncounted` says so at the start of a run)."""
        spec = self.role(role)

        def pick(own: float | None, run: float | None) -> float | None:
            return run if own is None else own

        given = Price(
            in_per_1k=pick(spec.price_in_per_1k, self.price_in_per_1k) or 0.0,
            out_per_1k=pick(spec.price_out_per_1k, self.price_out_per_1k) or 0.0,
            cached_in_per_1k=pick(spec.price_cached_in_per_1k, self.price_cached_in_per_1k),
        )
        if given.in_per_1k or given.out_per_1k or self.scripted:
            return given
        return known_price(spec.model) or given

    def cost_uncounted(self) -> str:
        """Why the cost budget cannot bind (no price for some role's model), or "" when it can."""
        if self.scripted:
            return ""
        missing = sorted(
            {self.role(r).model for r in ROLES if not (p := self.price_for(r)).in_per_1k and not p.out_per_1k}
        )
        if not missing:
            return ""
        return (
            f"no price for {', '.join(missing)}: the cost meter counts $0 and --max-cost cannot stop the run "
            f"(give --price-in/--price-out or llm_role_prices; the built-in table, {PRICE_TABLE_DATE}, knows "
            "OpenAI's models)"
        )

    @classmethod
    def from_settings(
        cls, settings: Settings, problem: str, flags: RunFlags | None = None, *, run_id: str | None = None
    ) -> AgentConfig:
        """Settings (endpoint, key, models, sampling, timeouts, prices, runs folder), then OPENAI_*
        from the environment where the settings leave a gap, then the `flags` given (None: not
        given). `flags.model` sets every role; `planner_model` / `coder_model` / `reviewer_model`
        set one (a flag beats `llm_<role>_model`, which beats `model` / `llm_model`); the same for
        the reasoning effort (`--reasoning-effort` beats `llm_<role>_reasoning_effort`, which beats
        `llm_reasoning_effort`). A role's own prices (`llm_role_prices`) beat the run's. `run_id`:
        a new one when None."""
        flags = flags or RunFlags()
        model = flags.model or settings.llm_model
        temperature = settings.llm_temperature if flags.temperature is None else flags.temperature
        max_tokens_out = settings.llm_max_tokens if flags.max_output_tokens is None else flags.max_output_tokens
        per_role = {
            "planner": (flags.planner_model, settings.llm_planner_model),
            "coder": (flags.coder_model, settings.llm_coder_model),
            "reviewer": (flags.reviewer_model, settings.llm_reviewer_model),
        }
        efforts = {
            "planner": settings.llm_planner_reasoning_effort,
            "coder": settings.llm_coder_reasoning_effort,
            "reviewer": settings.llm_reviewer_reasoning_effort,
        }
        roles: dict[str, RoleModel] = {}
        for r in ROLES:
            prices = settings.llm_role_prices.get(r)
            roles[r] = RoleModel(
                model=per_role[r][0] or per_role[r][1] or model,
                temperature=temperature,
                max_tokens=max_tokens_out,
                reasoning_effort=flags.reasoning_effort or efforts[r] or settings.llm_reasoning_effort,
                price_in_per_1k=prices.in_per_1k if prices else None,
                price_out_per_1k=prices.out_per_1k if prices else None,
                price_cached_in_per_1k=prices.cached_in_per_1k if prices else None,
            )
        key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else os.environ.get("OPENAI_API_KEY")
        base_url = settings.llm_base_url or os.environ.get("OPENAI_BASE_URL")
        base = cls(
            problem=problem,
            run_id=run_id or new_run_id(problem),
            runs_dir=Path(settings.runs_dir),
            base_url=base_url,
            api_key=key,
            roles=roles,
            request_timeout_s=settings.llm_timeout_s,
            max_retries=settings.llm_max_retries,
            structured_method=settings.llm_structured_output,
            price_in_per_1k=settings.llm_price_in_per_1k,
            price_out_per_1k=settings.llm_price_out_per_1k,
            price_cached_in_per_1k=settings.llm_price_cached_in_per_1k,
            policy=settings.policy,
            memory_db=settings.memory_db,
        )
        config = flags.applied_to(base)
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
        if self.structured_method not in tuple(StructuredOutput):
            choices = ", ".join(StructuredOutput)
            raise UsageError(f"--structured-output must be one of {choices}, not {str(self.structured_method)!r}")
        if self.temperature_schedule not in tuple(TemperatureSchedule):
            choices = ", ".join(TemperatureSchedule)
            raise UsageError(f"--temperature-schedule must be one of {choices}, not {str(self.temperature_schedule)!r}")
        if self.target <= 0:
            raise UsageError(f"--target must be positive, not {self.target}")
        if self.width < 1:
            raise UsageError("--width must be at least 1")
        if self.ideas < 1:
            raise UsageError("--ideas must be at least 1")
        if self.max_gpu_s is not None and self.max_gpu_s <= 0:
            raise UsageError(f"--max-gpu-time must be positive, not {self.max_gpu_s:g}")
        if self.max_rounds < 1:
            raise UsageError("--rounds must be at least 1")
        if self.tool_rounds < 0:
            raise UsageError("tool_rounds must be 0 or more")
        if self.memory_tokens < 0:
            raise UsageError("memory_tokens must be 0 or more")
        for name, spec in self.roles.items():
            if spec.reasoning_effort is not None and not spec.reasoning_effort.isalpha():
                raise UsageError(
                    f"the {name}'s reasoning effort must be a word (low, medium, high), not {spec.reasoning_effort!r}"
                )
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
