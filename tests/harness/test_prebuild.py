"""Building candidates ahead (`harness/building/prebuild.py`) on the CPU: fast-form C++ candidates built
ahead (or now, by `build_now`, which skips what is built already) are found cached by their
evaluation, and one that fails to build is reported by its own evaluation, not by the build ahead; `close()` kills the builds running and skips the rest; builds
run on the cores they are given and never beside a measurement (`live.quiet`), even one that
began just as a build started, and neither does a session opened ahead."""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest

from kernelwright.harness.building.prebuild import Prebuilder
from kernelwright.harness.building.quiet_watch import QuietWatch
from kernelwright.harness.options import EvalOptions
from kernelwright.harness.session import EvalSession, evaluate
from kernelwright.harness.workers import live
from kernelwright.problems import resolve_problem
from kernelwright.problems.solutions_index import SOLUTIONS

RELU_FAST = SOLUTIONS / "relu" / "cpp_fast.py"
LIBRARY = "kw_relu_cpp_fast"


def variant(folder: Path, name: str, *, broken: bool = False, hang: bool = False) -> Path:
    """relu's fast-form oracle with a kernel source and library name of its own (a cold build),
    or one that does not compile, or one whose import never ends."""
    source, unique = RELU_FAST.read_text(), uuid.uuid4().hex[:12]
    tag = f"// {name} {unique}\n" + ("#include <no_such_header.h>\n" if broken else "")
    source = source.replace("#include", tag + "#include", 1).replace(LIBRARY, f"kw_relu_{unique}")
    if hang:
        source = source.replace("lib = load_kernels", "import time\n\ntime.sleep(600)\nlib = load_kernels")
    path = folder / f"{name}.py"
    path.write_text(source)
    return path


@pytest.fixture
def opts(tmp_path: Path) -> EvalOptions:
    return EvalOptions(
        device="cpu", size="small", baselines=("eager",), timing=False, build_cache=tmp_path / "build-cache"
    )


def state(pid: int) -> str:
    """The process's state letter (R, S, T for stopped...), "" once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat[stat.rfind(")") + 2 :][:1]


def until(condition: object, timeout_s: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return False


@pytest.mark.slow  # real builds and harness workers
def test_builds_ahead_are_found_cached_and_a_failing_one_is_reported_by_its_evaluation(
    tmp_path: Path, opts: EvalOptions
) -> None:
    relu = resolve_problem("relu")
    first, second = variant(tmp_path, "ahead_a"), variant(tmp_path, "ahead_b")
    broken = variant(tmp_path, "ahead_broken", broken=True)
    with Prebuilder(opts, parallel=2) as builder:
        assert builder.submit(relu, [first, second, broken]) == 3
        assert builder.wait(timeout_s=300)
        status = {Path(o.candidate).name: o.status for o in builder.outcomes()}
        assert status == {"ahead_a.py": "built", "ahead_b.py": "built", "ahead_broken.py": "failed"}
        # what an evaluation about to judge them asks: built ahead already is not built again
        late = variant(tmp_path, "late")
        earlier = builder.outcome(first)
        now = builder.build_now(relu, [first, late])
        assert now[0] == earlier and now[1] is not None and now[1].status == "built"

    judged = evaluate(relu, [first, second, late, broken], opts)
    results = {Path(r.candidate).name: r for r in judged}
    for name in ("ahead_a.py", "ahead_b.py", "late.py"):
        assert (results[name].verdict.value, results[name].build_cached) == ("correct", True), results[name].message
    failed = results["ahead_broken.py"]
    assert (failed.verdict.value, failed.reason and failed.reason.value) == ("build_error", "compile_error")
    assert "no_such_header" in failed.message


def test_close_kills_the_builds_running_and_skips_the_rest(tmp_path: Path, opts: EvalOptions) -> None:
    relu = resolve_problem("relu")
    hanging = [variant(tmp_path, f"hang_{k}", hang=True) for k in range(2)]
    queued = variant(tmp_path, "queued")
    builder = Prebuilder(opts, parallel=2)
    builder.submit(relu, [*hanging, queued])
    assert until(lambda: len(builder.running()) == 2)
    pids = list(builder.running().values())
    tree = [pid for top in pids for pid in [top, *live.descendants(top)]]
    time.sleep(1.0)  # well into their start (the import never ends)
    start = time.monotonic()
    builder.close()
    assert time.monotonic() - start < 20
    assert all(state(pid) in ("", "Z") for pid in tree)
    outcomes = {Path(o.candidate).name: (o.status, o.detail) for o in builder.outcomes()}
    assert outcomes["queued.py"] == ("skipped", "closed")
    assert {outcomes[p.name][0] for p in hanging} == {"skipped"}
    assert builder.submit(relu, [variant(tmp_path, "late")]) == 0  # closed: nothing more is queued


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores to pin builds to one")
def test_builds_run_on_their_cores_and_wait_while_a_measurement_runs(tmp_path: Path, opts: EvalOptions) -> None:
    relu = resolve_problem("relu")
    core = max(os.sched_getaffinity(0))
    with Prebuilder(opts, parallel=1, cores=[core]) as builder:
        with live.quiet(keep=None):  # a timing phase of this process holds every live worker
            builder.submit(relu, [variant(tmp_path, "hang_quiet", hang=True)])
            time.sleep(1.5)
            assert builder.running() == {}  # no build starts beside a measurement
        # a first worker may wait for its fork server to start (imports and one compile)
        assert until(lambda: len(builder.running()) == 1, 60)
        [pid] = builder.running().values()
        assert os.sched_getaffinity(pid) == {core}  # born there: nothing it starts runs elsewhere
        with live.quiet(keep=None):
            assert until(lambda: state(pid) == "T", 5)
        assert until(lambda: state(pid) in ("R", "S", "D"), 5)


def test_a_build_starting_as_a_measurement_begins_is_held_until_it_ends() -> None:
    """`live.quiet` stops the workers alive when it begins; a build worker registered just after
    (here: a process `live` never saw) is stopped by the watch until the phase ends."""
    late = subprocess.Popen(["sleep", "60"])
    watch = QuietWatch(lambda: [SimpleNamespace(pid=late.pid, proc=late)])  # type: ignore[list-item]
    try:
        assert until(lambda: state(late.pid) == "S", 5)
        with live.quiet(keep=None):
            assert until(watch.quiet, 5)
            assert until(lambda: state(late.pid) == "T", 5)
        assert until(lambda: state(late.pid) == "S", 5)
        assert not watch.quiet()
    finally:
        watch.kill()
        late.kill()
        late.wait()
    assert state(watch.pid) in ("", "Z")


@pytest.mark.slow  # a session's reference and warm worker
def test_builds_and_a_session_opened_ahead_all_stop_while_a_measurement_runs(tmp_path: Path, opts: EvalOptions) -> None:
    """What a batch worker runs ahead (builds, the next problem's session) are live workers of its
    process: a measurement (`live.quiet`) finds every process below this one stopped."""
    relu = resolve_problem("relu")
    with Prebuilder(opts, parallel=2) as builder, EvalSession(relu, opts, warm=True):
        builder.submit(relu, [variant(tmp_path, "hang_a", hang=True), variant(tmp_path, "built")])
        for _ in range(3):
            time.sleep(1.0)
            with live.quiet(keep=None):
                time.sleep(0.2)  # a stop lands when the process next runs
                tree = live.descendants(os.getpid())
                assert tree and all(state(pid) in ("T", "Z", "") for pid in tree), [(p, state(p)) for p in tree]
