"""The reference's worker, for the whole session: it holds the expected outputs and compares.

It draws every trial's inputs from their seeds (`fuzz.draw_inputs`, on its device), runs the
PyTorch reference (TF32 off) and keeps the outputs in its own memory, on the device, as far as a
budget allows (beyond it, a trial's reference is recomputed when it is compared), each with the
round-off slack measured on the reference (`fuzz.roundoff_of` against fp64 for a float32 problem,
`fuzz.lowp_slack` against float32 for a float16/bfloat16 one). Nothing of the reference is ever
written to a file: no candidate process can find the expected answers at any moment, and a
sandboxed candidate cannot read another process's memory (Landlock scopes ptrace).

After its `result reference` message it serves commands on stdin until `stop`:
- `compare JSON` (`CompareRequest`): read a candidate's output file as data only
  (`outputs.load_output`, straight onto the device; on CUDA the file may instead name memory
  handles, copied device to device: `cuda_ipc`), and compare it with the reference for that plan
  (a correctness trial, or an input set the candidate was timed or profiled on, drawn from the
  seed the candidate's worker reports). The answer is the comparison's figures, never the values.
- `prepare`: make the baselines (eager, torch.compile compiled and run once, the rotating input
  sets) and keep them for the session: sent right after the reference, while nothing is timed
  (a session opened ahead does it while the previous problem is judged), so a later `baselines`
  only times.
- `baselines [SPACER_MS]`: time the baselines as a candidate's worker does, here, where no
  candidate code ever ran: the clean figures the candidate's process must agree with (with a
  busy stand-in of SPACER_MS interleaved where the candidate was). Without `prepare` (the harness
  sends it on CUDA, where the input sets live on the device), each call makes them and lets them
  go: on the CPU they would take the host memory the comparisons need.

The harness process never holds the reference outputs and never imports a candidate; this process
never runs candidate code.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Protocol

from kernelwright.harness.capacity import available_memory
from kernelwright.harness.options import TrialPlan
from kernelwright.harness.verdicts import Reason
from kernelwright.harness.workers.jobs import CompareRequest, WorkerJob
from kernelwright.harness.workers.messages import (
    BaselinesReport,
    CleanFigures,
    CompareReport,
    PrepareReport,
    ReferenceReport,
    ReferenceTrial,
    Report,
)

if TYPE_CHECKING:
    from kernelwright.harness.fuzz import Slack


class Channel(Protocol):
    """The worker's protocol channel (`main.Channel`)."""

    def send(self, event: str, phase: str, **data: Any) -> None: ...

    def report(self, phase: str, report: Report) -> None: ...

    def wait_command(self) -> str: ...


CACHE_SHARE = 0.25  # of the device's free memory (or the host's available memory) for held outputs


def _nbytes(output: Any) -> int:
    import torch

    if isinstance(output, torch.Tensor):
        return output.numel() * output.element_size()
    if isinstance(output, list | tuple):
        return sum(_nbytes(o) for o in output)
    return 0


def _shapes(values: list[Any]) -> list[str]:
    import torch

    return [
        f"{str(v.dtype).replace('torch.', '')}{list(v.shape)}" if isinstance(v, torch.Tensor) else repr(v)
        for v in values
    ]


def _free(device: str) -> int:
    """Memory free now: the device's, or the host's available memory (2 GiB where not known)."""
    import torch

    if device == "cuda":
        free, _ = torch.cuda.mem_get_info()
        return int(free)
    return available_memory() or 2 << 30


def _budget(device: str) -> int:
    return int(_free(device) * CACHE_SHARE)


class Oracle:
    """The reference model, its outputs per trial, and the comparisons."""

    def __init__(self, job: WorkerJob) -> None:
        import torch

        from kernelwright.harness.fuzz import instance_for_drawing
        from kernelwright.problems import load_problem_file

        self.job = job
        self.problem = load_problem_file(job.problem_path)
        self.inst = instance_for_drawing(self.problem, job.size, job.weight_seed)
        torch.manual_seed(job.weight_seed)
        self.model = self.inst.make_model().to(job.device).eval()
        self.held: dict[int, tuple[Any, Slack]] = {}
        self.budget = _budget(job.device)
        self.used = 0

    def _inputs(self, plan: TrialPlan) -> list[Any]:
        from kernelwright.harness.fuzz import draw_inputs

        templates = self.inst.inputs if plan.variant is None else self.inst.variants[plan.variant]
        return draw_inputs(templates, self.problem.meta, plan, self.job.device)

    def _sync(self) -> None:
        import torch

        if self.job.device == "cuda":
            torch.cuda.synchronize()

    def reference(self, plan: TrialPlan) -> tuple[Any, Slack, float, list[str]]:
        """(output, its round-off slack, forward ms, input shapes) of the reference for `plan`."""
        import torch

        from kernelwright.harness.fuzz import Slack, lowp_slack, roundoff_of

        inputs = self._inputs(plan)
        self._sync()
        start = time.perf_counter()
        with torch.no_grad():
            output = self.model(*inputs)
        self._sync()
        ms = (time.perf_counter() - start) * 1e3
        dtype = self.problem.meta.dtype
        if dtype == "float32":
            slack = Slack(roundoff=roundoff_of(self.model, inputs, output))
        elif dtype in ("float16", "bfloat16"):
            atol, rtol = self.problem.meta.tolerance()
            slack = lowp_slack(self.model, inputs, output, atol, rtol, _free(self.job.device))
        else:
            slack = Slack()
        return output, slack, ms, _shapes(inputs)

    def run_trials(self) -> list[ReferenceTrial]:
        records = []
        for plan in self.job.trials:
            try:
                output, slack, ms, shapes = self.reference(plan)
            except Exception as exc:  # the reference may not accept strided inputs: skip that trial
                if plan.contiguous:
                    raise
                detail = f"the reference rejects non-contiguous inputs: {exc}"
                record = ReferenceTrial(index=plan.index, status="skipped", detail=detail)
            else:
                record = ReferenceTrial(
                    index=plan.index, status="ok", shapes=shapes, roundoff=slack.roundoff, ms=ms, detail=slack.note
                )
                size = _nbytes(output) + _nbytes(slack.higher)
                if self.used + size <= self.budget:
                    self.held[plan.index] = (output, slack)
                    self.used += size
            records.append(record)
        return records

    def expected(self, plan: TrialPlan) -> tuple[Any, Slack]:
        held = self.held.get(plan.index) if plan in self.job.trials else None
        if held is not None:
            return held
        output, slack, _, _ = self.reference(plan)
        return output, slack

    def compare(self, request: CompareRequest) -> CompareReport:
        from kernelwright.harness.cuda_ipc import IpcError
        from kernelwright.harness.fuzz import compare_outputs, compare_trial, is_constant
        from kernelwright.harness.outputs import load_output

        start = time.perf_counter()
        counts: dict[str, int] = {}
        try:
            got, unreadable = load_output(request.path, self.job.device, counts)
            second, unreadable_second = (
                load_output(request.repeat_path, self.job.device, counts)
                if request.repeat_path is not None
                else (None, None)
            )
        except IpcError as exc:  # not here, or a forged handle: the harness goes on with files
            detail = f"its output could not be opened as CUDA memory handles: {exc}"
            return CompareReport(reason=Reason.OUTPUT_MISMATCH, detail=detail, ipc_unavailable=str(exc))
        if unreadable is not None:
            return CompareReport(reason=Reason.OUTPUT_MISMATCH, detail=unreadable)
        expected, slack = self.expected(request.plan)
        cmp = compare_trial(expected, got, request.atol, request.rtol, slack)
        answer = CompareReport(
            passed=cmp.passed,
            reason=cmp.reason,
            detail=cmp.detail,
            max_abs_error=cmp.max_abs_error,
            max_rel_error=cmp.max_rel_error,
            mismatch_fraction=cmp.mismatch_fraction,
            first_mismatches=[list(i) for i in cmp.first_mismatches],
            constant_candidate=is_constant(got),
            constant_reference=is_constant(expected),
        )
        if cmp.passed and request.repeat_path is not None:
            if unreadable_second is not None:
                answer.passed, answer.reason, answer.detail = False, Reason.OUTPUT_MISMATCH, unreadable_second
            else:
                again = compare_outputs(got, second, request.atol, request.rtol, slack.allowed())
                if not again.passed:
                    answer.passed, answer.reason = False, Reason.NONDETERMINISTIC
                    answer.detail = f"two runs on the same inputs differ: {again.detail}"
        answer.seconds = time.perf_counter() - start
        answer.handed_over = counts.get("ipc", 0)
        return answer


def _to(value: Any, device: str) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, list | tuple):
        return [_to(v, device) for v in value]
    return value


def serve(job: WorkerJob, chan: Channel) -> None:
    """The reference worker's life: run every trial, report, then answer `compare` commands."""
    from kernelwright.harness.checks.dynamic import disable_tf32

    chan.send("phase", "reference")
    disable_tf32()
    oracle = Oracle(job)
    trials = oracle.run_trials()
    chan.report("reference", ReferenceReport(trials=trials, held=len(oracle.held)))
    prepared = None  # the baselines, once made (`prepare`), kept for the session
    while True:
        command, _, argument = chan.wait_command().partition(" ")
        if command == "compare":
            chan.send("phase", "compare")
            chan.report("compare", oracle.compare(CompareRequest.model_validate_json(argument)))
        elif command == "prepare":
            from kernelwright.harness.timing.run import prepare_baselines

            chan.send("phase", "prepare")
            prepared = prepare_baselines(job, oracle.inst)
            chan.report("prepare", PrepareReport(seconds=prepared.seconds, compile_time_s=prepared.compile_time_s))
        elif command == "baselines":
            from kernelwright.harness.timing.run import prepare_baselines, time_baselines

            chan.send("phase", "baselines")
            spacer = float(argument or 0.0)
            made = prepared if prepared is not None else prepare_baselines(job, oracle.inst)  # not kept
            times = time_baselines(job, made, spacer_ms=spacer)
            report = BaselinesReport(times={name: CleanFigures.model_validate(f) for name, f in times.items()})
            chan.report("baselines", report)
        else:
            return
