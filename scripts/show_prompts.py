"""Run a scripted session on this machine and write every prompt the LLM roles received (not a
test: what a model is shown on a real device, e.g. the coder's round-1 prompt of a GPU run with its
specs block, speed of light and absolute times; #30).

    PYTHONPATH=$PWD python3 scripts/show_prompts.py relu --scripted relu-triton --backend triton \\
        --device cuda --rounds 2 --out prompts/
    PYTHONPATH=$PWD python3 scripts/show_prompts.py relu --scripted relu-cpu --backend cpp --device cpu --size small

Writes OUT/<role>-<n>.md (one file per request, its messages in order) and prints the first coder
prompt; exits with the run's own exit code.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> int:
    from kernelwright.agent.configuration import AgentConfig, RunFlags
    from kernelwright.agent.scripted import ScriptDiverged, ScriptExhausted
    from kernelwright.cli.agent_run import execute
    from kernelwright.config import Settings
    from kernelwright.vocabulary import Backend, Device, Size

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("problem")
    parser.add_argument("--scripted", required=True)
    parser.add_argument("--backend", choices=[b.value for b in Backend], required=True)
    parser.add_argument("--device", choices=[d.value for d in Device], required=True)
    parser.add_argument("--size", choices=[s.value for s in Size], default="default")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("prompts"))
    args = parser.parse_args()

    settings = Settings()
    flags = RunFlags(
        device=Device(args.device),
        backend=Backend(args.backend),
        size=Size(args.size),
        max_rounds=args.rounds,
        no_improvement_rounds=args.rounds + 1,
        scripted=args.scripted,
        memory=False,
    )
    config = AgentConfig.from_settings(settings, args.problem, flags)
    code = 0
    try:
        outcome, session = execute(config, settings)
        code = int(outcome.exit_code)
    except (ScriptExhausted, ScriptDiverged) as exc:
        print(f"the run left its script: {exc.message}", file=sys.stderr)
        session, code = None, int(exc.exit_code)
    if session is None:
        return code or 1
    args.out.mkdir(parents=True, exist_ok=True)
    for role, requests in session.prompts.items():
        for n, messages in enumerate(requests, start=1):
            text = "\n\n".join(f"### {m.type}\n{m.text}" for m in messages)
            (args.out / f"{role}-{n}.md").write_text(text)
    first = session.prompts.get("coder", [[]])[0]
    print("=" * 30, "the coder's first prompt", "=" * 30)
    print("\n\n".join(f"### {m.type}\n{m.text}" for m in first))
    return code


if __name__ == "__main__":
    sys.exit(main())
