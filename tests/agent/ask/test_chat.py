"""The `ask` chat with the scripted chat model on recorded reports: which tools a question calls,
answers that cite values taken from the tool results (checked), a wrong citation marked, an
answer about a section the report lacks, a baseline/candidate session, follow-up questions and
the tool-round limit."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from kernelwright.agent.ask import AskChat, from_reports
from kernelwright.agent.scripted import ScriptedSession, tool_calls
from tests.agent.ask.helpers import cited, csv_report, needs_module, report, tool_results


class Recorder:
    def __init__(self) -> None:
        self.text: list[str] = []
        self.tools: list[tuple[str, dict[str, Any]]] = []

    def on_text(self, text: str) -> None:
        self.text.append(text)

    def on_tool(self, name: str, args: dict[str, Any]) -> None:
        self.tools.append((name, args))


def chat(session: ScriptedSession, *reports: Any, **kwargs: Any) -> AskChat:
    return AskChat(from_reports(*reports), session.model("ask"), **kwargs)


@needs_module
def test_a_question_calls_tools_and_cites_what_they_returned() -> None:
    def answer(messages: list[BaseMessage]) -> str:
        duration = cited(messages, "gpu__time_duration.sum")
        dram = cited(messages, "dram__bytes_read.sum")
        return f"The kernel is memory-bound: it runs {duration} and reads {dram} from DRAM."

    session = ScriptedSession(
        {
            "ask": [
                tool_calls(("list_kernels", {}), ("kernel_digest", {})),
                tool_calls(("metric", {"query": "dram__bytes"})),
                answer,
            ]
        }
    )
    seen = Recorder()
    result = chat(session, report("relu_candidate")).ask("Why is this kernel as fast as it is?", seen)
    assert [u.name for u in result.tool_calls] == ["list_kernels", "kernel_digest", "metric"]
    assert seen.tools == [("list_kernels", {}), ("kernel_digest", {}), ("metric", {"query": "dram__bytes"})]
    assert session.tools["ask"] == [
        "list_kernels",
        "kernel_digest",
        "metric",
        "rule_findings",
        "source_hotspots",
        "compare",
        "gpu_specs",
    ]
    assert len(result.citations) == 2 and all(c.ok for c in result.citations) and not result.mismatches
    assert result.citations[0].ref == "report:0" and result.citations[0].report_unit == "nsecond"
    assert "".join(seen.text) == result.answer and result.marked == result.answer
    assert result.focus == {"report": "report:0 kw_relu_kernel"}
    assert result.input_tokens > 0 and result.output_tokens > 0 and result.model == "scripted"
    # The model saw the system prompt (reports, tools, citation form), the question and each tool result.
    prompt = session.prompts["ask"][-1]
    assert isinstance(prompt[0], SystemMessage) and "[[NAME = VALUE UNIT @ REF]]" in str(prompt[0].content)
    assert "- report: " in str(prompt[0].content) and "in focus: report:0 kw_relu_kernel" in str(prompt[0].content)
    assert isinstance(prompt[1], HumanMessage) and len(tool_results(prompt)) == 3


@needs_module
def test_a_wrong_citation_is_marked_in_the_answer() -> None:
    session = ScriptedSession(
        {
            "ask": [
                tool_calls(("kernel_digest", {})),
                lambda m: (
                    f"Fine: {cited(m, 'launch__block_size')}. Wrong: [[gpu__time_duration.sum = 1 us]], "
                    "[[no_such_metric.sum = 3]]."
                ),
            ]
        }
    )
    result = chat(session, report("relu_candidate")).ask("What limits it?")
    assert [c.status for c in result.citations] == ["ok", "value_mismatch", "unknown_metric"]
    assert "[[gpu__time_duration.sum = 1 us]] [✗ value mismatch: the report says" in result.marked
    assert "[[no_such_metric.sum = 3]] [✗ unknown metric: report:0 (kw_relu_kernel" in result.marked
    assert len(result.mismatches) == 2


@needs_module
def test_a_question_the_report_cannot_answer_names_the_missing_section() -> None:
    def answer(messages: list[BaseMessage]) -> str:
        [result] = tool_results(messages, "metric")
        command = result.split("collect it with: ")[1].strip()
        return f"This report has no WarpStateStats section, so it cannot say why warps stall. Collect it:\n{command}"

    session = ScriptedSession({"ask": [tool_calls(("metric", {"query": "stall"})), answer]})
    result = chat(session, report("transpose_no_warpstate")).ask("What are the top warp stall reasons?")
    assert "no WarpStateStats section" in result.answer
    assert "ncu --clock-control none" in result.answer and "--section WarpStateStats" in result.answer
    assert "-k regex:transpose_smem" in result.answer and result.citations == []


@needs_module
def test_a_compare_session_baseline_vs_candidate() -> None:
    # The same problem (1_relu): PyTorch's kernel (its 9.5 MB report is kept as CSV) vs a hand CUDA kernel.
    def answer(messages: list[BaseMessage]) -> str:
        [diff] = tool_results(messages, "compare")
        before = cited([ToolMessage(diff.split("cite candidate:0 as:")[0], tool_call_id="x")], "gpu__time_duration.sum")
        after = cited(messages, "gpu__time_duration.sum")
        return f"The candidate takes {after} against the baseline's {before}."

    session = ScriptedSession({"ask": [tool_calls(("compare", {})), answer]})
    baseline, candidate = csv_report("relu_reference"), report("relu_candidate")
    result = chat(session, baseline, candidate).ask("Why is the candidate faster or slower?")
    assert [c.ref for c in result.citations] == ["candidate:0", "baseline:0"] and not result.mismatches
    assert result.reports == {"baseline": "", "candidate": str(candidate.path)}
    assert "vectorized_elementwise_kernel" in result.focus["baseline"] and "kw_relu" in result.focus["candidate"]
    [diff] = tool_results(session.prompts["ask"][-1], "compare")
    assert diff.startswith("baseline:0 (baseline) -> candidate:0 (candidate)") and "speedup (all kernels):" in diff
    prompt = str(session.prompts["ask"][0][0].content)
    assert (
        "- baseline: (in memory)" in prompt and "- candidate: " in prompt and "The baseline is the reference" in prompt
    )


def test_many_kernels_follow_up_questions_keep_the_conversation() -> None:
    cnn = csv_report("multi_cnn")
    session = ScriptedSession(
        {
            "ask": [
                tool_calls(("list_kernels", {})),
                lambda m: (
                    f"The longest-running kernel is the cuDNN implicit GEMM: {cited(m, 'gpu__time_duration.sum')}."
                    if "[[gpu__time_duration.sum" in "".join(tool_results(m))
                    else "Kernel 5 (sm80_xmma_fprop) takes the most time."
                ),
                tool_calls(("kernel_digest", {"kernel": "max_pool"})),
                lambda m: f"The max pool runs {cited(m, 'gpu__time_duration.sum')}.",
            ]
        }
    )
    ask = chat(session, cnn)
    first = ask.ask("Which kernel takes the most time?")
    assert first.answer == "Kernel 5 (sm80_xmma_fprop) takes the most time." and first.citations == []
    second = ask.ask("And the max pool?")
    assert second.citations[0].ref == "report:4" and second.citations[0].ok
    assert [u.name for u in second.tool_calls] == ["kernel_digest"]
    # The follow-up's prompt holds the first question, its tool result and its answer.
    prompt = session.prompts["ask"][-1]
    humans = [str(m.content) for m in prompt if isinstance(m, HumanMessage)]
    assert humans == ["Which kernel takes the most time?", "And the max pool?"]
    assert len(tool_results(prompt, "list_kernels")) == 1


def test_tool_rounds_are_bounded_and_the_last_call_must_answer() -> None:
    looping = [tool_calls(("list_kernels", {})) for _ in range(2)]
    last = AIMessage(content="Here is what I found.", tool_calls=[{"name": "list_kernels", "args": {}, "id": "z"}])
    session = ScriptedSession({"ask": [*looping, last]})
    ask = chat(session, csv_report("multi_cnn"), tool_rounds=2)
    result = ask.ask("Tell me everything.")
    assert result.answer == "Here is what I found." and len(result.tool_calls) == 2
    final_prompt = session.prompts["ask"][-1]
    assert "You have used your tool calls" in str(final_prompt[-1].content)
    assert isinstance(ask.history[-1], AIMessage) and not ask.history[-1].tool_calls  # no dangling calls


def test_a_tool_error_is_text_for_the_model() -> None:
    session = ScriptedSession(
        {"ask": [tool_calls(("kernel_digest", {"kernel": "nope"}), ("nonexistent", {})), "Sorry."]}
    )
    result = chat(session, csv_report("multi_cnn")).ask("?")
    digest, unknown = tool_results(session.prompts["ask"][-1])
    assert digest.startswith("no kernel in the report (in memory) matches 'nope'")
    assert unknown.startswith("unknown tool 'nonexistent'") and result.answer == "Sorry."


@pytest.mark.parametrize("bad", [(), ("a", "b", "c")])
def test_from_reports_takes_one_or_two(bad: tuple[str, ...]) -> None:
    with pytest.raises(ValueError, match="one report"):
        from_reports(*[csv_report("multi_cnn") for _ in bad])
