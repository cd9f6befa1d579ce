"""How the agent's prompts grow over a long run: a 20-round scripted run on the CPU with the real
harness (builds and fuzzing; timing off, so no candidate can be accepted and the run goes all 20
rounds), then the prompt tokens of every coder call (the scripted model's estimate: characters / 4).

Goal (#30): the coder's and the planner's prompts in the last round are at most 1.5x the first's
(every round is kept, as one short line; context is digests, never transcripts).

    .venv/bin/python scripts/bench_agent_context.py [--rounds 20] [--keep]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def session(rounds: int):  # type: ignore[no-untyped-def]
    from kernelwright.agent.scripted import ScriptedSession
    from kernelwright.agent.scripts.relu_cpu import _file

    body = "    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;"
    plans = [
        {
            "plan": f"Round {i + 1}: try variant {i + 1} of the single-pass loop: unroll by {2 + i % 4}, keep the "
            "branch-free select so the compiler vectorizes it, and avoid extra passes over memory.",
            "expected_speedup": 1.1 + i / 100,
        }
        for i in range(rounds)
    ]
    coder = [
        _file(body, "kw_bench_ctx_relu").replace("import torch\n", f"# variant {i + 1}\nimport torch\n", 1)
        for i in range(rounds)
    ]
    reviews = [
        {
            "decision": "iterate",
            "feedback": f"Variant {i + 1} is correct; timing was off in this benchmark so nothing can be accepted. "
            "Next: try a different unroll factor and compare.",
            "lesson": f"Lesson {i + 1}: one pass over memory is what matters for elementwise ops on the CPU.",
        }
        for i in range(rounds)
    ]
    return ScriptedSession(
        {"planner": plans, "coder": coder, "reviewer": reviews},
        name="bench-context (scripted)",
        expected_verdicts=["correct"] * rounds,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--keep", action="store_true", help="keep the run folder (printed)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kw-bench-ctx-"))
    os.environ.setdefault("KERNELWRIGHT_HOME", str(work / "home"))
    os.environ["KERNELWRIGHT_RUNS_DIR"] = str(work / "runs")

    from kernelwright.agent import runner
    from kernelwright.agent.assembly import harness_session
    from kernelwright.agent.configuration import ROLES, AgentConfig, RunFlags
    from kernelwright.agent.scripted import estimate_tokens
    from kernelwright.config import load_settings

    settings = load_settings()
    flags = RunFlags(
        device="cpu",
        backend="cpp",
        size="small",
        timing=False,
        max_rounds=args.rounds,
        no_improvement_rounds=args.rounds + 1,
        num_threads=1,
        scripted="bench-context",
        memory=False,
    )
    config = AgentConfig.from_settings(settings, "relu", flags)
    script = session(args.rounds)
    start = time.monotonic()
    with harness_session(config, settings) as evaluator:
        parts = runner.RunParts({r: script.model(r) for r in ROLES}, evaluator, scripted=script)
        outcome = runner.run(config, parts, runner.RunSteering(subscribers=(script.watch,)))
    seconds = time.monotonic() - start
    per_call = {
        role: [sum(estimate_tokens(str(m.content)) for m in prompt) for prompt in script.prompts.get(role, [])]
        for role in ROLES
    }
    verdicts = [c["verdict"] for c in outcome.candidates]
    print(f"{outcome.state.get('round', 0)} rounds in {seconds:.0f} s; verdicts: {verdicts.count('correct')} correct "
          f"of {len(verdicts)}; stopped: {outcome.stop_reason}")  # fmt: skip
    for role in ROLES:
        sizes = per_call[role]
        if sizes:
            print(f"{role:8s} prompt tokens: round 1 {sizes[0]}, round {len(sizes)} {sizes[-1]}, "
                  f"ratio {sizes[-1] / sizes[0]:.2f}x, max {max(sizes)}")  # fmt: skip
    coder = per_call["coder"]
    ratios = {role: per_call[role][-1] / per_call[role][0] for role in ("planner", "coder") if per_call[role]}
    for role, ratio in ratios.items():
        print(f"{role} prompt growth, round {len(per_call[role])} vs round 1: {ratio:.2f}x (goal <= 1.5x): "
              f"{'ok' if ratio <= 1.5 else 'OVER'}")  # fmt: skip
    ratio = max(ratios.values())
    if args.keep:
        print(f"run folder: {config.run_dir}")
    else:
        import shutil

        shutil.rmtree(work, ignore_errors=True)
    return 0 if ratio <= 1.5 and len(coder) == args.rounds else 1


if __name__ == "__main__":
    raise SystemExit(main())
