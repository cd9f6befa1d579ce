"""Export a run's winner (issue #32, the own-model flow's last step): as a self-contained
KernelBench solution file, or as a small package that defines it as a `torch.library.custom_op`
(fake implementation, autograd through the reference) and patches the user's model.

    winner = read_winner(runs_dir, "20261125-221015-relu-b1f0")
    text = kernelbench_source(winner)                 # load_inline, no kernelwright import
    export_package(winner, Path("out/kw_relu"))       # importable without kernelwright

- `runs`: the run folder's best correct candidate and its problem.
- `inline`: the fast form rewritten as `load_inline`; a file's `load_inline` calls, read statically.
- `kernelbench`: the solution file.
- `package`: the package; `build_worker` (a subprocess) builds its extensions and lines the
  winner's tensors up with the reference's; `runtime` is copied into it.
"""

from kernelwright.ownmodel.export.kernelbench import kernelbench_source
from kernelwright.ownmodel.export.package import ExportBuildError, export_package, region_path
from kernelwright.ownmodel.export.runs import RunWinner, read_winner

__all__ = ["ExportBuildError", "RunWinner", "export_package", "kernelbench_source", "read_winner", "region_path"]
