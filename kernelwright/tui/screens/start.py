"""The start screen (`kernelwright tui` with no problem): pick a built-in problem or a file, or an
earlier run to resume or browse, and the run's model, device, backend, target and rounds. The
scripted demo session needs no API key (it knows the demo's problem of the device only, `relu` on a
CPU and `gelu_layernorm_bf16` on a GPU, and says so)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Button, Checkbox, Footer, Header, Input, Label, OptionList, Select, Static
from textual.widgets.option_list import Option

from kernelwright.agent import runs
from kernelwright.agent.configuration import AgentConfig, RunFlags
from kernelwright.agent.demo import DEMOS, demo_config, demo_for, is_demo_problem
from kernelwright.errors import KernelwrightError, UsageError
from kernelwright.problems import Problem
from kernelwright.tui.host import AppHost
from kernelwright.tui.launch import RunRequest
from kernelwright.vocabulary import Backend, Device


@dataclass(frozen=True)
class StartChoices:
    """What the start screen offers, read before it opens (tests pass their own)."""

    problems: list[Problem]
    runs: list[dict[str, Any]]
    devices: list[Device]


def run_label(row: dict[str, Any]) -> str:
    best = row.get("best") or {}
    base = best.get("target_baseline") if best else None
    speed = (
        f" · best {best['speedups'][base]['ratio']:.2f}x {base}" if base and base in best.get("speedups", {}) else ""
    )
    return f"{row['run_id']} · {row.get('problem')} · {row.get('status')}{speed}"


class StartScreen(Screen[None]):
    BINDINGS = [
        Binding("ctrl+r", "start", "Start run"),
        Binding("ctrl+o", "open_run", "Open run"),
        Binding("ctrl+q", "app.quit", "Quit"),
    ]

    def __init__(self, choices: StartChoices) -> None:
        super().__init__()
        self.choices = choices

    @property
    def kw_app(self) -> AppHost:
        return cast("AppHost", self.app)

    def compose(self) -> ComposeResult:
        settings = self.kw_app.settings
        yield Header(icon="⚙")
        with Horizontal(id="start-body"):
            with Vertical(id="start-pick"):
                yield Label("Built-in problem", classes="section")
                yield OptionList(*[Option(p.qualified, id=p.qualified) for p in self.choices.problems], id="problems")
                yield Static(id="problem-info")
                yield Label("Earlier runs (Ctrl+O: resume, or browse)", classes="section")
                yield OptionList(
                    *[Option(run_label(r), id=r["run_id"]) for r in self.choices.runs]
                    or [Option("(no runs yet)", disabled=True)],
                    id="runs",
                )
            with Vertical(id="start-form"):
                yield Label("Problem file (overrides the list)", classes="field")
                yield Input(placeholder="path/to/problem.py", id="file", compact=True)
                yield Label("Device", classes="field")
                yield Select(
                    [(d, d) for d in self.choices.devices],
                    value=self.choices.devices[0],
                    allow_blank=False,
                    id="device",
                    compact=True,
                )
                yield Label("Backend", classes="field")
                yield Select(
                    [("auto", "auto"), ("cpp", "cpp"), ("cuda", "cuda"), ("triton", "triton")],
                    value="auto",
                    allow_blank=False,
                    id="backend",
                    compact=True,
                )
                yield Label("Model", classes="field")
                yield Input(placeholder=settings.llm_model, id="model", compact=True)
                yield Label("Target (x vs torch.compile)", classes="field")
                yield Input("1.0", id="target", type="number", compact=True)
                yield Label("Rounds · cost budget (USD)", classes="field")
                with Horizontal(classes="pair"):
                    yield Input("8", id="rounds", type="integer", compact=True)
                    yield Input("20", id="cost", type="number", compact=True)
                yield Checkbox("Scripted LLM (the demo's problem)", id="scripted", compact=True)
                yield Checkbox("Approve each plan", id="approve", compact=True)
                yield Button("Start (Ctrl+R)", id="start", variant="primary", compact=True)
        yield Footer()

    def on_mount(self) -> None:
        self.title = "kernelwright · start"
        self.sub_title = "pick a problem, then Ctrl+R"
        problems = self.query_one("#problems", OptionList)
        names = [p.qualified for p in self.choices.problems]
        first = self.choices.devices[0]  # the device selected at first: its demo's problem
        demo_device = first if first in DEMOS else Device.CPU
        wanted = next((i for i, name in enumerate(names) if is_demo_problem(name, demo_device)), 0)
        if names:
            problems.highlighted = wanted
        problems.focus()

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        if event.option_list.id != "problems":
            return
        found = next((p for p in self.choices.problems if p.qualified == event.option.id), None)
        if found is not None:
            meta = found.meta
            shapes = "held-out shapes" if found.has_variants else "default shapes only"
            small = ", a small size" if found.has_small else ""
            self.query_one("#problem-info", Static).update(
                f"{meta.description or found.name} ({meta.dtype}; {shapes}{small})"
            )

    def chosen_problem(self) -> str | None:
        path = self.query_one("#file", Input).value.strip()
        if path:
            return path
        problems = self.query_one("#problems", OptionList)
        if problems.highlighted is None:
            return None
        return problems.get_option_at_index(problems.highlighted).id

    def build_request(self) -> RunRequest:
        """The run the form describes; a UsageError says what is wrong with it."""
        settings = self.kw_app.settings
        problem = self.chosen_problem()
        if not problem:
            raise UsageError("pick a problem or give a problem file")
        if problem.endswith(".py") and not Path(problem).expanduser().is_file():
            raise UsageError(f"no problem file {problem}")
        device = Device(str(self.query_one("#device", Select).value))
        backend = str(self.query_one("#backend", Select).value)
        approve = self.query_one("#approve", Checkbox).value
        if self.query_one("#scripted", Checkbox).value:
            if not is_demo_problem(problem, device):
                known = demo_for(device).problem
                raise UsageError(f"the scripted session on {device} knows only the {known!r} problem, not {problem!r}")
            return RunRequest(config=demo_config(settings, device), approve_plans=approve)
        try:
            target = float(self.query_one("#target", Input).value or 1.0)
            rounds = int(self.query_one("#rounds", Input).value or 8)
            cost = float(self.query_one("#cost", Input).value or 20.0)
        except ValueError as exc:
            raise UsageError(f"target, rounds and cost must be numbers: {exc}") from exc
        flags = RunFlags(
            device=device,
            backend=Backend(backend) if backend != "auto" else (Backend.CUDA if device == Device.CUDA else Backend.CPP),
            target=target,
            max_rounds=rounds,
            max_cost_usd=cost,
            model=self.query_one("#model", Input).value.strip() or None,
        )
        config = AgentConfig.from_settings(
            settings, str(Path(problem).expanduser()) if problem.endswith(".py") else problem, flags
        )
        return RunRequest(config=config, approve_plans=approve)

    def action_start(self) -> None:
        try:
            request = self.build_request()
        except KernelwrightError as exc:
            self.notify(exc.one_line(), title="cannot start", severity="error", timeout=10)
            return
        self.kw_app.open_run(request)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "start":
            self.action_start()

    def action_open_run(self) -> None:
        box = self.query_one("#runs", OptionList)
        if box.highlighted is None or not self.choices.runs:
            self.notify("pick an earlier run first (the lower list)", severity="warning")
            return
        run_id = box.get_option_at_index(box.highlighted).id
        if run_id is not None:
            self.kw_app.open_earlier_run(run_id)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        if event.option_list.id == "runs":
            self.action_open_run()
        else:
            self.action_start()


def start_choices(settings: Any) -> StartChoices:
    from kernelwright.problems.loader import builtin_problems
    from kernelwright.tools.evaluate import cuda_available

    devices = [Device.CUDA, Device.CPU] if cuda_available() else [Device.CPU]
    return StartChoices(problems=builtin_problems(), runs=runs.list_runs(Path(settings.runs_dir)), devices=devices)
