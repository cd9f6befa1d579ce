"""The candidate's side of a worker: one candidate, phase after phase, as the harness asks.

`CandidateSession` builds the candidate (its extensions through the harness's build step), runs
it trial by trial on inputs it draws from seeds it is told only then, checks what it did
(`checks/dynamic.py`, `tamper.py`), profiles it on every shape and times it against the
baselines on fresh inputs. Each phase ends with one typed report (`messages.py`); its outputs
go to the reference's process as files of data (or CUDA memory handles), never compared here.
"""

from __future__ import annotations

import os
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from kernelwright.harness.options import TrialPlan
from kernelwright.harness.sandbox.audit import AttemptLog
from kernelwright.harness.verdicts import Reason
from kernelwright.harness.workers.jobs import BUILD_FDS_VAR, WorkerJob, WorkShareRequest
from kernelwright.harness.workers.messages import (
    BuildRecord,
    BuildReport,
    OneThreadReport,
    OutputFile,
    Rejection,
    Report,
    SettleReport,
    Share,
    TimedRun,
    TimingReport,
    TrialReport,
    WorkShareReport,
)
from kernelwright.harness.workers.profiling import profile_shape  # its clock, captured before any candidate

_perf_counter = time.perf_counter  # captured before any candidate is imported


class Channel(Protocol):
    """The worker's protocol channel (`main.Channel`)."""

    audit: AttemptLog | None

    def send(self, event: str, phase: str, **data: Any) -> None: ...

    def report(self, phase: str, report: Report) -> None: ...


@dataclass(frozen=True)
class Pending:
    """A trial's output as it is (`live`) and as it was handed over (`copies`, made at `copied_at`)."""

    live: list[Any]
    copies: list[Any]
    copied_at: float


def _tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


class CandidateSession:
    """The state of one candidate worker across its phases."""

    def __init__(self, job: WorkerJob, chan: Channel) -> None:
        from kernelwright.harness.checks import dynamic as dynamic_checks
        from kernelwright.harness.checks import tamper
        from kernelwright.harness.checks.recorder import ExtensionRecorder
        from kernelwright.harness.fuzz import instance_for_drawing
        from kernelwright.problems import load_problem_file

        self.job, self.chan = job, chan
        if job.num_threads:
            import torch

            torch.set_num_threads(job.num_threads)
        dynamic_checks.disable_tf32()
        dynamic_checks.warm_up_harness()
        self.recorder = ExtensionRecorder()
        self.problem = load_problem_file(job.problem_path)
        self.inst = instance_for_drawing(self.problem, job.size, job.weight_seed)
        # The baselines are built before any candidate code runs (and torch.compile's own patches
        # to torch are then part of the snapshot below, not mistaken for the candidate's).
        self.baselines: Any = None
        self.prepare_error: str | None = None
        self.prepare_s = 0.0
        if job.mode == "candidate" and job.timing is not None:
            from kernelwright.harness.timing.run import prepare_baselines

            try:
                self.baselines = prepare_baselines(job, self.inst)
                self.prepare_s = self.baselines.seconds
            except Exception as exc:  # the reference or torch.compile failed: the harness reports it
                self.prepare_error = _tail("".join(traceback.format_exception(exc)), 30)
        import kernelwright.harness.outputs  # noqa: F401 (loaded before the snapshot: it and cuda_ipc are watched)

        self.state_before = dynamic_checks.global_state()
        self.ids_before = dynamic_checks.identity_snapshot()
        self.harness_before = tamper.harness_snapshot(self._baseline_models())
        self.module: Any = None
        self.model: Any = None
        self.model_error: str | None = None
        self.rejections: list[Rejection] = []
        self.previous: dict[str, list[Any]] = {}  # input buffers by shape, reused with new values
        self.ipc = False  # CUDA outputs handed over as memory handles (the harness's choice)
        self.handed: list[Any] = []  # tensors handed over so: alive until the harness's next command
        self.pending: Pending | None = None  # the last trial's output, until the harness's next command

    def _hand_over(self, output: Any, path: Path) -> None:
        """An output to the reference's process: as memory handles where the harness asked for
        them and the driver can export them, else as a file of data."""
        from kernelwright.harness.outputs import save_output, share_output

        if self.ipc and self.job.device == "cuda":
            kept = share_output(output, path)
            if kept is not None:
                self.handed += kept
                return
        save_output(output, path)

    def _check_tampering(self) -> None:
        from kernelwright.harness.checks import dynamic as dynamic_checks
        from kernelwright.harness.checks import tamper

        for reason, message in dynamic_checks.state_changes(self.state_before, dynamic_checks.global_state()):
            self.rejections.append((reason, message))
        for reason, message in dynamic_checks.identity_changes(self.ids_before, dynamic_checks.identity_snapshot()):
            self.rejections.append((reason, message))
        after = tamper.harness_snapshot(self._baseline_models())
        for reason, message in tamper.harness_changes(self.harness_before, after):
            self.rejections.append((reason, message))

    def _baseline_models(self) -> tuple[Any, ...]:
        return (self.baselines.reference,) if self.baselines is not None else ()

    def build(self) -> bool:
        self.chan.send("phase", "build")
        start = time.perf_counter()
        assert self.job.candidate_path is not None
        if self.chan.audit is not None:  # from here on, candidate code may run in this process
            self.chan.audit.armed = True
        try:
            from kernelwright.problems.candidate import load_candidate
            from kernelwright.problems.candidate.remote import PipeBuilds

            remote = PipeBuilds.from_env(os.environ.get(BUILD_FDS_VAR))
            self.module = load_candidate(
                self.job.candidate_path,
                self.job.build_cache,
                wrap=self.recorder.wrap,
                builds=self.recorder.builds,
                remote=remote,
                # Without the harness's build step (a worker started by hand), new builds stay private.
                private_root=self.job.out_dir / "build-cache" if remote is None else None,
            )
        except SyntaxError as exc:
            report = BuildReport(
                reason=Reason.MALFORMED_CANDIDATE, detail=f"line {exc.lineno}: syntax error: {exc.msg}"
            )
            self.chan.report("build", report)
            return False
        except Exception as exc:  # the candidate's import: a compiler error or any other failure
            text = "".join(traceback.format_exception_only(type(exc), exc))
            compiler = (
                "Error building extension" in text or "ninja" in text or type(exc).__name__ == "CalledProcessError"
            )
            report = BuildReport(
                reason=Reason.COMPILE_ERROR if compiler else Reason.MALFORMED_CANDIDATE,
                detail=_tail(text, 60),
                builds=[BuildRecord.model_validate(b) for b in self.recorder.builds],
            )
            self.chan.report("build", report)
            return False
        if not isinstance(getattr(self.module, "ModelNew", None), type):
            report = BuildReport(reason=Reason.MALFORMED_CANDIDATE, detail="the file defines no class ModelNew")
            self.chan.report("build", report)
            return False
        # The model is made now, under the build's time limit: a candidate may build its
        # extension in __init__ (a source made at run time), which is a build, not a call.
        self._ensure_model()
        self._check_tampering()
        report = BuildReport(
            ok=True,
            seconds=time.perf_counter() - start,
            prepare_s=self.prepare_s,
            prepare_error=self.prepare_error,
            builds=[BuildRecord.model_validate(b) for b in self.recorder.builds],
            rejections=self.rejections,
        )
        self.chan.report("build", report)
        return True

    def _ensure_model(self) -> bool:
        import torch

        if self.model is None and self.model_error is None:
            torch.manual_seed(self.job.weight_seed)
            try:
                self.model = self.module.ModelNew(*self.inst.init_inputs).to(self.job.device).eval()
            except Exception as exc:  # candidate code
                self.model_error = f"ModelNew(*init_inputs) raised {type(exc).__name__}: {exc}"
        return self.model is not None

    def _draw(self, plan: TrialPlan) -> list[Any]:
        from kernelwright.harness.fuzz import draw_inputs

        templates = self.inst.inputs if plan.variant is None else self.inst.variants[plan.variant]
        return draw_inputs(templates, self.problem.meta, plan, self.job.device)

    def trial(self, plan: TrialPlan, repeat: bool) -> None:
        """One correctness trial: inputs drawn from the plan's seed (known to this process only
        now), the candidate's output saved for the reference's process to compare."""
        import torch

        from kernelwright.harness.checks import dynamic as dynamic_checks
        from kernelwright.harness.checks import settling

        self.chan.send("phase", "trial")
        if not self._ensure_model():
            self.chan.report("trial", TrialReport(fatal=self.model_error))
            return
        job = self.job
        inputs = self._draw(plan)
        signature = repr([(tuple(v.shape), v.dtype, v.stride()) if isinstance(v, torch.Tensor) else v for v in inputs])
        reused = signature in self.previous
        if reused:  # same buffers, new values: a cache keyed by address would serve stale results
            for old, new in zip(self.previous[signature], inputs, strict=True):
                if isinstance(old, torch.Tensor):
                    old.copy_(new)
            inputs = self.previous[signature]
        self.previous[signature] = inputs
        before = [v.clone() if isinstance(v, torch.Tensor) else v for v in inputs]
        record = TrialReport(index=plan.index, reused=reused)
        try:
            with torch.no_grad():
                output = self.model(*inputs)
            if job.device == "cuda":
                torch.cuda.synchronize()
        except Exception as exc:  # candidate code
            text = f"{type(exc).__name__}: {exc}"
            if job.device == "cuda" and (
                "CUDA error" in text or "illegal" in text or isinstance(exc, torch.OutOfMemoryError)
            ):
                self.chan.send("error", "trial", detail=_tail(text, 20))
                raise
            record.status, record.detail, record.rejections = "raised", _tail(text, 8), self.rejections
            self.chan.report("trial", record)
            return
        outs = output if isinstance(output, list | tuple) else [output]
        if any(
            isinstance(o, torch.Tensor) and type(o) is not torch.Tensor and not isinstance(o, torch.nn.Parameter)
            for o in outs
        ):
            self.rejections.append(
                (Reason.LAZY_OUTPUT, f"forward returned a {type(outs[0]).__name__}, a tensor subclass")
            )
        # The output as it was right after the call is what the reference's process compares
        # (`checks/settling.py`); the live one is kept until the next command, in case it is asked
        # whether it settled.
        live = settling.output_tensors(output)
        look = settling.first_look(live)
        copy = settling.copy_output(output)
        copies = settling.output_tensors(copy)
        if settling.changed_while_copied(look, copies):  # (this waits for the copy on a GPU)
            self.rejections.append(
                (
                    Reason.LAZY_OUTPUT,
                    "the output changed while it was being copied right after forward returned "
                    "(work finishing outside the call)",
                )
            )
        self.pending = Pending(live, copies, settling.now())
        if dynamic_checks.aliases_input(output, inputs):
            record.alias = True
        modified = [
            i
            for i, (a, b) in enumerate(zip(before, inputs, strict=True))
            if isinstance(a, torch.Tensor) and not torch.equal(a, b)
        ]
        if modified:
            record.modified_inputs = modified
        self._hand_over(copy, job.out_dir / f"candidate_{plan.index}.out")
        del copy
        if repeat:  # the first output stays alive: memory it still holds cannot be handed out again
            with torch.no_grad():
                again = self.model(*before)
            if job.device == "cuda":
                torch.cuda.synchronize()
            if dynamic_checks.shares_memory(again, output):
                record.output_reused = True
            self._hand_over(again, job.out_dir / f"candidate_{plan.index}_repeat.out")
            del again
        record.devices = [str(o.device) for o in outs if isinstance(o, torch.Tensor)]
        record.status, record.rejections = "ok", self.rejections
        self.chan.report("trial", record)

    def settle(self) -> None:
        """Asked after the last trial's output failed its comparison: had that output changed
        `settling.WAIT_S` after it was copied? Then it was not final when forward returned."""
        from kernelwright.harness.checks import settling

        self.chan.send("phase", "settle")
        report = SettleReport(looked=self.pending is not None)
        if self.pending is not None:
            report.settled = settling.settled_since(
                self.pending.copies, self.pending.live, self.pending.copied_at, self.job.device
            )
            if not report.settled:
                self.rejections.append(
                    (
                        Reason.LAZY_OUTPUT,
                        "the output kept changing after forward returned (work finishing outside the call)",
                    )
                )
        report.rejections = self.rejections
        self.chan.report("settle", report)

    def workshare(self, request: WorkShareRequest) -> None:
        """Profile the reference and the candidate on every shape (`plans`: the default shapes and
        each variant, on inputs drawn now): how much of the work did library ops do, against the
        reference's whole forward? The last profiled call's output is saved for the reference's
        process to check: a candidate that behaves differently while profiled is caught there."""
        self.chan.send("phase", "workshare")
        shares: list[Share] = []
        if self._ensure_model():
            reference = self._reference_model()
            shares = [self._profile(k, plan, request, reference) for k, plan in enumerate(request.plans)]
        self._check_tampering()
        report = WorkShareReport(
            shares=shares, fatal=self.model_error, rejections=self.rejections, ext_calls=dict(self.recorder.calls)
        )
        self.chan.report("workshare", report)

    def _reference_model(self) -> Any:
        import torch

        torch.manual_seed(self.job.weight_seed)
        return self.inst.make_model().to(self.job.device).eval()

    def _profile(self, k: int, plan: TrialPlan, request: WorkShareRequest, reference: Any, tag: str = "") -> Share:
        """One shape's work-share profile on inputs drawn from `plan` (`profiling.profile_shape`),
        its output handed over as `profiled_{tag}{k}.out`."""
        share, output = profile_shape(
            self.model, reference, self._draw(plan), plan, request, self.recorder, self.job.device
        )
        if share.error is not None:
            return share
        path = self.job.out_dir / f"profiled_{tag}{k}.out"
        self._hand_over(output, path)
        return share.model_copy(update={"file": str(path)})

    def one_thread(self, request: WorkShareRequest, median_ms: float) -> None:
        """The CPU's one-thread look (`OneThreadReport`): the default shapes (`request.plans[0]`)
        profiled, then the candidate timed alone on fresh timing inputs, both with one intra-op
        thread (torch's and the extension's OpenMP: one runtime), the configured count restored
        after. `median_ms`: its median in the timing phase."""
        import torch

        from kernelwright.harness.timing.run import time_alone_one_thread

        self.chan.send("phase", "onethread")
        threads = torch.get_num_threads()
        report = OneThreadReport(threads=threads)
        if self.baselines is None or not request.plans or not self._ensure_model():
            report.fatal = self.model_error or "no timing inputs or no default shapes to look at"
            self.chan.report("onethread", report)
            return
        reference = self._reference_model()
        torch.set_num_threads(1)
        try:
            report.share = self._profile(0, request.plans[0], request, reference, tag="one_thread_")
            self.recorder.clear_fastest()
            calls_before = sum(self.recorder.calls.values())
            with self.recorder.window():
                alone = time_alone_one_thread(self.model, self.baselines.pool, median_ms)
        finally:
            torch.set_num_threads(threads)
        report.timed, report.candidate_calls = alone.stats, alone.calls
        report.extension_fastest_s = dict(self.recorder.fastest)
        report.extension_calls = sum(self.recorder.calls.values()) - calls_before
        self._check_tampering()
        plan, output = alone.output
        path = self.job.out_dir / "one_thread_timed.out"
        self._hand_over(output, path)
        report.timed_output = OutputFile(plan=plan, file=str(path))
        report.rejections = self.rejections
        self.chan.report("onethread", report)

    def timing(self, samples: int) -> None:
        from kernelwright.harness.timing.run import time_candidate

        self.chan.send("phase", "timing")
        if self.baselines is None:
            raise RuntimeError(f"the baselines could not be prepared:\n{self.prepare_error or 'timing is off'}")
        self._check_tampering()
        ext_before, calls_before = self.recorder.seconds, sum(self.recorder.calls.values())
        self.recorder.clear_fastest()
        with self.recorder.window():
            figures, kept = time_candidate(self.job, self.model, self.baselines, samples=samples)
        report = TimingReport(
            result=TimedRun.model_validate(figures.result.model_dump(mode="json")),
            compile_time_s=figures.compile_time_s,
            prepare_s=figures.prepare_s,
            input_sets=figures.input_sets,
            patched_timers=figures.patched_timers,
            sampled_calls=figures.sampled_calls,
            candidate_host_s=figures.candidate_host_s,
            candidate_calls=figures.candidate_calls,
            extension_s=self.recorder.seconds - ext_before,
            extension_fastest_s=dict(self.recorder.fastest),
            extension_calls=sum(self.recorder.calls.values()) - calls_before,
            threads=figures.threads,
            one_thread=dict(figures.one_thread),
        )
        self._check_tampering()
        for k, (plan, output) in enumerate(kept):
            path = self.job.out_dir / f"timed_{k}.out"
            self._hand_over(output, path)
            report.timed_outputs.append(OutputFile(plan=plan, file=str(path)))
        report.rejections = self.rejections
        self.chan.report("timing", report)
