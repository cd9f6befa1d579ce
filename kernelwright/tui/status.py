"""How a run stands, as rich Text: one status line (status, round, step and the tokens of a reply
streaming in, best speedup against eager and torch.compile) and one line of budget meters (rounds,
tokens, cost, wall time, GPU time). Textual-free, so the headless commands' live status line uses it too."""

from __future__ import annotations

from rich.text import Text

from kernelwright.agent.progress import RunProgress

STATUS_MARKS = {
    "starting": "○ starting",
    "running": "● running",
    "pausing": "◐ pausing after this step",
    "paused": "‖ paused",
    "awaiting approval": "? plan awaits approval",
    "finished": "■ finished",
    "stopped": "■ stopped (resumable)",
    "failed": "✗ failed",
}


def _bar(used: float, limit: float | None, width: int = 5) -> str:
    if not limit:
        return ""
    filled = min(width, round(width * used / limit))
    return "▰" * filled + "▱" * (width - filled)


def status_text(progress: RunProgress, read_only: bool, approval: bool) -> Text:
    """Where the run stands, in one short line (a scripted or read-only run says so in the title)."""
    text = Text(STATUS_MARKS.get(progress.status, progress.status), style="bold", no_wrap=True, overflow="ellipsis")
    step = progress.current_step()
    if progress.round:
        text.append(f" · round {progress.round}")
    if step is not None and progress.running:
        text.append(f" {step.label}")
        streaming = step.streaming()
        if streaming:
            text.append(f" · {streaming}", style="dim")
    best = progress.best
    if best is not None:
        parts = [f"{best.speedup(b):.2f}x {b}" for b in ("eager", "compile") if best.speedup(b) is not None]
        text.append(f" · best #{best.index} {' '.join(parts) or 'not timed'}")
    else:
        text.append(" · no correct candidate yet")
    if approval and progress.running and not read_only:
        text.append(" · approval on")
    return text


def meters_text(progress: RunProgress, width: int = 80) -> Text:
    """The budget meters on one line; bars only where the line has room for them."""
    bars = width >= 110
    text = Text(no_wrap=True, overflow="ellipsis")
    for position, (name, used, limit, shown) in enumerate(progress.meters()):
        if position:
            text.append(" · " if not bars else "  ", style="dim")
        text.append(f"{name} ", style="dim")
        text.append(shown)
        bar = _bar(used, limit) if bars else ""
        if bar:
            text.append(f" {bar}", style="dim")
    return text
