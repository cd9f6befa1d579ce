"""The main screen: one run, live or finished. Left, the step timeline and the candidate tree;
right, the selected step's detail and the selected candidate's code, diff, profile, and the
speedup chart; above, where the run stands and its budget meters. Every steering action is a key
in the footer and a command in the palette (Ctrl+P).

The graph runs in a thread (`launch.RunThread`); its events arrive as `AgentEvent` messages and
are folded into one `RunProgress`, which every widget renders. A finished run is browsed from its
trajectory.json, read-only (export, branch and report chat still work).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from pathlib import Path
from typing import Any, cast

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Footer, Header, TabbedContent, TabPane

from kernelwright.agent import runs
from kernelwright.agent.configuration import new_run_id
from kernelwright.agent.events import _Event
from kernelwright.agent.progress import Candidate, RunProgress
from kernelwright.agent.runner import RunOutcome
from kernelwright.tui.host import AppHost
from kernelwright.tui.launch import RunRequest, RunThread
from kernelwright.tui.messages import AgentEvent, RunEnded, one_line
from kernelwright.tui.screens.plan import PlanAnswer, PlanScreen
from kernelwright.tui.screens.prompt import ConfirmScreen, PromptScreen
from kernelwright.tui.widgets.candidates import CandidateTree
from kernelwright.tui.widgets.chart import SpeedupChart
from kernelwright.tui.widgets.detail import Pane, code_view, diff_view, profile_view, read_source, step_text
from kernelwright.tui.widgets.meters import Meters
from kernelwright.tui.widgets.timeline import Timeline

log = logging.getLogger(__name__)


class RunScreen(Screen[None]):
    BINDINGS = [
        Binding("p", "pause", "Pause/resume"),
        Binding("a", "approval", "Approve plans"),
        Binding("h", "hint", "Hint"),
        Binding("s", "stop", "Stop, keep best"),
        Binding("b", "branch", "Branch"),
        Binding("e", "export", "Export"),
        Binding("r", "report", "Report chat"),
        Binding("q", "quit_run", "Quit"),
        Binding("1", "tab('tab-step')", "Step", show=False),
        Binding("2", "tab('tab-code')", "Code", show=False),
        Binding("3", "tab('tab-diff')", "Diff", show=False),
        Binding("4", "tab('tab-profile')", "Profile", show=False),
        Binding("5", "tab('tab-chart')", "Chart", show=False),
    ]

    def __init__(self, request: RunRequest, *, events: list[_Event] | None = None) -> None:
        super().__init__()
        self.request = request
        self.config = request.config
        self.read_only = request.read_only
        self.progress = RunProgress()
        self.thread: RunThread | None = None
        self._replay = events
        self._step_position: int | None = None
        self._candidate: int | None = None
        self._notes_seen = 0
        self._plan_open = False

    @property
    def kw_app(self) -> AppHost:
        return cast("AppHost", self.app)

    # -- layout ----------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Header(icon="⚙")
        yield Meters(id="meters")
        with Horizontal(id="body"):
            with Vertical(id="left"):
                yield Timeline(id="timeline")
                yield CandidateTree(id="candidates")
            with TabbedContent(id="tabs", initial="tab-step"):
                with TabPane("Step", id="tab-step"):
                    yield Pane(id="step")
                with TabPane("Code", id="tab-code"):
                    yield Pane(id="code")
                with TabPane("Diff", id="tab-diff"):
                    yield Pane(id="diff")
                with TabPane("Profile", id="tab-profile"):
                    yield Pane(id="profile")
                with TabPane("Chart", id="tab-chart"):
                    yield SpeedupChart(id="chart")
        yield Footer()

    def on_mount(self) -> None:
        scripted = f" (scripted: {self.config.scripted})" if self.config.scripted else ""
        self.title = f"kernelwright · {self.config.problem}{scripted}"
        self.sub_title = self.config.run_id + (" · read-only" if self.read_only else "")
        if self._replay is not None or self.read_only:
            events = self._replay if self._replay is not None else runs.read_events(self.config.run_dir)
            if self.request.replay_events is not None:
                events = events[: self.request.replay_events]
            for event in events:
                self.progress.apply(event)
            if not events:
                self.progress.notes.append("this run recorded no events")
            self.refresh_all()
            return
        self.thread = RunThread(
            self.request,
            self.kw_app.settings,
            self.kw_app.backend,
            on_event=self._from_run,
            on_end=self._run_ended,
        )
        self.thread.start()
        self.set_interval(1.0, self._tick)
        self.refresh_all()

    def _tick(self) -> None:
        """The wall meter moves while a step runs (events only come between steps)."""
        if self.progress.running:
            self.progress.now = time.time()
            approval = self.thread.control.approval if self.thread is not None else False
            self.query_one(Meters).show(self.progress, read_only=self.read_only, approval=approval)

    # -- the run's messages ----------------------------------------------------------------------
    def _from_run(self, event: _Event) -> None:
        self.post_message(AgentEvent(event))  # from the run's thread: post_message is thread-safe

    def _run_ended(self, outcome: RunOutcome | None, error: BaseException | None) -> None:
        self.post_message(RunEnded(outcome, error))

    def on_agent_event(self, message: AgentEvent) -> None:
        self.progress.apply(message.event)
        if message.event.kind == "plan_awaiting_approval":  # type: ignore[attr-defined]
            self._ask_plan(message.event.plan)  # type: ignore[attr-defined]
        self.refresh_all()

    def on_run_ended(self, message: RunEnded) -> None:
        if message.error is not None:
            line = one_line(message.error)
            if not self.progress.stop_reason:  # it failed before the run's own end event
                self.progress.status = "failed"
                self.progress.stop_reason = f"could not run: {line}"
            self.notify(line, title="the run ended with an error", severity="error", timeout=20)
            step = self.progress.current_step()
            if step is not None:
                step.status = "failed"
                step.detail.append(f"error: {line}")
        self.refresh_all()

    # -- rendering -------------------------------------------------------------------------------
    def refresh_all(self) -> None:
        progress = self.progress
        approval = self.thread.control.approval if self.thread is not None else self.request.approve_plans
        self.query_one(Meters).show(progress, read_only=self.read_only, approval=approval)
        self.query_one(Timeline).show(progress)
        self.query_one(CandidateTree).show(progress)
        self._show_step()
        self._show_candidate()
        self.query_one(SpeedupChart).show(progress)
        for note in progress.notes[self._notes_seen :]:
            if note.startswith("the run stopped"):
                self.notify(note, severity="error", timeout=15)
            else:
                self.notify(note, timeout=8)
        self._notes_seen = len(progress.notes)

    def _show_step(self) -> None:
        steps = self.progress.steps
        position = self._step_position if self._step_position is not None else len(steps) - 1
        step = steps[position] if 0 <= position < len(steps) else None
        self.query_one("#step", Pane).set(step_text(step))

    def selected_candidate(self) -> Candidate | None:
        cands = self.progress.candidates
        if self._candidate is not None and self._candidate in cands:
            return cands[self._candidate]
        ordered = self.progress.ordered_candidates()
        return ordered[-1] if ordered else None

    def _show_candidate(self) -> None:
        cand = self.selected_candidate()
        self.query_one("#code", Pane).set(code_view(cand))
        self.query_one("#diff", Pane).set(diff_view(cand, self.progress))
        self.query_one("#profile", Pane).set(profile_view(cand, self.progress))

    def on_timeline_step_chosen(self, message: Timeline.StepChosen) -> None:
        self._step_position = message.position
        self._show_step()

    def on_candidate_tree_candidate_chosen(self, message: CandidateTree.CandidateChosen) -> None:
        self._candidate = message.index
        self._show_candidate()

    def action_tab(self, tab: str) -> None:
        self.query_one(TabbedContent).active = tab

    # -- steering --------------------------------------------------------------------------------
    def _live(self, what: str) -> RunThread | None:
        if self.read_only:
            self.notify(f"this run is finished: {what} needs a live run", severity="warning")
            return None
        if self.thread is None or not self.thread.alive:
            self.notify(f"the run is not running: nothing to {what}", severity="warning")
            return None
        return self.thread

    def action_pause(self) -> None:
        thread = self._live("pause")
        if thread is None:
            return
        if self.progress.status == "paused" or thread.control.pause_requested:
            thread.control.resume()
            if self.progress.status == "pausing":
                self.progress.status = "running"
            self.notify("resuming")
        else:
            thread.control.pause()
            self.progress.status = "pausing"
            self.notify("pausing after the step that is running")
        self.refresh_all()

    def action_approval(self) -> None:
        thread = self._live("approve plans")
        if thread is None:
            return
        thread.control.require_approval(not thread.control.approval)
        self.notify("plans now need your approval" if thread.control.approval else "plans go to the coder at once")
        self.refresh_all()

    def action_hint(self) -> None:
        thread = self._live("hint")
        if thread is None:
            return

        def take(text: str | None) -> None:
            if text and text.strip():
                thread.control.hint(text)
                self.notify(f"hint queued for the next plan: {text.strip()[:80]}")

        self.app.push_screen(
            PromptScreen("A hint for the next planner prompt", placeholder="e.g. use float4 loads"), take
        )

    def action_stop(self) -> None:
        thread = self._live("stop")
        if thread is None:
            return
        thread.control.stop()
        self.notify("stopping after the step that is running; the best candidate is kept")

    def _ask_plan(self, plan: str) -> None:
        if self._plan_open or self.thread is None:
            return
        self._plan_open = True
        control = self.thread.control

        def answer(result: PlanAnswer | None) -> None:
            self._plan_open = False
            what, text = result or ("approve", None)
            if what == "stop":
                control.stop()
            control.answer_plan(text if what == "edit" else None)

        self.app.push_screen(PlanScreen(plan, self.progress.round), answer)

    def action_export(self) -> None:
        cand = self.selected_candidate()
        if cand is None:
            self.notify("no candidate to export yet", severity="warning")
            return
        source = read_source(cand)
        if source is None:
            self.notify(f"the file of candidate {cand.index} is missing", severity="error")
            return
        name = self.config.problem.replace("/", "_").replace(".py", "")
        default = str(Path.cwd() / f"{Path(name).name}_candidate{cand.index}.py")

        def write(path: str | None) -> None:
            if not path:
                return
            target = Path(path).expanduser()
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(source)
            except OSError as exc:
                self.notify(f"could not write {target}: {exc.strerror or exc}", severity="error")
                return
            warn = "" if cand.verdict == "correct" else f" (it is {cand.verdict}: not a working replacement)"
            self.notify(f"candidate {cand.index} exported to {target}{warn}")

        self.app.push_screen(
            PromptScreen(f"Export candidate {cand.index} (a drop-in ModelNew file) to", value=default), write
        )

    def action_branch(self) -> None:
        cand = self.selected_candidate()
        if cand is None:
            self.notify("no candidate to branch from yet", severity="warning")
            return
        if self.thread is not None and self.thread.alive:
            self.notify("stop the run first (s), then branch from a candidate", severity="warning")
            return
        config = dataclasses.replace(
            self.config,
            run_id=new_run_id(self.config.problem),
            branch_from=self.config.run_id,
            branch_candidate=cand.index,
            approve_plans=False,
        )
        self.kw_app.open_run(RunRequest(config=config))

    def action_report(self) -> None:
        cand = self.selected_candidate()
        report = cand.report if cand is not None else None

        def open_report(path: str | None) -> None:
            if path:
                self.kw_app.open_report(Path(path).expanduser())

        if report and Path(report).is_file():
            open_report(report)
            return
        why = "this candidate has no Nsight Compute report" if cand is not None else "no candidate selected"
        self.app.push_screen(
            PromptScreen(f"{why}: open a .ncu-rep file", placeholder="path/to/report.ncu-rep"), open_report
        )

    def action_quit_run(self) -> None:
        if self.thread is None or not self.thread.alive:
            self.app.exit(0)
            return

        def leave(yes: bool | None) -> None:
            if yes:
                self.leave()
                self.app.exit(0)

        self.app.push_screen(
            ConfirmScreen(
                f"Leave the run? It stops at its next checkpoint and stays resumable:\n"
                f"kernelwright tui --resume {self.config.run_id}"
            ),
            leave,
        )

    def leave(self) -> None:
        if self.thread is not None and self.thread.alive:
            self.thread.leave()

    def commands(self) -> list[tuple[str, str, Any]]:
        """(title, help, action) of every steering action, for the command palette."""
        return [
            ("Pause or resume the run", "stops after the running step; state is checkpointed", self.action_pause),
            (
                "Toggle plan approval",
                "ask for approval (or an edit) of each plan before code is written",
                self.action_approval,
            ),
            ("Give a hint", "queued into the next planner prompt", self.action_hint),
            (
                "Stop and keep the best",
                "end the run after the running step; the best candidate stays",
                self.action_stop,
            ),
            ("Branch from the selected candidate", "a new run that starts from it", self.action_branch),
            ("Export the selected candidate", "write it as a drop-in ModelNew file", self.action_export),
            ("Open a report chat", "ask questions about an Nsight Compute report", self.action_report),
            ("Leave the run", "it stays resumable", self.action_quit_run),
            (
                "Show the step's detail (1)",
                "the plan, tool calls, candidates, errors, the review",
                lambda: self.action_tab("tab-step"),
            ),
            ("Show the candidate's code (2)", "with syntax highlighting", lambda: self.action_tab("tab-code")),
            (
                "Show the diff against its parent (3)",
                "what this candidate changed",
                lambda: self.action_tab("tab-diff"),
            ),
            (
                "Show the profile (4)",
                "its Nsight Compute digest and the diff against the best",
                lambda: self.action_tab("tab-profile"),
            ),
            (
                "Show the speedup chart (5)",
                "every candidate's speedup and the best so far",
                lambda: self.action_tab("tab-chart"),
            ),
        ]
