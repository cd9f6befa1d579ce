"""Helpers of the agent tests: a fake evaluator that judges candidates by a marker comment, and
replies for the scripted chat model. (The real harness runs in test_agent_demo.py.)"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from kernelwright.agent.configuration import AgentConfig, RunFlags
from kernelwright.agent.scripted import ScriptedSession
from kernelwright.config import load_settings
from kernelwright.harness.result import EvalResult
from kernelwright.harness.timing.stats import Speedup
from kernelwright.harness.verdicts import Reason, Verdict

_MARK = re.compile(r"# judge: (\w+)(?: (\w+))?(?: ([\d.]+))?")


class FakeEvaluator:
    """Judges a candidate by its `# judge: VERDICT [REASON] [SPEEDUP]` comment; counts calls."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.batches: list[int] = []

    def evaluate(self, candidates: list[Path]) -> list[EvalResult]:
        out = []
        self.batches.append(len(candidates))
        for path in candidates:
            source = path.read_text()
            self.calls.append(source)
            match = _MARK.search(source)
            assert match, "test candidates carry a judge marker"
            verdict, reason, speed = Verdict(match.group(1)), match.group(2), match.group(3)
            speedups = {}
            if verdict == Verdict.CORRECT and speed:
                ratio = float(speed)
                for name in ("eager", "compile"):
                    speedups[name] = Speedup(
                        baseline=name,
                        ratio=ratio,
                        ci_low=ratio * 0.95,
                        ci_high=ratio * 1.05,
                        significant=True,
                        baseline_median_ms=1.0,
                        candidate_median_ms=1.0 / ratio,
                    )
            out.append(
                EvalResult(
                    problem="level1/1_relu",
                    candidate=str(path),
                    verdict=verdict,
                    reason=Reason(reason) if reason and reason != "none" else None,
                    message=f"fake {verdict.value} {reason or ''}".strip(),
                    speedups=speedups,
                    stderr_tail="error: 'foo' was not declared in this scope" if verdict == Verdict.BUILD_ERROR else "",
                )
            )
        return out


def code(marker: str) -> str:
    """A coder reply: prose, then a complete ModelNew file carrying a judge marker."""
    return (
        "Here is the kernel.\n```python\nimport torch\nimport torch.nn as nn\n\n"
        f"# judge: {marker}\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return x\n```\n"
    )


def plan(text: str = "write a single-pass kernel", expected: float = 1.5) -> dict[str, object]:
    return {"plan": text, "expected_speedup": expected}


def review(decision: str = "iterate", lesson: str = "a lesson", feedback: str = "keep going") -> dict[str, object]:
    return {"decision": decision, "feedback": feedback, "lesson": lesson}


def config(problem: str = "relu", run_id: str | None = None, **flags: Any) -> AgentConfig:
    """A test run's config: `flags` are `RunFlags` fields (an unknown name is a TypeError)."""
    settings = load_settings()
    flags.setdefault("size", "small")
    flags.setdefault("scripted", "test")
    return AgentConfig.from_settings(settings, problem, RunFlags(**flags), run_id=run_id)


def models(session: ScriptedSession) -> dict[str, object]:
    return {role: session.model(role) for role in ("planner", "coder", "reviewer")}


def run_cli(argv: list[str]) -> int:
    """`kernelwright ARGV` in this process, with the agent's commands registered (until the
    CLI's own module registers them) ; returns the exit code."""
    import pytest

    from kernelwright.cli import app, demo_cmd, main, optimize_cmd, runs_cmd

    names = {c.name for c in app.registered_commands} | {g.name for g in app.registered_groups}
    for name, module in (("optimize", optimize_cmd), ("demo", demo_cmd), ("runs", runs_cmd)):
        if name not in names:
            module.register(app)  # type: ignore[attr-defined]
    with pytest.raises(SystemExit) as exited:
        main(argv)
    return int(exited.value.code or 0)
