"""nvcc's host and device front ends at once, for one `.cu` (issue #29).

nvcc runs its passes one after another: host preprocessing and `cudafe++` (the host front end:
`.cudafe1.cpp` and the module id), device preprocessing, `cicc`, `ptxas` and `fatbinary` (the
device side: the stub and the fatbin), then the host compiler over `.cudafe1.cpp`. Over torch's
headers the two front ends take about as long as each other (~10-23 s each on a 2-core host), and
they depend on each other only through the module id file, which `cudafe++` writes and `cicc`
reads. `cicc` can generate that id itself (`--gen_module_id_file`), from the same inputs, so the
host chain and the device chain can run side by side; the host compile then waits for both.

This module is the `.cu`'s compile command in a candidate's `build.ninja` (put there by
`cuda_build.py`, in the trusted build step's builder, inside the sandbox):
`python -I nvcc_split.py --record FILE -- <nvcc command as torch wrote it>`. It asks nvcc for its
plan (`nvcc -dryrun`, with its temporary files in a folder of this run's own), runs the two
chains at once with nvcc's own environment (`PATH`, `LD_LIBRARY_PATH`, `CICC_PATH`: parsed from
the dryrun's variable lines, never evaluated by a shell), checks that `cudafe++`'s and every
`cicc`'s module id files are byte for byte the same, and runs the rest. Anything it does not
recognise in the plan, any failure of a step whose command or input it changed, or ids that
differ: it runs the original nvcc command unchanged, as if it had never been there. A step it did
not change that fails on the candidate's own input (preprocessing for the device, `cudafe++`)
fails as nvcc would have, without compiling the file a second time.

What ran goes to the record file (JSON): `path` ("split" or "nvcc"), `why` (when nvcc ran), and
each step's seconds. It imports only the standard library (it runs with `python -I`, outside the
package's imports).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

STEP_TIMEOUT_S = 1800  # one nvcc pass over torch's headers takes well under a minute
_VARIABLE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
_REFERENCE = re.compile(r"\$(?:\{(\w+)\}|(\w+))")
_DEPENDENCY_FLAGS = ("-M", "--generate-dependencies", "--generate-nonsystem-dependencies")


class Unrecognised(ValueError):
    """The dryrun's plan has a shape this module does not know: nvcc runs as it is."""


@dataclass(frozen=True)
class Step:
    role: str  # pp_device, pp_host, cudafe, cicc, ptxas, fatbinary, host_compile
    argv: tuple[str, ...]


@dataclass(frozen=True)
class Plan:
    env: dict[str, str]
    host: tuple[Step, ...]  # host preprocessing, cudafe++
    device: tuple[Step, ...]  # device preprocessing, cicc (own module id), ptxas, fatbinary
    final: tuple[Step, ...]  # the host compile of .cudafe1.cpp
    module_ids: tuple[str, ...]  # cudafe++'s module id file, then each cicc's
    order: tuple[Step, ...] = field(default=())  # every step, in nvcc's order
    warnings: str = ""  # nvcc's own ("nvcc warning : ..."), printed as nvcc would


def _option(argv: list[str] | tuple[str, ...], name: str) -> str | None:
    for i, token in enumerate(argv[:-1]):
        if token == name:
            return argv[i + 1]
    return None


def strip_dependencies(argv: list[str]) -> tuple[list[str], str | None]:
    """nvcc's arguments without torch's dependency output (`-MD -MF FILE`, or the long spellings
    `--generate-dependencies-with-compile --dependency-output FILE`; written here by the host
    preprocessing instead), and that file. Any other dependency flag is a shape not known here."""
    out, depfile, with_compile = [], None, False
    i = 0
    while i < len(argv):
        token = argv[i]
        if token in ("--generate-dependencies-with-compile", "-MD"):
            with_compile = True
        elif token in ("--dependency-output", "-MF") and i + 1 < len(argv):
            depfile = argv[i + 1]
            i += 1
        elif token.startswith("--dependency-output="):
            depfile = token.split("=", 1)[1]
        elif token.startswith(_DEPENDENCY_FLAGS):
            raise Unrecognised(f"dependency flag {token}")
        else:
            out.append(token)
        i += 1
    if with_compile != (depfile is not None):
        raise Unrecognised("dependency output without --generate-dependencies-with-compile, or the reverse")
    return out, depfile


def _expand(token: str, variables: dict[str, str]) -> str:
    def one(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        if name not in variables:
            raise Unrecognised(f"unknown variable ${name}")
        return variables[name]

    return _REFERENCE.sub(one, token)


def parse_dryrun(text: str, scratch: Path, output: str, depfile: str | None) -> Plan:
    """The plan of `nvcc -dryrun` (its `#$ ` lines), temporaries under `scratch`, compiling to
    `output`; raises `Unrecognised` for any shape this module does not know."""
    variables: dict[str, str] = {}
    steps: list[Step] = []
    warnings = []
    for raw in text.splitlines():
        if raw.startswith("nvcc warning :"):
            warnings.append(raw + "\n")
            continue
        if not raw.startswith("#$ "):
            if raw.strip():
                raise Unrecognised(f"a line that is not a step: {raw[:120]}")
            continue
        line = raw[3:].strip()
        variable = _VARIABLE.match(line)
        if variable and not line.startswith(("-", '"')):
            try:
                tokens = shlex.split(variable.group(2))
            except ValueError as exc:
                raise Unrecognised(f"variable line: {line[:120]}") from exc
            if any("$" in t or "`" in t for t in tokens):
                raise Unrecognised(f"a variable that refers to another: {line[:120]}")
            variables[variable.group(1)] = " ".join(tokens)
            continue
        try:
            argv = tuple(_expand(t, variables) for t in shlex.split(line))
        except ValueError as exc:
            raise Unrecognised(f"step line: {line[:120]}") from exc
        steps.append(_classify(argv, scratch))
    plan = _plan(steps, variables, scratch, output, depfile)
    return Plan(plan.env, plan.host, plan.device, plan.final, plan.module_ids, plan.order, "".join(warnings))


def _classify(argv: tuple[str, ...], scratch: Path) -> Step:
    if not argv:
        raise Unrecognised("an empty step")
    program = os.path.basename(argv[0])
    if program == "rm":
        if len(argv) == 2 and Path(argv[1]).parent == scratch:
            return Step("rm", argv)
        raise Unrecognised(f"rm outside the temporary folder: {argv[1:]}")
    if program in ("cudafe++", "cicc", "ptxas", "fatbinary"):
        return Step(program.replace("++", ""), argv)
    if "-E" in argv:
        target = _option(argv, "-o") or ""
        if target.endswith(".cpp1.ii"):
            return Step("pp_device", argv)
        if target.endswith(".cpp4.ii"):
            return Step("pp_host", argv)
    if "-c" in argv and len(argv) > 3 and argv[-3].endswith(".cudafe1.cpp") and argv[-2] == "-o":
        return Step("host_compile", argv)
    raise Unrecognised(f"an unknown step: {shlex.join(argv)[:160]}")


def _plan(steps: list[Step], variables: dict[str, str], scratch: Path, output: str, depfile: str | None) -> Plan:
    roles = [s.role for s in steps]
    for role, wanted in (("pp_host", 1), ("cudafe", 1), ("fatbinary", 1), ("host_compile", 1)):
        if roles.count(role) != wanted:
            raise Unrecognised(f"{roles.count(role)} {role} steps: {roles}")
    if not roles.count("cicc") or not roles.count("pp_device") or roles[-1] != "host_compile":
        raise Unrecognised(f"steps in an unknown order: {roles}")
    [pp_host] = [s for s in steps if s.role == "pp_host"]
    [cudafe] = [s for s in steps if s.role == "cudafe"]
    [final] = [s for s in steps if s.role == "host_compile"]
    host_ii, module_id = _option(pp_host.argv, "-o"), _option(cudafe.argv, "--module_id_file_name")
    generated = _option(cudafe.argv, "--gen_c_file_name")
    if "--gen_module_id_file" not in cudafe.argv or not module_id or cudafe.argv[-1] != host_ii or not generated:
        raise Unrecognised("cudafe++ does not read the host preprocessing and write the module id")
    if final.argv[-1] != output or final.argv[-3] != generated:
        raise Unrecognised("the host compile is not of cudafe++'s output into the object")
    host_pp = list(pp_host.argv)
    if depfile is not None:  # what nvcc's "Filter Dependencies" wrote, from the host preprocessing
        host_pp[-2:-2] = ["-MD", "-MF", depfile, "-MT", output]
    device: list[Step] = []
    ids = [module_id]
    for step in steps:
        if step.role in ("pp_host", "cudafe", "host_compile", "rm"):
            continue
        argv = list(step.argv)
        if step.role == "cicc":
            if "--gen_module_id_file" in argv or _option(argv, "--module_id_file_name") != module_id:
                raise Unrecognised("cicc does not read cudafe++'s module id")
            own = str(scratch / f"cicc{len(ids)}.module_id")
            argv[argv.index("--module_id_file_name") : argv.index("--module_id_file_name") + 2] = [
                "--gen_module_id_file",
                "--module_id_file_name",
                own,
            ]
            ids.append(own)
        if any(generated in t or module_id in t for t in argv):
            raise Unrecognised(f"the device step {step.role} reads what cudafe++ writes")
        device.append(Step(step.role, tuple(argv)))
    return Plan(
        env=dict(variables),
        host=(Step("pp_host", tuple(host_pp)), cudafe),
        device=tuple(device),
        final=(final,),
        module_ids=tuple(ids),
        order=tuple(steps),
    )


# -- running it ----------------------------------------------------------------------------------


@dataclass
class Ran:
    role: str
    seconds: float
    code: int
    output: str
    cpu_seconds: float = 0.0  # user + system of the step and the processes it waited for
    killed: bool = False  # stopped because the other chain failed


def run_timed(
    argv: list[str],
    env: dict[str, str] | None,
    timeout_s: float,
    cwd: str | None = None,
    stop: threading.Event | None = None,
) -> tuple[int, float, float, str]:
    """Run `argv` with its output (stdout and stderr together) captured: (status, wall seconds,
    CPU seconds, output); killed past `timeout_s` or once `stop` is set. CPU time is the figure
    that survives shared cores: on a loaded host the wall time of one pass says more about its
    neighbours than about the pass."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        try:
            proc = subprocess.Popen(  # a group of its own: a compiler driver is killed with its passes
                argv,
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as exc:
            return 125, time.perf_counter() - start, 0.0, f"{argv[0]}: {exc}\n"
        ended = threading.Event()

        def watch() -> None:
            deadline = time.monotonic() + timeout_s
            while not ended.wait(0.05):
                if time.monotonic() > deadline or (stop is not None and stop.is_set()):
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(proc.pid, signal.SIGKILL)
                    return

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            ended.set()
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
        wall = time.perf_counter() - start
        out.seek(0)
        output = out.read().decode(errors="replace")
    return proc.returncode, wall, usage.ru_utime + usage.ru_stime, output


def _run_step(step: Step, env: dict[str, str], stop: threading.Event) -> Ran:
    program = shutil.which(step.argv[0], path=env.get("PATH"))
    if program is None:
        return Ran(step.role, 0.0, 127, f"{step.argv[0]}: not found on nvcc's PATH\n")
    code, wall, cpu, output = run_timed([program, *step.argv[1:]], env, STEP_TIMEOUT_S, stop=stop)
    return Ran(step.role, wall, code, output, cpu, killed=code != 0 and stop.is_set())


def _chain(steps: tuple[Step, ...], env: dict[str, str], into: list[Ran], stop: threading.Event) -> None:
    """Run `steps` in order; one that fails stops this chain and the other (nvcc stops there too,
    and a fallback need not wait for the other front end)."""
    for step in steps:
        if stop.is_set():
            return
        ran = _run_step(step, env, stop)
        into.append(ran)
        if ran.code != 0:
            stop.set()
            return


UNCHANGED = ("pp_device", "cudafe")  # same command, same input as nvcc's own: their failure is nvcc's


def run_plan(plan: Plan) -> tuple[str, list[Ran], str]:
    """Run `plan`: ("ok" | "failed" (the candidate's own error, as nvcc would report it) |
    "fallback" (why in the third item), every step run, why)."""
    env = {**os.environ, **plan.env}
    host: list[Ran] = []
    device: list[Ran] = []
    stop = threading.Event()
    threads = [
        threading.Thread(target=_chain, args=(plan.host, env, host, stop)),
        threading.Thread(target=_chain, args=(plan.device, env, device, stop)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    ran = host + device
    failed = [r for r in ran if r.code != 0 and not r.killed]
    if not failed and any(r.code != 0 for r in ran):
        return "fallback", ran, "a step was stopped"
    if failed:
        own = [r for r in failed if r.role in UNCHANGED]
        if own:
            return "failed", ran, f"{own[0].role} failed on the candidate's source"
        return "fallback", ran, f"{failed[0].role} exited with status {failed[0].code}"
    try:
        ids = [Path(p).read_bytes() for p in plan.module_ids]
    except OSError as exc:
        return "fallback", ran, f"a module id file is missing: {exc}"
    if not ids[0] or any(i != ids[0] for i in ids[1:]):
        return "fallback", ran, "cicc's module id is not cudafe++'s"
    finals: list[Ran] = []
    _chain(plan.final, env, finals, threading.Event())
    ran += finals
    if finals[-1].code != 0:
        return "fallback", ran, f"the host compile exited with status {finals[-1].code}"
    return "ok", ran, ""


def _failure_output(plan: Plan, ran: list[Ran]) -> str:
    """What nvcc would have printed: the steps' output in its order, up to the first that failed."""
    by_role: dict[str, list[Ran]] = {}
    for r in ran:
        by_role.setdefault(r.role, []).append(r)
    text = []
    for step in plan.order:
        runs = by_role.get(step.role) or []
        if not runs:
            break
        r = runs.pop(0)
        if r.killed:
            continue
        text.append(r.output)
        if r.code != 0:
            break
    return "".join(text)


def compile_split(argv: list[str], record: dict[str, object]) -> int:
    """Compile with nvcc's `argv` (program first), split where the plan allows; the exit status."""
    start = time.perf_counter()
    scratch = Path(tempfile.mkdtemp(prefix="kw-nvcc-"))
    try:
        try:
            args, depfile = strip_dependencies(argv[1:])
            output = _option(args, "-o")
            if output is None or "-c" not in args:
                raise Unrecognised("not a compile to an object (-c ... -o)")
            env = {**os.environ, "TMPDIR": str(scratch)}
            dry = subprocess.run(
                [argv[0], "-dryrun", *args],
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
            if dry.returncode != 0:
                raise Unrecognised(f"nvcc -dryrun exited with status {dry.returncode}")
            plan = parse_dryrun(dry.stdout + dry.stderr, scratch, output, depfile)
        except (Unrecognised, OSError, subprocess.TimeoutExpired) as exc:
            return _nvcc(argv, record, f"plan: {exc}", [], start)
        outcome, ran, why = run_plan(plan)
        if outcome == "fallback":
            return _nvcc(argv, record, why, ran, start)
        sys.stderr.write(plan.warnings)
        if outcome == "failed":
            sys.stderr.write(_failure_output(plan, ran))
            record.update(path="split", failed=why, steps=_steps(ran), seconds=round(time.perf_counter() - start, 3))
            return next(r.code for r in ran if r.code != 0)
        for r in ran:  # warnings, in the chains' order
            sys.stderr.write(r.output)
        record.update(path="split", steps=_steps(ran), seconds=round(time.perf_counter() - start, 3))
        return 0
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _steps(ran: list[Ran]) -> list[dict[str, object]]:
    return [
        {
            "step": r.role,
            "seconds": round(r.seconds, 3),
            "cpu_s": round(r.cpu_seconds, 3),
            **({"status": r.code} if r.code else {}),
            **({"killed": True} if r.killed else {}),
        }
        for r in ran
    ]


def _nvcc(argv: list[str], record: dict[str, object], why: str, ran: list[Ran], start: float) -> int:
    """The original command, unchanged; its output goes straight to ours."""
    sys.stdout.flush()
    sys.stderr.flush()
    began = time.perf_counter()
    try:
        code = subprocess.run(argv, stdin=subprocess.DEVNULL, timeout=STEP_TIMEOUT_S, check=False).returncode
    except (OSError, subprocess.TimeoutExpired) as exc:
        print(f"nvcc: {exc}", file=sys.stderr)
        code = 1
    record.update(
        path="nvcc",
        why=why,
        split_steps=_steps(ran),
        nvcc_s=round(time.perf_counter() - began, 3),
        seconds=round(time.perf_counter() - start, 3),
    )
    return code


def main(argv: list[str]) -> int:
    if len(argv) < 5 or argv[1] != "--record" or argv[3] != "--":
        print("usage: nvcc_split.py --record FILE -- NVCC ARGS...", file=sys.stderr)
        return 2
    record: dict[str, object] = {}
    try:
        try:
            return compile_split(argv[4:], record)
        except Exception as exc:  # a bug here must not fail a build that nvcc would pass
            record.clear()
            return _nvcc(argv[4:], record, f"nvcc_split: {type(exc).__name__}: {exc}", [], time.perf_counter())
    finally:
        try:
            Path(argv[2]).write_text(json.dumps(record))
        except OSError as exc:
            print(f"nvcc_split: could not write its record: {exc}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
