"""`kernelwright ask REPORT.ncu-rep ["question"]`: ask a model about an Nsight Compute report (or a
baseline and a candidate, `--compare`). With a question it answers and exits; without one it is an
interactive chat. Needs no GPU and no ncu where the report can be read (`ncu_report`, else
`ncu --import`). The answer streams to stdout as it is written, then its citations, each checked
against the report; `--json` prints one document instead. Exit 0, or 1 when a citation does not
match the report; 2 for a file that is no report; 5 for no reader or an unreachable LLM endpoint.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from kernelwright.cli.context import AppState
from kernelwright.errors import ExitCode, UsageError

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from kernelwright.agent.ask import AskAnswer, AskChat, ReportSet

EXIT_WORDS = {"exit", "quit", "/exit", "/quit", ":q"}


class TerminalListener:
    """The answer on stdout as it streams; each tool call as one line on stderr."""

    def on_text(self, text: str) -> None:
        sys.stdout.write(text)
        sys.stdout.flush()

    def on_tool(self, name: str, args: dict[str, Any]) -> None:
        shown = ", ".join(f"{k}={v!r}" for k, v in args.items())
        typer.secho(f"  · {name}({shown})", err=True, dim=True)


def citation_footer(answer: AskAnswer) -> str:
    if not answer.citations:
        return "citations: none (the answer cites no report metric)"
    wrong = answer.mismatches
    head = f"citations: {len(answer.citations)} checked, "
    if not wrong:
        return head + "all match the report"
    lines = [head + f"{len(wrong)} do{'es' if len(wrong) == 1 else ''} not match the report:"]
    for c in wrong:
        lines.append(f"  ✗ {c.text}: {c.status.replace('_', ' ')}" + (f": {c.note}" if c.note else ""))
    return "\n".join(lines)


def scripted_model(path: Path) -> BaseChatModel:
    """A scripted chat model from a JSON file: {"replies": [REPLY, ...]}, each reply a text or
    {"content": TEXT, "tool_calls": [[NAME, ARGS], ...]}. For tests and demos; needs no endpoint."""
    from langchain_core.messages import AIMessage

    from kernelwright.agent.scripted import Reply, ScriptedSession

    try:
        doc = json.loads(path.read_text())
        replies: list[Reply] = []
        for item in doc["replies"]:
            if isinstance(item, str):
                replies.append(item)
                continue
            calls = [
                {"name": name, "args": args, "id": f"call_{i}", "type": "tool_call"}
                for i, (name, args) in enumerate(item.get("tool_calls", []))
            ]
            replies.append(AIMessage(content=item.get("content", ""), tool_calls=calls))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"bad --scripted file {path}: {exc}") from exc
    return ScriptedSession({"ask": replies}, name=path.stem).model("ask")


def _chat(state: AppState, reports: ReportSet, model: str | None, scripted: Path | None, rounds: int) -> AskChat:
    from kernelwright.agent.ask import AskChat

    if scripted is not None:
        return AskChat(reports, scripted_model(scripted), model_name=f"scripted:{scripted.stem}", tool_rounds=rounds)
    from kernelwright.agent.ask import chat_from_settings

    return chat_from_settings(state.settings(), reports, model=model, tool_rounds=rounds)


def _answer(chat: AskChat, question: str, as_json: bool) -> int:
    if as_json:
        answer = chat.ask(question)
        typer.echo(json.dumps(answer.model_dump(mode="json") | {"ok": not answer.mismatches}, indent=2))
    else:
        answer = chat.ask(question, TerminalListener())
        typer.echo("")
        typer.echo(citation_footer(answer))
    return ExitCode.NEEDS_ATTENTION if answer.mismatches else ExitCode.OK


def _interactive(chat: AskChat) -> int:
    for r in chat.reports.reports:
        typer.echo(f"{r.label}: {r.path} — in focus: {r.ref(r.focus)} {r.focus.name[:80]}", err=True)
    typer.echo(f"model: {chat.model_name}. Ask a question; `exit` or Ctrl-D ends.", err=True)
    while True:
        sys.stderr.write("\nask> ")
        sys.stderr.flush()
        line = sys.stdin.readline()
        if not line:
            sys.stderr.write("\n")
            return ExitCode.OK
        question = line.strip()
        if not question:
            continue
        if question.lower() in EXIT_WORDS:
            return ExitCode.OK
        _answer(chat, question, as_json=False)


def register(app: typer.Typer) -> None:
    @app.command("ask")
    def ask(
        ctx: typer.Context,
        report: Annotated[
            Path, typer.Argument(help="The Nsight Compute report (.ncu-rep); the baseline with --compare.")
        ],
        question: Annotated[
            Optional[str], typer.Argument(help="The question; without it, an interactive chat.")
        ] = None,
        compare: Annotated[
            Optional[Path], typer.Option("--compare", help="A candidate report to compare REPORT (the baseline) with.")
        ] = None,
        kernel: Annotated[
            Optional[str],
            typer.Option(
                "--kernel", "-k", help="The kernel in focus: an index or a name regex (default: the longest-running)."
            ),
        ] = None,
        compare_kernel: Annotated[
            Optional[str], typer.Option("--compare-kernel", help="The same, in the --compare report.")
        ] = None,
        model: Annotated[
            Optional[str], typer.Option("--model", help="Model name (default: llm_reviewer_model, else llm_model).")
        ] = None,
        tool_rounds: Annotated[
            int, typer.Option("--tool-rounds", min=1, max=30, help="Most rounds of tool calls per question.")
        ] = 8,
        as_json: Annotated[bool, typer.Option("--json", help="Print the answer and its citations as JSON.")] = False,
        scripted: Annotated[
            Optional[Path],
            typer.Option("--scripted", hidden=True, help="Scripted replies (JSON), for tests and demos."),
        ] = None,
    ) -> int:
        """Ask about an Nsight Compute report: the model reads it through tools (kernels, digest, any metric, NCU's findings, source hotspots, a diff, GPU specs) and cites the metrics it rests on as [[NAME = VALUE UNIT @ REF]]; every citation is checked against the report. No GPU needed."""
        from kernelwright.agent.ask import open_reports

        if as_json and question is None:
            raise UsageError("--json needs a question", hint='kernelwright ask REPORT "question" --json')
        if compare_kernel is not None and compare is None:
            raise UsageError("--compare-kernel needs --compare OTHER.ncu-rep")
        state: AppState = ctx.obj if isinstance(ctx.obj, AppState) else AppState()
        reports = open_reports(report, compare=compare, kernel=kernel, compare_kernel=compare_kernel)
        chat = _chat(state, reports, model, scripted, tool_rounds)
        if question is not None:
            return _answer(chat, question, as_json)
        return _interactive(chat)
