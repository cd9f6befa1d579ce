"""The candidates as a tree: each under the candidate its round started from, so a branch (a run
started from an earlier candidate, a direction abandoned and retried) is visible. Each label says
the verdict in a symbol and a word and the speedup against torch.compile (eager where compile was
not timed); the best is starred."""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from kernelwright.agent.progress import Candidate, RunProgress, verdict_mark


def _ratio(cand: Candidate, baseline: str) -> str:
    found = cand.speedup(baseline)
    return f"{found:.2f}x" if found is not None else "–"


def label(cand: Candidate, best: int | None) -> str:
    """`★#5 ✓ correct 2.20x|0.72x ·vectorised`: the speedup against torch.compile, then against
    eager (the tree's title says so), then its niche (technique tags) when it has one; a child
    sits under the parent its idea started from."""
    star = "★" if cand.index == best else " "
    if cand.verdict == "correct":
        detail = f"{_ratio(cand, 'compile')}|{_ratio(cand, 'eager')}" if cand.speedups else "not timed"
    elif cand.verdict == "pending":
        return f"{star}#{cand.index} … judging"
    else:
        detail = cand.reason or ""
    niche = f" ·{'+'.join(t for t in cand.tags if t != 'triton')}" if [t for t in cand.tags if t != "triton"] else ""
    return f"{star}#{cand.index} {verdict_mark(cand.verdict)} {cand.verdict} {detail}".rstrip() + niche


class CandidateTree(Tree[int]):
    @dataclass
    class CandidateChosen(Message):
        index: int

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__("candidates", id=id, classes=classes)
        self.show_root = False
        self.guide_depth = 2
        self.border_title = "candidates · x compile|eager"
        self._signature: tuple[object, ...] = ()
        self._follow = True  # keep the newest candidate highlighted until the person moves away
        self._newest: int | None = None

    def show(self, progress: RunProgress) -> None:
        """Rebuild when anything shown changed, keeping the highlighted candidate."""
        cands = progress.ordered_candidates()
        signature: tuple[object, ...] = tuple(
            (c.index, c.parent, c.verdict, c.reason, c.target_speedup, tuple(c.tags)) for c in cands
        )
        signature += (progress.best_index,)
        if signature == self._signature:
            return
        self._signature = signature
        keep = self.cursor_node.data if self.cursor_node is not None and not self._follow else None
        self._newest = cands[-1].index if cands else None
        self.clear()
        known = {c.index for c in cands}
        nodes: dict[int, TreeNode[int]] = {}

        def add(parent: TreeNode[int], cand: Candidate) -> None:
            children = progress.children(cand.index)
            text = label(cand, progress.best_index)
            node = (
                parent.add(text, data=cand.index, expand=True) if children else parent.add_leaf(text, data=cand.index)
            )
            nodes[cand.index] = node
            for child in children:
                add(node, child)

        for cand in cands:
            if cand.parent is None or cand.parent not in known or cand.parent == cand.index:
                add(self.root, cand)
        for cand in cands:  # anything the walk missed (a cycle in bad data) still shows
            if cand.index not in nodes:
                add(self.root, cand)
        target = nodes.get(keep) if keep is not None else None
        if target is None and cands:
            target = nodes.get(cands[-1].index)
        if target is not None:  # the tree lays out its new lines first
            self.call_after_refresh(self.move_cursor, target)

    def on_tree_node_highlighted(self, event: Tree.NodeHighlighted[int]) -> None:
        event.stop()
        if event.node.data is not None:
            self._follow = event.node.data == self._newest
            self.post_message(self.CandidateChosen(event.node.data))
