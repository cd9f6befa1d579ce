"""Building a coder's draft while the step's other replies are still awaited (issue #31).

The coder sends a step's requests together (`asking.ask_many`); a reply that came back early
used to wait for the slowest one before its build (tens of seconds for a `load_inline` CUDA
extension) even started. Here each reply, as it arrives, is read as the coder will read it
(`edits.read_reply`, on the same base) and, when it holds usable code, written to the run's
`drafts/` folder and handed to the evaluator's `build_ahead`, which returns at once. The build
lands in the content-addressed build cache, whose key is the extension's sources and flags, not
the file's path: when the evaluate node judges the same source as candidates/NNN.py, its build
is a cache hit, or waits for the build ahead still in flight at that key's lock.

Nothing is judged from `drafts/`: results stay keyed by the source's sha under results/, so a
resumed run judges what it judged before. A source judged already (a resumed step) is not built
again. A build ahead that cannot start is only a lost head start: logged, and the evaluation
builds the candidate itself and reports what goes wrong.

The step's last reply to arrive is not built ahead: the evaluate node starts building it as soon
as it is in, so a build ahead would only start a second worker beside that one. When a request
failed, the last reply that does come is built ahead all the same: a worker started for nothing,
never a wrong result."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path

from kernelwright.agent import runs
from kernelwright.agent.configuration import AgentConfig
from kernelwright.agent.deps import Deps
from kernelwright.agent.events import BuildAhead
from kernelwright.agent.nodes.asking import OnAnswer
from kernelwright.agent.nodes.edits import read_reply
from kernelwright.errors import KernelwrightError

log = logging.getLogger(__name__)


def build_ahead_hook(cfg: AgentConfig, deps: Deps, bases: Sequence[str | None]) -> OnAnswer | None:
    """The `on_answer` of a coder step whose prompt i has edits applying to `bases[i]`; None when
    the evaluator cannot build ahead (it has no `build_ahead`: test fakes, the evaluation pool)."""
    build: Callable[[list[Path]], None] | None = getattr(deps.evaluator, "build_ahead", None)
    if build is None:
        return None

    awaited = [len(bases)]  # replies still to come (a failed request never comes)

    def on_answer(index: int, text: str) -> None:
        awaited[0] -= 1
        if awaited[0] <= 0:  # the last one: the evaluation builds it at once
            return
        source = read_reply(text, bases[index]).source
        if source is None:  # no usable code: the coder says why once every reply is in
            return
        sha = runs.source_sha(source)
        if runs.stored_result(cfg.run_dir, sha) is not None:  # judged already: nothing to build
            return
        path = runs.draft_path(cfg.run_dir, sha)
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(source)
            tmp.replace(path)  # whole or absent: a build never reads half a draft
        try:
            build([path])
        except KernelwrightError as exc:
            log.warning("building sample %d ahead did not start (its evaluation builds it): %s", index + 1, exc)
            return
        deps.events.emit(BuildAhead(sample=index + 1, sha256=sha, path=str(path)))

    return on_answer
