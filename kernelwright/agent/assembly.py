"""One run's live parts, assembled the same way for every frontend (`optimize` and `demo`, the
TUI, `batch optimize`): the chat model per role (or the scripted session), the profiler, the
memory, then the warm harness session; `assemble` yields them as one `RunParts` for
`runner.run`.

Where the parts come from is a `PartsSource`: `HarnessParts` is the real thing; the TUI's tests
pass a fake one (as posting's `make_app(settings, deps)` does). The memory is opened before the
harness session, so a locked, damaged or too-new database ends the run before any worker starts.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, Protocol

from kernelwright.agent.configuration import AgentConfig
from kernelwright.agent.deps import Evaluator, Memory, Profiler
from kernelwright.agent.runner import RunParts, open_memory
from kernelwright.agent.scripted import ScriptedSession
from kernelwright.batch.eval_pool import EvalPool, device_slots
from kernelwright.batch.spec import JudgeSpec
from kernelwright.config import Settings
from kernelwright.harness.options import TimingPlan
from kernelwright.problems import resolve_problem
from kernelwright.tools.evaluate import eval_options, open_session


class PartsSource(Protocol):
    """Where a run's live parts come from."""

    def models(self, config: AgentConfig) -> tuple[dict[str, Any], ScriptedSession | None]: ...

    def evaluator(self, config: AgentConfig, settings: Settings) -> contextlib.AbstractContextManager[Evaluator]: ...

    def profiler(self, config: AgentConfig, settings: Settings) -> tuple[Profiler | None, str]: ...

    def memory(self, config: AgentConfig) -> contextlib.AbstractContextManager[Memory | None]: ...


@contextlib.contextmanager
def harness_session(config: AgentConfig, settings: Settings, *, cpu_devices: int = 1) -> Iterator[Evaluator]:
    """The run's evaluator, warm (the next worker starts while the LLM writes): one EvalSession
    on one GPU or the CPU; with several visible GPUs (or `cpu_devices` > 1 on the CPU), an
    `EvalPool` of one session per device, judging a step's candidates side by side."""
    problem = resolve_problem(config.problem)
    slots = device_slots(config.device, cpu_devices=cpu_devices, threads=config.num_threads)
    if len(slots) > 1:
        spec = JudgeSpec.from_settings(
            settings,
            config.device,
            size=config.size,
            timing=config.timing,
            policy=config.policy,
            time_cap_s=config.timing_cap_s,
            parallel_builds=1,
            build_ahead=0,
            open_ahead=False,
        )
        log_dir = config.run_dir / "eval-devices"
        with EvalPool(problem, spec, slots, log_dir, out_dir=config.run_dir / "evidence") as pool:
            yield pool
        return
    plan = TimingPlan(time_cap_s=config.timing_cap_s) if config.timing_cap_s else None
    opts = eval_options(
        settings,
        config.device,
        size=config.size,
        policy=config.policy,
        timing=config.timing,
        timing_plan=plan,
        num_threads=config.num_threads,
        out_dir=config.run_dir / "evidence",
    )
    with open_session(problem, opts, warm=True) as session:
        yield session


class HarnessParts:
    """The real thing: the configured endpoint (or the package's scripted session), the warm
    EvalSession, Nsight Compute where there is a GPU, the memory database."""

    def models(self, config: AgentConfig) -> tuple[dict[str, Any], ScriptedSession | None]:
        from kernelwright.agent.models import make_models

        return make_models(config)

    def evaluator(self, config: AgentConfig, settings: Settings) -> contextlib.AbstractContextManager[Evaluator]:
        return harness_session(config, settings)

    def profiler(self, config: AgentConfig, settings: Settings) -> tuple[Profiler | None, str]:
        from kernelwright.agent.profiling import make_profiler

        return make_profiler(config, settings)

    def memory(self, config: AgentConfig) -> contextlib.AbstractContextManager[Memory | None]:
        return open_memory(config, None)


@contextlib.contextmanager
def assemble(config: AgentConfig, settings: Settings, source: PartsSource | None = None) -> Iterator[RunParts]:
    """The run's parts from `source` (default: the real ones), open for the `with` block: models,
    profiler, memory, then the harness session, closed in reverse order."""
    source = source or HarnessParts()
    models, session = source.models(config)
    profiler, missing = source.profiler(config, settings)
    with source.memory(config) as memory, source.evaluator(config, settings) as evaluator:
        yield RunParts(
            models=models,
            evaluator=evaluator,
            scripted=session,
            profiler=profiler,
            profiler_missing=missing,
            memory=memory,
        )
