"""The TUI on a live scripted run on the CPU with the real harness (real C++ builds, fuzzing and
timing of the demo's relu session), as `kernelwright tui --scripted` runs it; and the `tui`
command's usage errors."""

from __future__ import annotations

import pytest

from kernelwright.agent.demo import demo_config
from kernelwright.config import load_settings
from kernelwright.tui.app import make_app
from kernelwright.tui.launch import RunRequest
from kernelwright.tui.widgets.candidates import CandidateTree
from tests.agent.helpers import run_cli
from tests.tui.helpers import run_screen, wait_for


@pytest.mark.slow
@pytest.mark.anyio
async def test_a_live_scripted_run_on_the_cpu(anyio_backend: str) -> None:
    app = make_app(load_settings(), request=RunRequest(config=demo_config(load_settings(), "cpu")))
    async with app.run_test(size=(80, 24)) as pilot:
        screen = run_screen(app)
        await wait_for(pilot, lambda: not screen.progress.running, timeout=600)
        progress = screen.progress
        verdicts = [c.verdict for c in progress.ordered_candidates()]
        assert verdicts == ["correct", "build_error", "correct", "rejected", "correct", "correct"], progress.stop_reason
        assert progress.status == "finished" and progress.stop_reason.startswith("accepted"), progress.stop_reason
        assert progress.candidates[4].reason == "torch_fallback"
        nodes = list(screen.query_one(CandidateTree).root.children)
        labels = []
        while nodes:
            node = nodes.pop()
            labels.append(str(node.label))
            nodes.extend(node.children)
        assert any("⚠ build_error" in label for label in labels) and any("⊘ rejected" in label for label in labels)
        assert progress.scripted == "relu-cpu" and "scripted: relu-cpu" in screen.title


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_tui_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["tui", "relu", "--resume", "x"]) == 2
    assert "give one of PROBLEM, --resume RUN_ID or --report FILE" in capsys.readouterr().err
    assert run_cli(["tui", "--compare", "b.ncu-rep"]) == 2
    assert "--compare needs --report" in capsys.readouterr().err
    assert run_cli(["tui", "softmax", "--scripted", "--device", "cpu"]) == 2
    assert "knows only the 'relu' problem" in capsys.readouterr().err
    assert run_cli(["tui", "--resume", "no-such-run"]) == 2
    assert "no run 'no-such-run'" in capsys.readouterr().err
    assert run_cli(["tui", "--report", "missing.ncu-rep"]) == 2
    assert run_cli(["tui", "relu", "--device", "cpu"]) == 2  # pytest's stdin is no terminal
    assert "the TUI needs an interactive terminal" in capsys.readouterr().err
    assert run_cli(["tui", "--help"]) == 0
    assert "Watch and steer an optimization run" in capsys.readouterr().out
