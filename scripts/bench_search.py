#!/usr/bin/env python3
"""Search benchmark (#31; not a test): the old greedy loop (`--ideas 1 --width 1`) against the
search (`--ideas N --width K`, parents from `agent/parents.py`), by LLM calls and wall time to reach
the target, the same seeds for every setting, on three simulated problems.

    PYTHONPATH=$PWD python3 scripts/bench_search.py [--seeds 10] [--rounds 8] [--latency 0.2:0.6]
        [--judge 0.15] [--settings 1x1,2x2,4x1,1x4] [--problems scratch,technique,slower]
        [--jobs 10] [--json OUT]

(the defaults shown; about 2.5 minutes on a 2-core machine)

Each run is the real agent (`runner.run`: graph, checkpointer, parent choice, repair turns,
acceptance computed in code) with a seeded stand-in chat model (`SimChat`) and a stand-in evaluator
(`SimEvaluator`); what the stand-ins model, and what they do not, is written down in
benchmarks/search/README.md. In short: a kernel is a technique and a progress p in [0, 1]; its
speedup is the technique's floor + (ceiling - floor) * p on that problem. The planner keeps the
parent's technique or switches to another (a round's ideas switch to distinct ones); the coder
refines (p moves by a technique's step, mean > 0, spread by technique) or starts the new technique
afresh (p drawn low), and may break the build or the output at the technique's rates; a repair
turn fixes its own draft with a fixed probability. Every reply sleeps a drawn latency, every
candidate a judging time (a round's batch one after another, one device).

A model reply's randomness is keyed by (seed, role, the prompt's hash, how many times this run sent
that same prompt before), the run folder's name scrubbed from the prompt, so runs are reproducible
under concurrency and a round's K samples (one prompt, sent K times) are K different draws. Runs go
`--jobs` at a time in threads (they mostly sleep); the wall time is each run's own, and includes
the agent's own overhead (graph steps, checkpoints: about 0.1 s a round alone, 0.2 s with 10 runs
at once on 2 cores).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import math
import os
import random
import re
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable, RunnableConfig
from pydantic import ConfigDict

from kernelwright.agent import runner
from kernelwright.agent.configuration import ROLES, AgentConfig, RunFlags
from kernelwright.config import load_settings
from kernelwright.harness.result import EvalResult
from kernelwright.harness.timing.stats import Speedup
from kernelwright.harness.verdicts import Reason, Verdict
from kernelwright.vocabulary import Size, StructuredOutput, TemperatureSchedule

TECHNIQUES = ("plain", "vectorised", "shared_memory", "tensor_cores")
SNIPPET = {  # what the candidate shows, so `techniques.tags` puts it in its technique's niche
    "plain": "",
    "vectorised": "# loads: float4 v = reinterpret_cast<const float4*>(x)[i];",
    "shared_memory": "# staging: __shared__ float tile[32][33];",
    "tensor_cores": "# mma: wmma::mma_sync(acc, a, b, acc);",
}
DESCRIBED = {
    "plain": "a plain scalar loop, one element per thread",
    "vectorised": "vectorised 128-bit loads and stores",
    "shared_memory": "tiles staged through shared memory",
    "tensor_cores": "tensor-core MMA instructions on half-precision tiles",
}
FLAVOURS = (
    "retune the block size to the problem's shape",
    "unroll the inner loop by four",
    "hoist index arithmetic out of the hot loop",
    "move bounds checks out of the main loop",
    "trim registers to raise occupancy",
    "overlap the next loads with this step's arithmetic",
    "cut redundant global memory traffic",
    "reorder the loops for coalesced access",
)


@dataclass(frozen=True)
class Technique:
    """A technique on one problem: speedup over the target baseline at progress 0 and 1, the spread
    of a refinement step's progress, and a new draft's chances of a build error or a wrong output."""

    floor: float
    ceiling: float
    step_sd: float
    p_build: float
    p_wrong: float


def _tech(floor: float, ceiling: float, name: str) -> Technique:
    """Rates by technique, the same on every problem: harder techniques break more and vary more."""
    step_sd, p_build, p_wrong = {
        "plain": (0.06, 0.08, 0.04),
        "vectorised": (0.10, 0.12, 0.06),
        "shared_memory": (0.14, 0.20, 0.10),
        "tensor_cores": (0.20, 0.30, 0.15),
    }[name]
    return Technique(floor, ceiling, step_sd, p_build, p_wrong)


@dataclass(frozen=True)
class Problem:
    name: str
    what: str
    techniques: dict[str, Technique]
    obvious: tuple[str, ...] = ("plain", "vectorised")
    """What the coder writes from scratch when the plan names no technique."""


def _problem(name: str, what: str, ranges: dict[str, tuple[float, float]]) -> Problem:
    return Problem(name, what, {t: _tech(lo, hi, t) for t, (lo, hi) in ranges.items()})


PROBLEMS = {
    p.name: p
    for p in (
        _problem(
            "scratch",
            "reachable from scratch: the obvious vectorised kernel reaches the target in 0-2 refinements",
            {"plain": (0.6, 1.4), "vectorised": (0.85, 1.7), "shared_memory": (0.5, 1.8), "tensor_cores": (0.3, 1.6)},
        ),
        _problem(
            "technique",
            "needs a technique change: only shared memory passes the target, and a fresh one mostly does",
            {"plain": (0.5, 0.85), "vectorised": (0.6, 0.95), "shared_memory": (0.95, 1.7), "tensor_cores": (0.3, 0.9)},
        ),
        _problem(
            "slower",
            "needs a slower parent: only tensor cores pass, a fresh one is slower than the best and needs 1-2 refinements",
            {"plain": (0.5, 0.9), "vectorised": (0.6, 1.0), "shared_memory": (0.5, 1.0), "tensor_cores": (0.25, 2.5)},
        ),
    )
}


@dataclass(frozen=True)
class Behaviour:
    """The stand-in model's and evaluator's knobs (the same for every problem and setting)."""

    latency: tuple[float, float] = (0.2, 0.6)
    """Seconds a reply takes, drawn uniformly (every role)."""
    judge_s: float = 0.15
    """Seconds the evaluator takes per candidate; a batch is judged one after another."""
    keep: float = 0.7
    """The planner keeps the parent's technique (refines it) with this chance, else switches."""
    step_mean: float = 0.15
    """Mean progress a refinement adds (its spread is the technique's)."""
    fresh_max: float = 0.35
    """A kernel written afresh in a technique starts at a progress drawn from [0, fresh_max]."""
    refine_fault: float = 0.6
    """A refinement's build and output fault rates are the technique's times this (its parent built)."""
    fix_build: float = 0.7
    fix_wrong: float = 0.5
    """A repair turn (its failed draft shown) fixes a build error / a wrong output with these chances."""
    duplicate: float = 0.15
    """A prompt's 2nd, 3rd... sample repeats its 1st exactly with this chance at the base temperature;
    the chance falls with `heat` to none at 1.0."""
    hot_spread: float = 1.5
    """A refinement's spread is the technique's times (1 + hot_spread * heat): hotter draws wander further."""
    hot_faults: float = 1.0
    """A draft's build and output fault rates are the technique's times (1 + hot_faults * heat)."""
    noise_sd: float = 0.03
    """The measured speedup is the kernel's times exp(N(0, noise_sd))."""


BASE_TEMPERATURE = 0.2
"""The coder's configured temperature in these runs (AgentConfig's default)."""


def heat(temperature: float | None) -> float:
    """How far a sample's temperature is from the base towards 1.0 (the API's default), in [0, 1]:
    0 at the base (or no temperature), 1 at 1.0 and above. The stand-in's whole model of
    temperature: hotter samples repeat each other less, wander further from their parent, and break
    more often. These are the assumptions a schedule's comparison rests on (benchmarks/search)."""
    if temperature is None:
        return 0.0
    return min(max((temperature - BASE_TEMPERATURE) / (1.0 - BASE_TEMPERATURE), 0.0), 1.0)


# -- the stand-in chat model ------------------------------------------------------------------------
_SIM = re.compile(r"# sim: technique=(\w+) progress=([\d.]+) fault=(\w+)")
_VOLATILE = re.compile(r"^.*(?:measured|speed of light|ridge point|bandwidth|flop/s|memory:).*$", re.I | re.M)
"""Prompt lines with this machine's readings (noisy from one process to the next): not hashed."""
_INTENT = re.compile(r"\[sim: (refine|switch (\w+))\]")


@dataclass
class World:
    """One run's stand-in: the problem, the knobs, the seed, and what the model was asked so far."""

    problem: Problem
    behaviour: Behaviour
    seed: int
    scrub: tuple[str, ...] = ()
    calls: int = 0
    seen: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def draw(self, role: str, messages: list[BaseMessage], temperature: float | None = None) -> random.Random:
        """This call's random source: keyed by the prompt and how often it was sent before; a
        coder prompt's later sample may repeat its first (`Behaviour.duplicate`, less when hot)."""
        text = _VOLATILE.sub("", "\n".join(str(m.content) for m in messages))
        for s in self.scrub:
            text = text.replace(s, "RUN")
        key = f"{self.seed}:{role}:{hashlib.sha256(text.encode()).hexdigest()}"
        with self.lock:
            self.calls += 1
            n = self.seen.get(key, 0)
            self.seen[key] = n + 1
        own = random.Random(f"{key}:{n}")
        if role == "coder" and n > 0 and own.random() < self.behaviour.duplicate * (1.0 - heat(temperature)):
            return random.Random(f"{key}:0")
        return own


def speedup(problem: Problem, technique: str, progress: float) -> float:
    t = problem.techniques[technique]
    return t.floor + (t.ceiling - t.floor) * min(max(progress, 0.0), 1.0)


def plan_reply(world: World, rng: random.Random, prompt: str) -> str:
    """One idea, or N (`Write N distinct ideas`): each keeps its parent's technique or switches
    to one no other idea of the round switched to."""
    wanted = re.search(r"Write (\d+) distinct ideas", prompt)
    n = int(wanted.group(1)) if wanted else 1
    free = list(TECHNIQUES)
    plans = []
    for _ in range(n):
        flavour = rng.choice(FLAVOURS)
        if rng.random() < world.behaviour.keep or not free:
            text = f"Refine the parent kernel: {flavour}. [sim: refine]"
        else:
            technique = free.pop(rng.randrange(len(free)))
            text = f"Rewrite the kernel around {DESCRIBED[technique]}; {flavour}. [sim: switch {technique}]"
        plans.append({"plan": text, "expected_speedup": 1.2})
    return json.dumps(plans[0] if not wanted else {"ideas": plans})


def _section(prompt: str, title: str) -> str:
    """The first ```python block after the line that starts with `title` ("" when none)."""
    at = prompt.find(title)
    if at < 0:
        return ""
    block = re.search(r"```python\n(.*?)```", prompt[at:], re.DOTALL)
    return block.group(1) if block else ""


def code_reply(world: World, rng: random.Random, prompt: str, temperature: float | None = None) -> str:
    """A candidate file for the coder's prompt: a repair of the draft shown, a refinement of the
    parent shown, or a kernel written afresh in the plan's technique (see the module's docstring),
    drawn at `temperature` (`heat`)."""
    b, problem = world.behaviour, world.problem
    hot = heat(temperature)
    plan = prompt.split("# Problem", 1)[0]
    intent = _INTENT.search(plan)
    switch_to = intent.group(2) if intent else None
    repairing = "failed: repair it" in prompt
    base = _SIM.search(_section(prompt, "# Your draft (candidate" if repairing else "# Starting point"))
    if repairing and base is not None:
        technique, progress, fault = base.group(1), float(base.group(2)), base.group(3)
        if rng.random() < (b.fix_build if fault == "build" else b.fix_wrong):
            fault, progress = "none", progress - rng.uniform(0.0, 0.05)
    else:
        refine = base is not None and (switch_to is None or switch_to == base.group(1))
        if refine:
            assert base is not None
            technique = base.group(1)
            spread = problem.techniques[technique].step_sd * (1.0 + b.hot_spread * hot)
            progress = float(base.group(2)) + rng.gauss(b.step_mean, spread)
        else:
            technique = switch_to or rng.choice(problem.obvious)
            progress = rng.uniform(0.0, b.fresh_max)
        t, scale = problem.techniques[technique], (b.refine_fault if refine else 1.0) * (1.0 + b.hot_faults * hot)
        roll = rng.random()
        fault = "build" if roll < t.p_build * scale else "wrong" if roll < (t.p_build + t.p_wrong) * scale else "none"
    progress = min(max(progress, 0.0), 1.0)
    measured = speedup(problem, technique, progress) * math.exp(rng.gauss(0.0, b.noise_sd))
    judge = {
        "none": f"correct none {measured:.4f}",
        "build": "build_error compile_error",
        "wrong": "incorrect output_mismatch",
    }[fault]
    return (
        "Here is the kernel.\n```python\nimport torch\nimport torch.nn as nn\n\n"
        f"# sim: technique={technique} progress={progress:.4f} fault={fault} draw={rng.getrandbits(32):08x}\n"
        f"# judge: {judge}\n{SNIPPET[technique]}\n\n"
        "class ModelNew(nn.Module):\n    def forward(self, x):\n        return x\n```\n"
    )


REVIEW = json.dumps({"decision": "iterate", "feedback": "keep going", "lesson": ""})


class SimChat(BaseChatModel):
    """The stand-in LLM of one role of one run: reads its prompt, answers after a drawn latency."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    world: Any
    role: str
    model_name: str = "sim"
    temperature: float | None = BASE_TEMPERATURE
    """Set per sample by the coder's schedule (`sampling.at_temperature` copies the model)."""

    @property
    def _llm_type(self) -> str:
        return "kernelwright-sim"

    def _answer(self, messages: list[BaseMessage]) -> tuple[AIMessage, float]:
        """Chosen when the call is made (before any await), so the draws follow the calls' order."""
        world: World = self.world
        rng = world.draw(self.role, messages, self.temperature)
        delay = rng.uniform(*world.behaviour.latency)
        prompt = str(messages[-1].content)
        if self.role == "planner":
            text = plan_reply(world, rng, prompt)
        elif self.role == "coder":
            text = code_reply(world, rng, prompt, self.temperature)
        else:
            text = REVIEW
        tokens_in = sum(len(str(m.content)) for m in messages) // 4
        message = AIMessage(
            content=text,
            usage_metadata={
                "input_tokens": tokens_in,
                "output_tokens": len(text) // 4,
                "total_tokens": tokens_in + len(text) // 4,
            },
            response_metadata={"model_name": self.model_name, "finish_reason": "stop"},
        )
        return message, delay

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        message, delay = self._answer(messages)
        time.sleep(delay)
        return ChatResult(generations=[ChatGeneration(message=message)])

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        message, delay = self._answer(messages)
        await asyncio.sleep(delay)
        return ChatResult(generations=[ChatGeneration(message=message)])

    def astream(  # type: ignore[override]
        self, input: LanguageModelInput, config: RunnableConfig | None = None, **kwargs: Any
    ) -> AsyncIterator[AIMessageChunk]:
        message, delay = self._answer(self._convert_input(input).to_messages())
        return _after(message, delay)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Runnable[LanguageModelInput, AIMessage]:
        return self  # type: ignore[return-value]  # plain_json runs offer no tools; kept for the seam


async def _after(message: AIMessage, delay: float) -> AsyncIterator[AIMessageChunk]:
    await asyncio.sleep(delay)
    yield AIMessageChunk(
        content=str(message.content),
        usage_metadata=message.usage_metadata,
        response_metadata=message.response_metadata,
    )


# -- the stand-in evaluator ---------------------------------------------------------------------------
_JUDGE = re.compile(r"# judge: (\w+) (\w+)(?: ([\d.]+))?")


class SimEvaluator:
    """Judges a candidate by its `# judge:` marker after `judge_s` seconds; a batch one after another."""

    def __init__(self, judge_s: float) -> None:
        self.judge_s = judge_s

    def evaluate(self, candidates: list[Path]) -> list[EvalResult]:
        out = []
        for path in candidates:
            time.sleep(self.judge_s)
            source = path.read_text()
            match = _JUDGE.search(source)
            if match is None:
                raise ValueError(f"{path} carries no judge marker")
            verdict, reason, ratio = Verdict(match.group(1)), match.group(2), float(match.group(3) or 0)
            speedups = {
                name: Speedup(
                    baseline=name,
                    ratio=ratio,
                    ci_low=ratio * 0.95,
                    ci_high=ratio * 1.05,
                    significant=True,
                    baseline_median_ms=1.0,
                    candidate_median_ms=1.0 / ratio,
                )
                for name in ("eager", "compile")
                if verdict == Verdict.CORRECT
            }
            out.append(
                EvalResult(
                    problem="relu",
                    candidate=str(path),
                    candidate_sha256=hashlib.sha256(source.encode()).hexdigest(),
                    verdict=verdict,
                    reason=None if reason == "none" else Reason(reason),
                    message=f"simulated {verdict.value}" + ("" if reason == "none" else f" ({reason})"),
                    speedups=speedups,
                    stderr_tail="error: 'tile' was not declared" if verdict == Verdict.BUILD_ERROR else "",
                )
            )
        return out


# -- the runs ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Setting:
    ideas: int
    width: int

    @property
    def name(self) -> str:
        return f"{self.ideas}x{self.width}"


def run_one(
    problem: Problem, setting: Setting, seed: int, behaviour: Behaviour, rounds: int, schedule: TemperatureSchedule
) -> dict[str, Any]:
    """One agent run; when (wall seconds, model calls) it first judged a candidate that beats the target."""
    flags = RunFlags(
        temperature_schedule=schedule,
        size=Size.SMALL,
        scripted="sim-search",
        model="sim",
        memory=False,
        structured_method=StructuredOutput.PLAIN_JSON,
        ideas=setting.ideas,
        width=setting.width,
        seed=seed,
        target=1.0,
        max_rounds=rounds,
        no_improvement_rounds=rounds,  # the rounds are the budget compared
    )
    run_id = f"{problem.name}-{setting.name}-s{seed}-{os.urandom(2).hex()}"
    cfg = AgentConfig.from_settings(load_settings(), "relu", flags, run_id=run_id)
    world = World(problem, behaviour, seed, scrub=(str(cfg.run_dir), run_id))
    chat: dict[str, BaseChatModel] = {role: SimChat(world=world, role=role) for role in ROLES}
    hit: dict[str, float] = {}
    began = time.monotonic()

    def watch(event: Any) -> None:
        if getattr(event, "kind", "") == "candidate_evaluated" and event.beats_target and not hit:
            hit.update(wall=time.monotonic() - began, calls=world.calls, index=event.index)

    outcome = runner.run(
        cfg, runner.RunParts(chat, SimEvaluator(behaviour.judge_s)), runner.RunSteering(subscribers=(watch,))
    )
    best = outcome.best
    return {
        **_won_from(outcome, hit.get("index")),
        "problem": problem.name,
        "setting": setting.name,
        "seed": seed,
        "reached": outcome.accepted,
        "calls_to_target": hit.get("calls"),
        "wall_to_target_s": round(hit["wall"], 3) if hit else None,
        "calls": world.calls,
        "wall_s": round(time.monotonic() - began, 3),
        "rounds": outcome.state.get("round", 0),
        "candidates": len(outcome.candidates),
        "best_speedup": best["speedups"]["compile"]["ratio"] if best else None,
        "winner": hit.get("index"),
        "stop_reason": outcome.stop_reason,
    }


def _won_from(outcome: runner.RunOutcome, index: float | None) -> dict[str, Any]:
    """Which parent the winning idea started from, as `parents.choose` recorded why it chose it
    (the winning round is the run's last, so its ideas are the state's)."""
    winner = next((c for c in outcome.candidates if c["index"] == index), None)
    if winner is None:
        return {"won_from": None, "winner_parent": None}
    ideas = outcome.state.get("ideas") or []
    why = next((i["why"] for i in ideas if (i["parent"], i["plan"]) == (winner["parent"], winner.get("idea"))), "")
    kinds = [("niche", "niche"), ("slower", "slower"), ("best", "")]
    kind = "scratch" if winner["parent"] is None else next(k for k, word in kinds if word in why)
    return {"won_from": kind, "winner_parent": winner["parent"], "winner_why": why}


def quartiles(values: list[float]) -> tuple[float, float, float]:
    """(Q1, median, Q3), linear between ranks; a failed run counts as +inf."""
    data = sorted(values)

    def at(q: float) -> float:
        pos = q * (len(data) - 1)
        lo, frac = int(pos), pos - int(pos)
        if frac == 0 or data[lo] == math.inf:
            return data[lo]
        hi = data[lo + 1]
        return math.inf if hi == math.inf else data[lo] + frac * (hi - data[lo])

    return at(0.25), at(0.5), at(0.75)


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    calls = [float(r["calls_to_target"]) if r["reached"] else math.inf for r in rows]
    walls = [float(r["wall_to_target_s"]) if r["reached"] else math.inf for r in rows]
    return {
        "runs": len(rows),
        "reached": sum(r["reached"] for r in rows),
        "calls_q": quartiles(calls),
        "wall_q": quartiles(walls),
        "calls_per_run": statistics.mean(r["calls"] for r in rows),
        "won_from": "/".join(str(sum(r["won_from"] == k for r in rows)) for k in WON_FROM),
    }


WON_FROM = ("scratch", "best", "niche", "slower")


def _fmt(q: tuple[float, float, float], digits: int) -> str:
    def one(v: float) -> str:
        return "fail" if v == math.inf else f"{v:.{digits}f}"

    return f"{one(q[1])} [{one(q[0])}-{one(q[2])}]"


def table(rows: list[dict[str, Any]], problems: list[str], settings: list[str]) -> str:
    head = f"{'problem':<10} {'setting':<8} {'reached':>8}  {'calls to target':<18} {'wall s to target':<20} {'calls/run':>9}  won from"
    lines = [head, "-" * len(head)]
    for problem in [*problems, "all"]:
        for setting in settings:
            mine = [r for r in rows if r["setting"] == setting and problem in ("all", r["problem"])]
            s = summarise(mine)
            lines.append(
                f"{problem:<10} {setting:<8} {s['reached']:>3}/{s['runs']:<4}  {_fmt(s['calls_q'], 0):<18} "
                f"{_fmt(s['wall_q'], 1):<20} {s['calls_per_run']:>9.1f}  {s['won_from']}"
            )
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def _span(text: str) -> tuple[float, float]:
    lo, _, hi = text.partition(":")
    return float(lo), float(hi or lo)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=10, help="seeds 0..S-1, the same for every setting")
    ap.add_argument("--rounds", type=int, default=8, help="the budget: rounds per run")
    ap.add_argument("--latency", default="0.2:0.6", help="seconds a reply takes, LO:HI (uniform)")
    ap.add_argument("--judge", type=float, default=0.15, help="seconds the evaluator takes per candidate")
    ap.add_argument("--settings", default="1x1,2x2,4x1,1x4", help="IDEASxWIDTH, comma-separated")
    ap.add_argument("--problems", default=",".join(PROBLEMS), help=f"of {', '.join(PROBLEMS)}")
    ap.add_argument("--jobs", type=int, default=10, help="runs at once (threads; runs mostly sleep)")
    ap.add_argument("--json", type=Path, help="write every run and the table here")
    ap.add_argument("--keep", action="store_true", help="keep the runs' folders (a temporary folder, printed)")
    ap.add_argument(
        "--schedule",
        choices=[str(s) for s in TemperatureSchedule],
        default=str(TemperatureSchedule.FLAT),
        help="the samples' temperatures (the agent's --temperature-schedule): flat, all at 0.2 (the agent's "
        "default), or spread from 0.2 up to 1.0",
    )
    args = ap.parse_args(argv)
    schedule = TemperatureSchedule(args.schedule)
    behaviour = Behaviour(latency=_span(args.latency), judge_s=args.judge)
    settings = [Setting(*map(int, s.split("x"))) for s in args.settings.split(",")]
    problems = [PROBLEMS[p] for p in args.problems.split(",")]
    home = Path(tempfile.mkdtemp(prefix="bench-search-"))
    os.environ.update(
        KERNELWRIGHT_HOME=str(home / "home"),
        KERNELWRIGHT_RUNS_DIR=str(home / "runs"),
        KERNELWRIGHT_MEMORY_DB=str(home / "memory.sqlite"),
    )
    try:
        run_one(
            problems[0], settings[0], -1, behaviour, 1, schedule
        )  # warm-up (imports, first-run caches): not counted
        jobs = [(p, s, seed) for seed in range(args.seeds) for p in problems for s in settings]
        began = time.monotonic()
        rows: list[dict[str, Any]] = []
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            for row in pool.map(lambda job: run_one(job[0], job[1], job[2], behaviour, args.rounds, schedule), jobs):
                rows.append(row)
                print(f"\r{len(rows)}/{len(jobs)} runs", end="", file=sys.stderr, flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(home, ignore_errors=True)
    print(file=sys.stderr)
    text = table(rows, [p.name for p in problems], [s.name for s in settings])
    print(text)
    print(
        "reached: runs that judged a candidate beating the target within the rounds; calls and wall: median\n"
        "[IQR] over all runs to the first such candidate, a run that never got there counted as infinite\n"
        "('fail'); calls/run: mean LLM calls per run, failed runs included; won from: the winning idea's\n"
        "parent, scratch/best/niche best/slower (seeded draw)."
    )
    if args.keep:
        print(f"runs kept in {home / 'runs'}")
    print(
        f"{len(rows)} runs in {time.monotonic() - began:.0f} s; seeds 0-{args.seeds - 1}, {args.rounds} rounds, "
        f"latency {args.latency} s, judging {args.judge} s/candidate, {args.jobs} runs at once, "
        f"temperatures {args.schedule}"
    )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "args": {k: str(v) for k, v in vars(args).items()},
                    "behaviour": asdict(behaviour),
                    "problems": {p.name: {"what": p.what, **asdict(p)} for p in problems},
                    "runs": rows,
                    "table": text,
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
