"""What a cache in a candidate's forward earns under each policy (#28): the policy is about who does
the main work (library calls), not about caching, so both decide alike.

- Keyed by the input's identity (the tensor object, its data pointer, id(), version): rejected
  `input_cache` before anything runs, whatever it gains: such a key replays an earlier result when
  the same buffer comes back with new values, which is what the harness's buffer reuse does.
- Keyed by the inputs' values: a flag in the source; the work-share profile calls forward again on
  the same inputs, the cache replays, no kernel and no library op runs: rejected `input_cache`
  (it used to read "the work was done by PyTorch", which named the wrong culprit).
- Keyed by shape for a launch config: it never replays a result, so it gains nothing a judge
  measures: correct, with the flag shown.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelwright.harness.session import evaluate
from kernelwright.harness.verdicts import Reason, Verdict
from kernelwright.problems import resolve_problem
from kernelwright.vocabulary import Policy
from tests.candidates import harness_options, write_case

FAST = (
    Path(__file__).resolve().parents[2] / "kernelwright" / "problems" / "solutions" / "relu" / "cpp_fast.py"
).read_text()
CALL = """        y = torch.empty_like(x)
        lib.relu(x, y, x.numel())
        return y"""
CONFIG_KEYED = """        shape = tuple(x.shape)
        if shape not in self.seen:
            self.seen[shape] = x.numel()  # a launch size, keyed by shape
        y = torch.empty_like(x)
        lib.relu(x, y, self.seen[shape])
        return y"""
VALUE_KEYED = """        key = float(x.reshape(-1)[0])  # the inputs' values
        if key in self.seen:
            return self.seen[key]
        y = torch.empty_like(x)
        lib.relu(x, y, x.numel())
        self.seen[key] = y.clone()
        return y"""
IDENTITY_KEYED = """        if x in self.seen:
            return self.seen[x]
        y = torch.empty_like(x)
        lib.relu(x, y, x.numel())
        self.seen[x] = y
        return y"""


def _case(tmp_path: Path, name: str, body: str) -> Path:
    assert CALL in FAST
    source = FAST.replace(CALL, body).replace("super().__init__()", "super().__init__()\n        self.seen = {}")
    return write_case(tmp_path, name, source.replace("kw_relu_cpp_fast", f"kw_relu_{name}"))


@pytest.mark.slow  # three fast-form C++ builds, judged under both policies
@pytest.mark.parametrize("policy", [Policy.STRICT, Policy.ENGINEERING])
def test_a_cache_is_judged_alike_under_both_policies(tmp_path: Path, shared_home: Path, policy: Policy) -> None:
    paths = [
        _case(tmp_path, "config_keyed", CONFIG_KEYED),
        _case(tmp_path, "value_keyed", VALUE_KEYED),
        _case(tmp_path, "identity_keyed", IDENTITY_KEYED),
    ]
    config, value, identity = evaluate(
        resolve_problem("relu"), paths, harness_options(shared_home, "cpu", policy=policy)
    )

    assert config.verdict == Verdict.CORRECT, config.message  # never replays: gains nothing, flag shown
    assert "input_cache" in {f.code for f in config.flags}
    assert (value.verdict, value.reason) == (Verdict.REJECTED, Reason.INPUT_CACHE), value.message
    assert "returned a stored result" in value.message and "line" in value.message
    assert (identity.verdict, identity.reason) == (Verdict.REJECTED, Reason.INPUT_CACHE), identity.message
