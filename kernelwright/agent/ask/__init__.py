"""Chat with Nsight Compute reports (`kernelwright ask`, issue #18): questions about one `.ncu-rep`
or about a baseline and a candidate, answered by a model that reads the reports through tools and
cites the metrics it rests on, each citation checked against the report.

- `reports`: the session's reports, the kernels in focus, references such as `candidate:3`.
- `tools`: what the model may call (kernels, digest, metrics, NCU findings, hotspots, diff, GPU specs).
- `citations`: the `[[NAME = VALUE UNIT @ REF]]` form and its checker.
- `chat`: the loop (tool rounds, a streamed answer) behind `AskChat.ask`; `ChatListener` is the
  seam a frontend implements (the CLI prints; a TUI screen can show the same stream).

Report access that is pure profiler logic lives in `profiler/` (`report_file`, `report_query`,
`report_details`, `ncu_sections`); this package adds only the LLM side.
"""

from kernelwright.agent.ask.chat import AskAnswer, AskChat, ChatListener, ToolUse, chat_from_settings
from kernelwright.agent.ask.citations import Citation, check_citations
from kernelwright.agent.ask.reports import AskReport, ReportSet, from_reports, open_reports

__all__ = [
    "AskAnswer",
    "AskChat",
    "AskReport",
    "ChatListener",
    "Citation",
    "ReportSet",
    "ToolUse",
    "chat_from_settings",
    "check_citations",
    "from_reports",
    "open_reports",
]
