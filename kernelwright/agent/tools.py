"""The tools the planner and reviewer may call (LangChain tools, bound with `bind_tools`).

gpu_specs(question, gpu=None)   a spec figure or feature, or a compact summary, of the run's GPU or a named one
read_candidate(index)           an earlier candidate's source (whole), verdict and message
profile_digest(index)           a candidate's Nsight Compute digest, or "not profiled: <why>"
digest_diff(a, b)               what changed between two candidates' digests

Each tool reads the run's state and folder (never a harness internal) and returns text, expected
failures included. Every tool also takes `offset` (default 0): `run_tool_calls` returns at most
`tool_result_chars` characters of an answer from that offset, and when more is left it says how
much and which offset reads on, so one answer never floods a prompt and nothing is cut silently.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool
from pydantic import ValidationError

from kernelwright.agent.configuration import AgentConfig
from kernelwright.agent.state import AgentState, CandidateRecord
from kernelwright.errors import KernelwrightError
from kernelwright.profiler import NcuDigest
from kernelwright.profiler import diff as diff_digests
from kernelwright.tools import specs


def page(text: str, limit: int, offset: int = 0, *, again: str = "") -> tuple[str, bool]:
    """Characters [offset, offset + limit) of `text`, with a marker for what is left before and
    after and how to read on (`again`: the call to repeat with another offset); (text, paged?)."""
    offset = max(0, min(int(offset), len(text)))
    if offset == 0 and len(text) <= limit:
        return text, False
    end = min(len(text), offset + limit)
    if end < len(text):  # end the page at a line break when one is near
        cut = text.rfind("\n", offset, end)
        end = cut + 1 if cut > offset + limit // 2 else end
    shown = text[offset:end]
    before = f"[characters 0-{offset} of this answer come before: offset=0 reads them]\n" if offset else ""
    after = ""
    if end < len(text):
        how = f"call {again} again with offset={end}" if again else f"offset={end} reads on"
        after = f"\n[... {len(text) - end} more characters of {len(text)}: {how}]"
    return before + shown + after, True


class RunView:
    """What the tools read: the candidates, profiles and folder of one run at one step."""

    def __init__(self, state: AgentState, config: AgentConfig) -> None:
        self.state, self.config = state, config

    def candidate(self, index: int) -> CandidateRecord | None:
        origin = self.state.get("origin")
        if index == 0 and origin is not None:
            return origin
        return next((c for c in self.state.get("candidates", []) if c["index"] == index), None)

    def _missing(self, index: int) -> str:
        known = [c["index"] for c in self.state.get("candidates", [])]
        if self.state.get("origin") is not None:
            known.insert(0, 0)
        return f"no candidate {index} in this run (candidates: {', '.join(map(str, known)) or 'none yet'})"

    def gpu_specs(self, question: str, gpu: str | None = None, offset: int = 0) -> str:
        if gpu is None and self.config.device != "cuda":
            return (
                "this run is on the CPU: there is no GPU to describe (name a GPU, e.g. gpu='h100', to read "
                "its table entry)"
            )
        return specs.answer(question, gpu)

    def read_candidate(self, index: int, offset: int = 0) -> str:
        cand = self.candidate(index)
        if cand is None:
            return self._missing(index)
        path = Path(cand["path"])
        source = path.read_text() if path.is_file() else f"(source file {path} is missing)"
        reason = f" ({cand['reason']})" if cand["reason"] else ""
        speed = ", ".join(
            f"{s['ratio']:.2f}x vs {n} [CI {s['ci_low']:.2f}-{s['ci_high']:.2f}]" for n, s in cand["speedups"].items()
        )
        parent = cand.get("parent")
        lines = [
            f"candidate {index} (round {cand['round']}, attempt {cand['attempt']}"
            + (f", started from candidate {parent}" if parent is not None else "")
            + ")",
            f"verdict: {cand['verdict']}{reason}",
            f"speedups: {speed or 'not timed'}",
            f"message: {cand['message'] or '(none)'}",
            f"source:\n```python\n{source}```",
        ]
        return "\n".join(lines)

    def profile_digest(self, index: int, offset: int = 0) -> str:
        cand = self.candidate(index)
        if cand is None:
            return self._missing(index)
        found = self.state.get("profiles", {}).get(str(index))
        if found is not None and found["text"]:
            own = f"\nown kernels' share of GPU time: {found['own_pct']:.0f}%" if found["own_pct"] is not None else ""
            return found["text"] + own
        if found is not None and found["note"]:
            return f"not profiled: {found['note']}"
        if cand["verdict"] != "correct":
            return f"not profiled: candidate {index} is {cand['verdict']} (only correct candidates are profiled)"
        if self.config.device != "cuda":
            return "not profiled: this run is on the CPU (Nsight Compute profiles GPU kernels)"
        return f"not profiled: candidate {index} has no stored profile"

    def _digest(self, index: int) -> tuple[NcuDigest | None, str]:
        found = self.state.get("profiles", {}).get(str(index))
        path = Path(found["digest_json"]) if found and found["digest_json"] else None
        if path is None or not path.is_file():
            return None, self.profile_digest(index)
        try:
            return NcuDigest.model_validate_json(path.read_text()), ""
        except ValidationError as exc:
            return None, f"the stored digest of candidate {index} is unreadable: {exc.errors()[0]['msg']}"

    def digest_diff(self, a: int, b: int, offset: int = 0) -> str:
        first, why_a = self._digest(a)
        second, why_b = self._digest(b)
        if first is None or second is None:
            return "cannot diff: " + "; ".join(f"candidate {i}: {w}" for i, w in ((a, why_a), (b, why_b)) if w)
        return f"candidate {a} (baseline) vs candidate {b}:\n" + diff_digests(first, second).to_text()


def make_tools(state: AgentState, config: AgentConfig) -> list[BaseTool]:
    view = RunView(state, config)
    return [
        StructuredTool.from_function(
            view.gpu_specs,
            name="gpu_specs",
            description="GPU specifications of this run's GPU (or a named one, e.g. gpu='h100'): question is a "
            "field ('l2', 'memory.bandwidth_gbs', 'sms', 'smem_per_block', 'ridge.cuda_fp32'), a feature "
            "('wgmma', 'tma', 'cp.async', 'fp8'), or 'summary' for the main figures.",
        ),
        StructuredTool.from_function(
            view.read_candidate,
            name="read_candidate",
            description="Source, verdict, speedups and harness message of an earlier candidate of this run "
            "(index as in the history; 0 is the candidate this run branched from, or the kernel memory started it "
            "from).",
        ),
        StructuredTool.from_function(
            view.profile_digest,
            name="profile_digest",
            description="The Nsight Compute digest of a candidate (duration, speed-of-light, occupancy, stalls, "
            "NCU findings, own kernels' share), or why it was not profiled.",
        ),
        StructuredTool.from_function(
            view.digest_diff,
            name="digest_diff",
            description="What changed between the profiles of candidate a (baseline) and candidate b.",
        ),
    ]


def run_tool_calls(
    reply: AIMessage, tools: list[BaseTool], limit: int
) -> list[tuple[ToolMessage, dict[str, Any], bool]]:
    """(the ToolMessage, the call's args, whether the answer was paged) per call of `reply`."""
    by_name = {t.name: t for t in tools}
    out: list[tuple[ToolMessage, dict[str, Any], bool]] = []
    for call in reply.tool_calls:
        tool = by_name.get(call["name"])
        args = dict(call.get("args") or {})
        if tool is None:
            text = f"unknown tool {call['name']!r}; the tools are: {', '.join(by_name)}"
        else:
            try:
                text = str(tool.invoke(args))
            except (KernelwrightError, OSError, TypeError, ValueError) as exc:  # bad arguments from the model
                text = (
                    f"the tool call failed: {type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"
                )
        try:
            offset = int(args.get("offset") or 0)
        except (TypeError, ValueError):
            offset = 0
        text, cut = page(text, limit, offset, again=call["name"])
        out.append(
            (ToolMessage(content=text, tool_call_id=call.get("id") or call["name"], name=call["name"]), args, cut)
        )
    return out


def describe_tools(tools: list[BaseTool]) -> str:
    """The tools, one line each, for a prompt (or why there are none)."""
    if not tools:
        return "(none on this endpoint: answer from what is above)"
    return "\n".join(f"- {t.name}({', '.join(t.args)}): {t.description}" for t in tools)


def args_text(args: dict[str, Any]) -> str:
    return json.dumps(args, default=str)[:200]
