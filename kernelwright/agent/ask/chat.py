"""The `ask` chat: a question, a few rounds of tool calls, a streamed answer, its citations checked.

    reports = open_reports(Path("cand.ncu-rep"), compare=None, kernel=None)
    chat = AskChat(reports, model)                  # any LangChain chat model with tool calling
    answer = chat.ask("why is this kernel slow?", listener)
    answer.citations                                 # each checked against the report

The conversation is kept (`history`), so a follow-up question sees the earlier tool results. Text
is handed to the listener as the model writes it (the terminal prints it; a TUI screen would put
it in a widget): `ChatListener` is the whole seam between the chat and whoever shows it.
"""

from __future__ import annotations

import logging
from functools import cache
from pathlib import Path
from string import Template
from typing import Any, Protocol

import openai
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage, SystemMessage
from langchain_core.messages import message_chunk_to_message as to_message
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from pydantic import BaseModel

from kernelwright.agent import llm
from kernelwright.agent.ask.citations import Citation, check_citations, mark
from kernelwright.agent.ask.reports import ReportSet
from kernelwright.agent.ask.tools import make_tools
from kernelwright.agent.configuration import AgentConfig, RunFlags
from kernelwright.agent.tools import describe_tools, run_tool_calls
from kernelwright.config import Settings

log = logging.getLogger(__name__)
PROMPTS = Path(__file__).parent / "prompts"
TOOL_ROUNDS = 8
TOOL_RESULT_CHARS = 6000
LAST_CALL = "You have used your tool calls for this question: answer now from what the tools returned."


@cache
def _template() -> Template:
    return Template((PROMPTS / "system.md").read_text())


def describe_reports(reports: ReportSet) -> str:
    lines = []
    for r in reports.reports:
        kernels = r.report.kernels
        names = len({k.name for k in kernels})
        where = str(r.path) if r.path else "(in memory)"
        lines.append(
            f"- {r.label}: {where}, {len(kernels)} launch(es) of {names} kernel(s), read with {r.report.source}; "
            f"in focus: {r.ref(r.focus)} {r.focus.name[:100]}"
        )
    if reports.comparing:
        lines.append("The baseline is the reference; the candidate is the version being compared with it.")
    return "\n".join(lines)


def system_prompt(reports: ReportSet, tools: list[BaseTool]) -> str:
    return _template().substitute(reports=describe_reports(reports), tools=describe_tools(tools))


class ChatListener(Protocol):
    """Who shows the chat: text as it is written, and each tool call as it is made."""

    def on_text(self, text: str) -> None: ...

    def on_tool(self, name: str, args: dict[str, Any]) -> None: ...


class _Quiet:
    def on_text(self, text: str) -> None:
        pass

    def on_tool(self, name: str, args: dict[str, Any]) -> None:
        pass


class ToolUse(BaseModel):
    name: str
    args: dict[str, Any]
    chars: int
    truncated: bool


class AskAnswer(BaseModel):
    question: str
    answer: str
    marked: str  # the answer with a mark after each citation that does not match
    citations: list[Citation]
    tool_calls: list[ToolUse]
    reports: dict[str, str]  # label -> path
    focus: dict[str, str]  # label -> "REF NAME"
    model: str
    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def mismatches(self) -> list[Citation]:
        return [c for c in self.citations if not c.ok]


class AskChat:
    def __init__(
        self,
        reports: ReportSet,
        model: BaseChatModel,
        *,
        model_name: str = "",
        endpoint: str | None = None,
        tool_rounds: int = TOOL_ROUNDS,
        tool_result_chars: int = TOOL_RESULT_CHARS,
    ) -> None:
        self.reports = reports
        self.tools = make_tools(reports)
        self.model = model
        self.bound = model.bind_tools(self.tools)
        self.model_name = model_name or str(getattr(model, "model_name", "") or type(model).__name__)
        self.endpoint = endpoint or "the LLM endpoint"
        self.tool_rounds = tool_rounds
        self.tool_result_chars = tool_result_chars
        self.history: list[BaseMessage] = [SystemMessage(system_prompt(reports, self.tools))]

    def _reply(self, runnable: Runnable[Any, Any], listener: ChatListener, gap: bool) -> AIMessage:
        """One model call, streamed: text goes to the listener as it arrives."""
        whole: AIMessage | None = None
        merged: AIMessageChunk | None = None
        started = False
        try:
            for piece in runnable.stream(self.history):
                text = piece.text if isinstance(piece, BaseMessage) else ""
                if text:
                    if gap and not started:
                        listener.on_text("\n\n")
                    started = True
                    listener.on_text(text)
                if isinstance(piece, AIMessageChunk):
                    merged = piece if merged is None else merged + piece
                elif isinstance(piece, AIMessage):  # a model that does not stream answers whole
                    whole = piece
        except openai.APIError as exc:
            raise llm.endpoint_problem(self.endpoint, self.model_name, exc, who="ask") from exc
        if merged is not None:
            message = to_message(merged)
            assert isinstance(message, AIMessage)
            return message
        return whole or AIMessage(content="")

    def ask(self, question: str, listener: ChatListener | None = None) -> AskAnswer:
        listener = listener or _Quiet()
        self.history.append(HumanMessage(question))
        texts: list[str] = []
        uses: list[ToolUse] = []
        tokens_in = tokens_out = 0
        for round_ in range(self.tool_rounds + 1):
            last = round_ == self.tool_rounds
            if last:
                self.history.append(HumanMessage(LAST_CALL))
            reply = self._reply(self.model if last else self.bound, listener, gap=bool(texts))
            used = llm.usage_of(reply)
            tokens_in, tokens_out = tokens_in + used.input_tokens, tokens_out + used.output_tokens
            if reply.text.strip():
                texts.append(reply.text.strip())
            if last or not reply.tool_calls:
                # Tool calls left unanswered would break the next request of the conversation.
                self.history.append(AIMessage(content=reply.content) if reply.tool_calls else reply)
                break
            self.history.append(reply)
            for message, args, cut in run_tool_calls(reply, self.tools, self.tool_result_chars):
                listener.on_tool(str(message.name), args)
                log.debug("tool %s(%s): %s", message.name, args, str(message.content)[:200])
                self.history.append(message)
                uses.append(ToolUse(name=str(message.name), args=args, chars=len(str(message.content)), truncated=cut))
        answer = "\n\n".join(texts)
        citations = check_citations(answer, self.reports)
        return AskAnswer(
            question=question,
            answer=answer,
            marked=mark(answer, citations),
            citations=citations,
            tool_calls=uses,
            reports={r.label: str(r.path) if r.path else "" for r in self.reports.reports},
            focus={r.label: f"{r.ref(r.focus)} {r.focus.name}" for r in self.reports.reports},
            model=self.model_name,
            input_tokens=tokens_in,
            output_tokens=tokens_out,
        )


def chat_from_settings(
    settings: Settings, reports: ReportSet, *, model: str | None = None, tool_rounds: int = TOOL_ROUNDS
) -> AskChat:
    """The chat on the configured endpoint; it talks to the reviewer's model (the role that reads
    profiles): `model`, else llm_reviewer_model, else llm_model."""
    config = AgentConfig.from_settings(settings, "ask", RunFlags(reviewer_model=model), run_id="ask")
    return AskChat(
        reports,
        llm.chat_model(config, "reviewer"),
        model_name=config.role("reviewer").model,
        endpoint=config.base_url or llm.DEFAULT_ENDPOINT,
        tool_rounds=tool_rounds,
    )
