"""`export --format kernelbench`: a run's winner as a KernelBench solution file that stands on its
own: no kernelwright import, kernels built with plain `torch.utils.cpp_extension.load_inline`
(fast-form candidates rewritten by `inline.py`; other candidates are already such files)."""

from __future__ import annotations

from kernelwright.ownmodel.export.inline import to_load_inline
from kernelwright.ownmodel.export.runs import RunWinner


def kernelbench_source(winner: RunWinner) -> str:
    """The solution file's text; `kernelwright eval PROBLEM FILE` judges it like the original."""
    body = to_load_inline(winner.source, str(winner.path))
    header = (
        f"# Exported by `kernelwright export {winner.run_id} --format kernelbench`: candidate #{winner.index} "
        f"of problem {winner.problem.qualified}.\n"
    )
    return header + body
