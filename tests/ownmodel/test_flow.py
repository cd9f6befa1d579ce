"""The own-model flow end to end on the CPU (issue #32), every step through the CLI as a user runs
it on the shipped MLP example: `model profile` ranks its `up` Linear among the regions, `model
extract --region up` writes it as a problem, `batch optimize --scripted` optimises the folder of
extracted problems with the shipped `region_up-cpu` session (the real graph, builds and harness;
no LLM), `model verify` judges the whole model with the run's best in place, and `export --format
package` ships it as an op that runs where kernelwright cannot be imported: patched into the
user's model, under torch.compile(fullgraph=True), with autograd's gradients, its state_dict
loading strictly.

Timing is off where a step allows it (the verdicts are the subject, not this machine's speed);
the one torch extension build is the package's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelwright.agent.batch import script_for
from kernelwright.agent.nodes.coder import extract_code
from kernelwright.agent.scripts import SCRIPTS
from kernelwright.batch.results import read_records
from kernelwright.cli import main
from kernelwright.hardware_specs.ceilings import Ceilings
from kernelwright.harness.checks.static.analysis import analyze_candidate
from tests.ownmodel.conftest import EXAMPLE, EXAMPLE_SPEC, run_without_kernelwright


def run_cli(argv: list[str]) -> int:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    return int(exited.value.code or 0)


# The user's side: their model, the package, torch; kernelwright cannot be imported.
USER_SCRIPT = """
import sys
sys.path.insert(0, sys.argv[1])  # the exported package's parent
sys.path.insert(0, sys.argv[2])  # the user's model code

import copy

import torch
from torch.utils._python_dispatch import TorchDispatchMode

import kw_mlp_up
from mlp_block import mlp_block


class Ops(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.names = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.append(str(func))
        return func(*args, **(kwargs or {}))


def same(a, b, tol=1e-4):
    assert a.shape == b.shape and torch.allclose(a, b, atol=tol, rtol=tol), (a - b).abs().max()


ref, (x,) = mlp_block()
model = copy.deepcopy(ref)
assert kw_mlp_up.patch(model) is model
assert list(model.state_dict()) == list(ref.state_dict())

# Other weights, loaded strictly into the patched model: the op computes with the module's own.
torch.manual_seed(3)
other = copy.deepcopy(ref)
with torch.no_grad():
    for p in other.parameters():
        p.add_(torch.randn_like(p) * 0.1)
model.load_state_dict(other.state_dict(), strict=True)
ref = other

with torch.no_grad(), Ops() as ops:
    out = model(x)
assert "kw_mlp_up.region_up.default" in ops.names and "aten.addmm.default" in ops.names, ops.names
assert ops.names.count("aten.addmm.default") == 1, ops.names  # `down` only: `up` is the op
with torch.no_grad():
    same(out, ref(x))

xg, rg = x.clone().requires_grad_(), x.clone().requires_grad_()
model(xg).square().sum().backward()
ref(rg).square().sum().backward()
same(xg.grad, rg.grad, 1e-3)
for (name, a), b in zip(model.named_parameters(), ref.parameters()):
    assert a.grad is not None, name
    same(a.grad, b.grad, 1e-3)

compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
cg = x.clone().requires_grad_()
out_c = compiled(cg)
same(out_c, ref(x).detach())
out_c.square().sum().backward()
same(cg.grad, rg.grad, 1e-3)
print("OK")
"""


def test_the_region_session_is_found_by_the_extracted_problem_s_name_and_is_well_formed() -> None:
    assert script_for("region_up", "cpu") == "region_up-cpu" and script_for("region_up", "cuda") is None
    session = SCRIPTS["region_up-cpu"]()
    [reply] = session.script["coder"]
    assert isinstance(reply, str) and session.expected_verdicts == ["correct"]
    assert len(session.script["planner"]) == len(session.script["reviewer"]) == 1
    source, why = extract_code(reply, None)
    assert source is not None, why
    analysis = analyze_candidate(source)
    assert analysis.backend == "cpp" and not analysis.rejections and not analysis.findings, analysis.findings


@pytest.mark.slow  # real builds, the harness's workers, torch.compile in a subprocess
def test_profile_extract_batch_optimize_verify_export_on_the_cpu(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fixed_ceilings: Ceilings
) -> None:
    # 1. profile: the `up` Linear is one of the ranked regions, and can be extracted.
    profile = tmp_path / "profile.json"
    argv = ["model", "profile", EXAMPLE_SPEC, "--device", "cpu", "--json", str(profile)]
    assert run_cli([*argv, "--no-compile", "--repeats", "3"]) == 0
    regions = {r["path"]: r for r in json.loads(profile.read_text())["regions"]}
    assert regions["up"]["module"] == "Linear" and not regions["up"]["standalone_note"], regions

    # 2. extract it as a problem.
    capsys.readouterr()
    argv = ["model", "extract", EXAMPLE_SPEC, "--region", "up", "--out", str(tmp_path / "regions"), "--device", "cpu"]
    assert run_cli(argv) == 0
    problem = Path(capsys.readouterr().out.strip())
    assert problem == tmp_path / "regions" / "region_up.py"

    # 3. optimise the folder of extracted problems: the script is found by the problem's name.
    out = tmp_path / "batch"
    argv = ["batch", "optimize", str(problem.parent), "--out", str(out), "--scripted", "--device", "cpu"]
    argv += ["--size", "small", "--rounds", "1", "--no-timing", "--threads", "1", "--quiet"]
    assert run_cli(argv) == 1  # correct, but untimed: the target is not reached
    [record] = read_records(out / "results.jsonl")
    assert (record.problem, record.verdict, record.run_id) == ("region_up", "correct", "batch-region_up"), record
    run = out / "runs" / "batch-region_up"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["scripted"] == "region_up-cpu" and summary["best"]["verdict"] == "correct"
    best = run / "best.py"

    # 4. verify the whole model with the run's best in place, through the harness.
    capsys.readouterr()
    argv = ["model", "verify", EXAMPLE_SPEC, "--region", f"up={best}", "--device", "cpu", "--no-timing"]
    assert run_cli([*argv, "--out", str(tmp_path / "verify"), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)["result"]
    assert result["verdict"] == "correct", result["message"]

    # 5. export the run as a package, and use it where kernelwright cannot be imported.
    package = tmp_path / "site" / "kw_mlp_up"
    assert run_cli(["export", str(run), "--format", "package", "-o", str(package)]) == 0
    spec = json.loads((package / "export.json").read_text())
    assert spec["region_path"] == "up" and spec["winner_tensors"] == {"weight": "weight", "bias": "bias"}
    run_without_kernelwright(USER_SCRIPT, [str(package.parent), str(EXAMPLE.parent)], tmp_path)
