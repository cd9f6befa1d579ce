"""`kernelwright demo`: the real graph on a built-in problem, driven by a scripted LLM session
shipped in the package (labelled "scripted" wherever it shows): on a GPU `gelu_layernorm_bf16` at
its default size, on a CPU `relu` at the small size (`agent/demo.py` says why). Builds, fuzzing and
timing are real and happen on this machine; if reality diverges from the script (a verdict the
script did not expect, a kernel that does not beat the target here), the demo ends cleanly and
says so."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Optional

import typer

from kernelwright.cli.context import AppState
from kernelwright.errors import ExitCode
from kernelwright.vocabulary import DeviceChoice, Size


def register(app: typer.Typer) -> None:
    @app.command("demo")
    def demo_command(
        ctx: typer.Context,
        device: Annotated[
            Optional[DeviceChoice], typer.Option("--device", help="cpu or cuda (each has its own scripted session).")
        ] = DeviceChoice.CPU,
        events_json: Annotated[
            Optional[Path], typer.Option("--events-json", help="Write every event as JSON lines.")
        ] = None,
    ) -> int:
        """Watch the agent loop with a scripted LLM: a slow kernel, a build error fixed on retry, a
        reward hack rejected and explained, then a faster kernel accepted. On a GPU the problem is
        `gelu_layernorm_bf16` (GELU then LayerNorm in bf16) at its default size, where a fused
        kernel beats torch.compile; on a CPU it is `relu` at the small size (the loop, not a speedup
        that carries to real sizes). Real builds, fuzzing and timing; no API key needed. Exits 0
        when the run went as scripted."""
        from kernelwright.agent.demo import demo_config
        from kernelwright.agent.scripted import ScriptDiverged, ScriptExhausted
        from kernelwright.cli.agent_run import execute, out
        from kernelwright.tools.evaluate import resolve_device

        state: AppState = ctx.obj
        settings = state.settings()
        chosen = resolve_device(device, settings)
        config = demo_config(settings, chosen)
        why = (
            ": a CPU at the default size would spend minutes on each candidate, so the CPU demo shows the loop, "
            "not a speedup that carries to real sizes; eager, torch.compile and the candidates are all timed on "
            "one CPU thread, so a shared machine's load does not decide the race"
            if chosen == "cpu"
            else ""
        )
        out.print(
            f"[bold yellow]kernelwright demo (scripted LLM session {config.scripted!r})[/]: the replies are "
            f"canned; the builds, fuzzing and timing are real, on this machine ({config.problem}, "
            f"--size {config.size}{why}).",
            highlight=False,
        )
        start = time.monotonic()
        try:
            outcome, session = execute(config, settings, events_json=events_json)
        except (ScriptExhausted, ScriptDiverged) as exc:
            out.print(f"[bold red]the run diverged from the script[/]: {exc.message}", highlight=False)
            out.print(f"run folder: {config.run_dir}", highlight=False)
            return ExitCode.NEEDS_ATTENTION
        seconds = time.monotonic() - start
        verdicts = [c["verdict"] for c in outcome.candidates]
        expected = session.expected_verdicts if session else []
        if verdicts != expected:
            out.print(
                f"[bold red]reality diverged from the script[/]: verdicts {verdicts}, the script expected {expected}",
                highlight=False,
            )
            return ExitCode.NEEDS_ATTENTION
        if not outcome.accepted:
            out.print(
                "[bold red]reality diverged from the script[/]: the last kernel is correct but did not measurably "
                f"beat the target on this machine ({outcome.stop_reason})",
                highlight=False,
            )
            return ExitCode.NEEDS_ATTENTION
        best = outcome.best
        eager = best["speedups"].get("eager") if best else None
        if best and eager and best["target_baseline"] != "eager" and eager["ci_low"] <= 1.0:
            small = ": at this small size torch.compile's per-call overhead is much of what it beats"
            out.print(
                f"note: the accepted kernel beats torch.compile (the target baseline) but not eager here "
                f"({eager['ratio']:.2f}x [{eager['ci_low']:.2f}-{eager['ci_high']:.2f}])"
                f"{small if config.size == Size.SMALL else ''}.",
                highlight=False,
            )
        out.print(f"[bold green]the demo ran as scripted[/] in {seconds:.0f} s (scripted LLM; real harness)")
        return ExitCode.OK
