"""Memory: a local knowledge base of every evaluated candidate and every lesson, used by the planner.

Layer 3 of DESIGN.md: it imports problems, hardware_specs, config and errors (never the agent,
the CLI, langchain or textual). What lives here:
- `store`: the SQLite file (WAL, busy timeout, versioned schema from `migrations`), and its errors;
- `records`, `rows`: the entries (a candidate, a lesson, a machine) and their column layout;
- `signature`: a problem's operator signature (traced on meta tensors), for "similar problems";
- `machine`: which GPU or CPU a candidate was measured on, as memory keys it;
- `knowledge`: `KnowledgeBase`, recording, annotating, listing, forgetting;
- `retrieval`: the ranked, budgeted recall the planner's prompt shows (each item says why);
- `exchange`: export and import as JSON lines; `seed`: the general lessons shipped in `seed_lessons.json`.
"""

from kernelwright.memory.knowledge import KnowledgeBase
from kernelwright.memory.machine import current_machine, gpu_machine
from kernelwright.memory.records import CandidateEntry, LessonEntry, Machine, Speed, candidate_uid, error_class
from kernelwright.memory.retrieval import Recall, RecallItem, RecallQuery, rank
from kernelwright.memory.signature import OpSignature, ProblemKey
from kernelwright.memory.store import MemoryCorrupt, MemorySchemaTooNew, MemoryStore, MemoryStoreError

__all__ = [
    "CandidateEntry",
    "KnowledgeBase",
    "LessonEntry",
    "Machine",
    "MemoryCorrupt",
    "MemorySchemaTooNew",
    "MemoryStore",
    "MemoryStoreError",
    "OpSignature",
    "ProblemKey",
    "Recall",
    "RecallItem",
    "RecallQuery",
    "Speed",
    "candidate_uid",
    "current_machine",
    "error_class",
    "gpu_machine",
    "rank",
]
