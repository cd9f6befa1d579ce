"""The worker process: `python -m kernelwright.harness.workers.main JOB.json`.

A reference worker (`oracle.py`) runs the PyTorch reference on every trial and keeps its outputs;
a candidate worker builds the candidate, runs it trial by trial on inputs it draws from seeds it
is told only then (as the harness asks on stdin), checks what it did, profiles it on every shape
and times it against the baselines on fresh inputs. The candidate's code never runs in the
process that holds the reference outputs, and its outputs are compared there, not here. Protocol: JSON lines on the original stdout; everything else (compiler
output, prints) goes to stderr, which the harness keeps as the log.

First thing, still single-threaded and before torch is imported, the worker confines itself
(`confine.py`: network namespace, Landlock, limits) and installs the audit hook that reports what
candidate code attempts (`audit.py`); it then tells the harness which layers are in force.
"""

from __future__ import annotations

import functools
import os
import sys
import time
import traceback
from pathlib import Path
from typing import IO, Any

from kernelwright.harness.options import TrialPlan
from kernelwright.harness.sandbox.audit import AttemptLog
from kernelwright.harness.workers.jobs import (
    BUILD_FDS_VAR,
    CandidateAssignment,
    TrialRequest,
    WorkerJob,
    WorkerMessage,
    WorkShareRequest,
)

_perf_counter = time.perf_counter  # captured before any candidate is imported


class Channel:
    def __init__(self) -> None:
        self._out: IO[str] = os.fdopen(os.dup(1), "w", buffering=1)
        os.dup2(2, 1)  # stray prints and compiler output join stderr
        sys.stdout = sys.stderr
        self.audit: AttemptLog | None = None
        self.isolation: Any = None  # what `_isolate` put this process under (an Isolation)
        self._seq = 0

    def send(self, event: str, phase: str, **data: Any) -> None:
        if self.audit is not None and self.audit.attempts and event != "phase":
            data["sandbox_attempts"] = list(self.audit.attempts)
        self._seq += 1
        message = WorkerMessage(event=event, phase=phase, data=data, seq=self._seq)  # type: ignore[arg-type]
        self._out.write(message.model_dump_json() + "\n")
        self._out.flush()

    def wait_command(self) -> str:
        line = sys.stdin.readline()
        return line.strip() or "stop"


def _tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


class CandidateSession:
    """The state of one candidate worker across its phases."""

    def __init__(self, job: WorkerJob, chan: Channel) -> None:
        from kernelwright.harness.building.recorder import ExtensionRecorder
        from kernelwright.harness.checks import dynamic as dynamic_checks
        from kernelwright.harness.checks import tamper
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
        self.rejections: list[tuple[str, str]] = []
        self.previous: dict[str, list[Any]] = {}  # input buffers by shape, reused with new values
        self.ipc = False  # CUDA outputs handed over as memory handles (the harness's choice)
        self.handed: list[Any] = []  # tensors handed over so: alive until the harness's next command

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
            self.rejections.append((reason.value, message))
        for reason, message in dynamic_checks.identity_changes(self.ids_before, dynamic_checks.identity_snapshot()):
            self.rejections.append((reason.value, message))
        after = tamper.harness_snapshot(self._baseline_models())
        for reason, message in tamper.harness_changes(self.harness_before, after):
            self.rejections.append((reason.value, message))

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
            self.chan.send(
                "result",
                "build",
                ok=False,
                reason="malformed_candidate",
                detail=f"line {exc.lineno}: syntax error: {exc.msg}",
            )
            return False
        except Exception as exc:  # the candidate's import: a compiler error or any other failure
            text = "".join(traceback.format_exception_only(type(exc), exc))
            compiler = (
                "Error building extension" in text or "ninja" in text or type(exc).__name__ == "CalledProcessError"
            )
            self.chan.send(
                "result",
                "build",
                ok=False,
                reason="compile_error" if compiler else "malformed_candidate",
                detail=_tail(text, 60),
                builds=self.recorder.builds,
            )
            return False
        if not isinstance(getattr(self.module, "ModelNew", None), type):
            self.chan.send(
                "result", "build", ok=False, reason="malformed_candidate", detail="the file defines no class ModelNew"
            )
            return False
        # The model is made now, under the build's time limit: a candidate may build its
        # extension in __init__ (a source made at run time), which is a build, not a call.
        self._ensure_model()
        self._check_tampering()
        self.chan.send(
            "result",
            "build",
            ok=True,
            seconds=time.perf_counter() - start,
            prepare_s=self.prepare_s,
            prepare_error=self.prepare_error,
            builds=self.recorder.builds,
            rejections=self.rejections,
        )
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

        self.chan.send("phase", "trial")
        if not self._ensure_model():
            self.chan.send("result", "trial", fatal=self.model_error)
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
        record: dict[str, Any] = {"index": plan.index, "reused": reused}
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
            self.chan.send(
                "result", "trial", **record, status="raised", detail=_tail(text, 8), rejections=self.rejections
            )
            return
        outs = output if isinstance(output, list | tuple) else [output]
        if any(
            isinstance(o, torch.Tensor) and type(o) is not torch.Tensor and not isinstance(o, torch.nn.Parameter)
            for o in outs
        ):
            self.rejections.append(("lazy_output", f"forward returned a {type(outs[0]).__name__}, a tensor subclass"))
        if not dynamic_checks.output_settles(output, device=job.device):
            self.rejections.append(
                ("lazy_output", "the output kept changing after forward returned (work finishing outside the call)")
            )
        if dynamic_checks.aliases_input(output, inputs):
            record["alias"] = True
        modified = [
            i
            for i, (a, b) in enumerate(zip(before, inputs, strict=True))
            if isinstance(a, torch.Tensor) and not torch.equal(a, b)
        ]
        if modified:
            record["modified_inputs"] = modified
        self._hand_over(output, job.out_dir / f"candidate_{plan.index}.out")
        if repeat:  # the first output stays alive: memory it still holds cannot be handed out again
            with torch.no_grad():
                again = self.model(*before)
            if job.device == "cuda":
                torch.cuda.synchronize()
            if dynamic_checks.shares_memory(again, output):
                record["output_reused"] = True
            self._hand_over(again, job.out_dir / f"candidate_{plan.index}_repeat.out")
            del again
        del output
        record["devices"] = [str(o.device) for o in outs if isinstance(o, torch.Tensor)]
        self.chan.send("result", "trial", **record, status="ok", rejections=self.rejections)

    def workshare(self, request: WorkShareRequest) -> None:
        """Profile the reference and the candidate on every shape (`plans`: the default shapes and
        each variant, on inputs drawn now): how much of the work did library ops do, against the
        reference's whole forward? The last profiled call's output is saved for the reference's
        process to check: a candidate that behaves differently while profiled is caught there."""
        import torch

        from kernelwright.harness.building.symbols import KernelMatcher
        from kernelwright.harness.checks import dynamic as dynamic_checks

        plans = request.plans
        own = KernelMatcher(request.own_exact, request.own_names)

        self.chan.send("phase", "workshare")
        shares: list[dict[str, Any]] = []
        if self._ensure_model():
            torch.manual_seed(self.job.weight_seed)
            reference = self.inst.make_model().to(self.job.device).eval()
            for k, plan in enumerate(plans):
                inputs = self._draw(plan)
                calls_before = sum(self.recorder.calls.values())
                counts_before = dict(self.recorder.calls)
                kept: list[Any] = [None, 0, 0.0]  # the last output, how many forwards ran, their host seconds

                def call(inputs: list[Any] = inputs, kept: list[Any] = kept) -> None:
                    start = _perf_counter()
                    kept[0] = self.model(*inputs)
                    kept[2] += _perf_counter() - start
                    kept[1] += 1

                try:
                    with torch.no_grad():
                        ref_share = dynamic_checks.measure_work_share(
                            functools.partial(reference, *inputs), device=self.job.device, own=KernelMatcher()
                        )
                        self.recorder.profiling = True
                        self.recorder.clear_fastest()
                        ext_before = self.recorder.seconds
                        share = dynamic_checks.measure_work_share(
                            call,
                            device=self.job.device,
                            own=own,
                            not_own=frozenset(ref_share.kernels),
                            while_profiled=self.recorder.window,
                        )
                except Exception as exc:  # profiling is evidence, not a verdict: report that it failed
                    shares.append({"plan": plan.model_dump(), "error": f"{type(exc).__name__}: {exc}"})
                    continue
                finally:
                    self.recorder.profiling = False
                output_pass = dynamic_checks.output_pass_ms(kept[0], self.job.device)
                path = self.job.out_dir / f"profiled_{k}.out"
                self._hand_over(kept[0], path)
                shares.append(
                    {
                        "plan": plan.model_dump(),
                        "file": str(path),
                        "own_ms": share.own_ms,
                        "library_ms": share.library_ms,
                        "own_fraction": share.own_fraction,
                        "reference_ms": ref_share.library_ms,
                        "not_work_ms": share.not_work_ms,
                        "streams": sorted(share.streams),
                        "reference_streams": sorted(ref_share.streams),
                        "reference_not_work_ms": ref_share.not_work_ms,
                        "top_library_ops": share.top_library_ops,
                        "own_kernels": share.own_kernels,
                        "disowned_kernels": share.disowned,
                        "ext_calls": sum(self.recorder.calls.values()) - calls_before,
                        "ext_calls_by_function": {
                            name: n - counts_before.get(name, 0)
                            for name, n in self.recorder.calls.items()
                            if n > counts_before.get(name, 0)
                        },
                        "forward_calls": kept[1],
                        "forward_s": kept[2],
                        "extension_s": self.recorder.seconds - ext_before,
                        "extension_fastest_s": dict(self.recorder.fastest),
                        "ops_inside_per_call": share.ops_inside_per_call,
                        "output_pass_ms": output_pass,
                        "device": share.device,
                        "calls_per_round": share.calls_per_round,
                        "reference_calls_per_round": ref_share.calls_per_round,
                    }
                )
        self._check_tampering()
        self.chan.send(
            "result",
            "workshare",
            shares=shares,
            fatal=self.model_error,
            rejections=self.rejections,
            ext_calls=dict(self.recorder.calls),
        )

    def timing(self, samples: int) -> None:
        from kernelwright.harness.timing.run import time_candidate

        self.chan.send("phase", "timing")
        if self.baselines is None:
            raise RuntimeError(f"the baselines could not be prepared:\n{self.prepare_error or 'timing is off'}")
        self._check_tampering()
        ext_before, calls_before = self.recorder.seconds, sum(self.recorder.calls.values())
        self.recorder.clear_fastest()
        with self.recorder.window():
            result, kept = time_candidate(self.job, self.model, self.baselines, samples=samples)
        result["extension_s"] = self.recorder.seconds - ext_before
        result["extension_fastest_s"] = dict(self.recorder.fastest)
        result["extension_calls"] = sum(self.recorder.calls.values()) - calls_before
        self._check_tampering()
        files = []
        for k, (plan, output) in enumerate(kept):
            path = self.job.out_dir / f"timed_{k}.out"
            self._hand_over(output, path)
            files.append({"plan": plan.model_dump(), "file": str(path)})
        self.chan.send("result", "timing", rejections=self.rejections, timed_outputs=files, **result)


def writable_folders(job: WorkerJob, environ: dict[str, str] | os._Environ[str]) -> list[Path]:
    """Where this worker may write: its own folder (scratch, HOME, TMPDIR inside it) and the
    caches named in its environment (each in its scratch unless the harness chose otherwise).
    Never the build cache: the harness's trusted build step writes it (`harness/building/broker.py`);
    a worker without that step (started by hand) builds into its scratch."""
    folders = [job.out_dir]
    for name in (
        "TMPDIR",
        "HOME",
        "TORCHINDUCTOR_CACHE_DIR",
        "TRITON_CACHE_DIR",
    ):
        if environ.get(name):
            folders.append(Path(environ[name]))
    return list(dict.fromkeys(folders))


_SHARED_CACHES = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")


def _seal_shared_caches(job: WorkerJob, chan: Channel, isolation: Any) -> None:
    """Before the candidate's file runs: the shared inductor and triton caches, which compiled
    the baselines (no candidate code had run), are taken out of the writable folders by a further
    Landlock layer, and this process's later compiles (the candidate's own triton kernels) go to
    caches in its scratch. So a candidate cannot leave an entry there for a later baseline."""
    from kernelwright.harness.sandbox import confine

    shared = [Path(os.environ[name]) for name in _SHARED_CACHES if os.environ.get(name)]
    if not shared or isolation is None:
        return
    private = job.out_dir / "caches"
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(private / "inductor")
    os.environ["TRITON_CACHE_DIR"] = str(private / "triton")
    if isolation.filesystem != "landlock":
        isolation.shared_caches = "writable"
    else:
        writable = [f for f in writable_folders(job, os.environ) if f not in shared]
        sealed = confine.restrict_writes(writable, isolation.notes)
        isolation.shared_caches = "sealed" if sealed else "writable"
        if sealed:
            isolation.writable = [str(f) for f in writable] + ["/dev (existing devices, not /dev/shm)"]
            if chan.audit is not None:
                chan.audit.writable = tuple(os.path.realpath(f) for f in writable)
    chan.send("phase", "sandbox", isolation=isolation.model_dump(), refused="")


def _isolate(job: WorkerJob, chan: Channel) -> bool:
    """Confine this process and report how; False when strict mode cannot be honoured."""
    from kernelwright.harness.sandbox import audit, confine
    from kernelwright.harness.sandbox.isolation import MODE_VAR, SandboxMode

    mode: SandboxMode = "strict" if os.environ.get(MODE_VAR) == "strict" else "best-effort"
    writable = writable_folders(job, os.environ)
    isolation = confine.confine(writable, mode, cuda=job.device == "cuda")
    chan.audit = audit.install(writable)
    missing = isolation.missing() if mode == "strict" else []
    chan.send("phase", "sandbox", isolation=isolation.model_dump(), refused="; ".join(missing))
    chan.isolation = isolation
    return not missing


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m kernelwright.harness.workers.main JOB.json", file=sys.stderr)
        return 2
    chan = Channel()
    job = WorkerJob.model_validate_json(Path(argv[1]).read_text())
    if not _isolate(job, chan):
        return 3
    if job.mode == "reference":
        from kernelwright.harness.workers.reference import serve

        serve(job, chan)
        return 0
    session = CandidateSession(job, chan)
    if job.candidate_path is None:  # started ahead (a spare): ready, now wait for the candidate
        chan.send("result", "ready", prepare_s=session.prepare_s)
        command, _, argument = chan.wait_command().partition(" ")
        if command != "candidate":
            return 0
        assignment = CandidateAssignment.model_validate_json(argument)
        job.candidate_path = assignment.candidate_path
    _seal_shared_caches(job, chan, chan.isolation)
    if not session.build() or job.mode == "build":
        return 0
    while True:  # the harness drives the phases: trials, work share, timing, in its order
        command, _, argument = chan.wait_command().partition(" ")
        session.handed.clear()  # the reference's process has copied what was handed over
        if command == "trial":
            request = TrialRequest.model_validate_json(argument)
            session.ipc = request.ipc
            session.trial(request.plan, request.repeat)
        elif command == "workshare":
            session.workshare(WorkShareRequest.model_validate_json(argument))
        elif command == "timing":
            session.timing(int(argument or 0))
        elif command == "ping":  # the harness's last word: every message before this one is in
            chan.send("result", "ping")
        else:
            return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
