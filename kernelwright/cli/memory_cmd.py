"""`kernelwright memory list|show|search|export|import|forget`: the knowledge base the agent writes
every evaluated candidate and lesson to, and that the planner recalls from (`memory/`).

Reading commands never create the database; `import` does. Errors of the file itself (locked,
damaged, from a newer kernelwright) end the command with exit 5 and leave the file alone.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich.console import Console
from rich.markup import escape

from kernelwright.cli.context import AppState
from kernelwright.cli.tables import Column, fitted_table
from kernelwright.errors import ExitCode, UsageError
from kernelwright.vocabulary import Backend, Device, DeviceChoice

if TYPE_CHECKING:  # the memory package (pydantic, sqlite) loads when a memory command runs
    from kernelwright.memory import CandidateEntry, KnowledgeBase, LessonEntry

out = Console(width=None if sys.stdout.isatty() else 200)  # pipes and logs get whole rows
err = Console(stderr=True, width=None if sys.stderr.isatty() else 200)
memory_app = typer.Typer(
    help="The memory: every evaluated candidate (verdict, speedups, plan, lesson) and general lessons, which "
    "the planner recalls. Stored in the `memory_db` setting (default HOME/memory.sqlite).",
    no_args_is_help=True,
)

_CANDIDATE_COLUMNS = (
    Column("id"),
    Column("when", drop=3),
    Column("problem"),
    Column("machine", drop=2),
    Column("backend", drop=4),
    Column("verdict"),
    Column("speedup", identifier=False),
    Column("lesson", drop=1, identifier=False),
)
_LESSON_COLUMNS = (
    Column("id"),
    Column("origin", drop=2),
    Column("scope", drop=1, identifier=False),
    Column("lesson", identifier=False),
)


def _path(ctx: typer.Context) -> Path:
    state: AppState = ctx.obj
    path = state.settings().memory_db
    assert path is not None  # the settings always derive it
    return Path(path)


def _open(ctx: typer.Context, *, create: bool = False) -> KnowledgeBase | None:
    """The knowledge base, or None (said on stderr) when reading a database that does not exist."""
    from kernelwright.memory import KnowledgeBase

    path = _path(ctx)
    if not create and not path.exists():
        err.print(f"no memory database at {path} yet (a run or `memory import` creates it)", highlight=False)
        return None
    return KnowledgeBase.open(path)


def _speed(entry: CandidateEntry) -> str:
    if entry.verdict != "correct":
        return "-"
    parts = [
        f"{s.ratio:.2f}x {name}" for name, s in (("compile", entry.speed_compile), ("eager", entry.speed_eager)) if s
    ]
    return ", ".join(parts) or "not timed"


def _cut(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _candidate_rows(entries: list[CandidateEntry]) -> list[list[str]]:
    return [
        [
            e.label,
            e.created_at[:10],
            e.problem,
            e.machine,
            e.backend,
            f"{e.verdict} ({e.reason})" if e.reason else e.verdict,
            _speed(e),
            _cut(e.lesson, 80) or "-",
        ]
        for e in entries
    ]


def _lesson_rows(lessons: list[LessonEntry]) -> list[list[str]]:
    return [[lesson.label, lesson.origin, lesson.scope(), _cut(lesson.text, 160)] for lesson in lessons]


def _print_table(columns: tuple[Column, ...], rows: list[list[str]], title: str) -> None:
    table = fitted_table(
        columns, [[escape(c) for c in row] for row in rows], out.width, title=title, title_justify="left"
    )
    out.print(table)


@memory_app.command("list")
def list_command(
    ctx: typer.Context,
    problem: Annotated[
        Optional[str], typer.Option("--problem", help="Only this problem (name or hash prefix).")
    ] = None,
    machine: Annotated[
        Optional[str], typer.Option("--machine", help="Only GPUs/CPUs whose name or arch contains this.")
    ] = None,
    verdict: Annotated[
        Optional[str], typer.Option("--verdict", help="Only this verdict (correct, rejected, ...).")
    ] = None,
    run_id: Annotated[Optional[str], typer.Option("--run", help="Only this run's candidates.")] = None,
    lessons: Annotated[bool, typer.Option("--lessons", help="List the general lessons instead.")] = False,
    limit: Annotated[int, typer.Option("--limit", min=1, help="At most this many rows, newest first.")] = 50,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON (sources left out).")] = False,
) -> int:
    """Candidates remembered (newest first), or with --lessons the general lessons."""
    kb = _open(ctx)
    if kb is None:
        if as_json:
            typer.echo("[]")
        return ExitCode.OK
    with kb:
        counts = kb.counts()
        if lessons:
            found: list[Any] = kb.lessons(limit=limit)
        else:
            found = kb.candidates(problem=problem, machine=machine, verdict=verdict, run_id=run_id, limit=limit)
    if as_json:
        typer.echo(json.dumps([e.model_dump(mode="json", exclude={"source"}) for e in found], indent=2))
        return ExitCode.OK
    title = f"memory {kb.path}: {counts['candidates']} candidate(s), {counts['lessons']} lesson(s)"
    if lessons:
        _print_table(_LESSON_COLUMNS, _lesson_rows(found), title)
    elif found:
        _print_table(_CANDIDATE_COLUMNS, _candidate_rows(found), title)
    else:
        out.print(f"{title}\nno candidate matches", highlight=False)
    return ExitCode.OK


def _show_candidate(e: CandidateEntry, source: bool) -> None:
    out.print(
        f"[bold]{e.label}[/] ({e.uid}): {escape(e.problem)} — {e.verdict}" + (f" ({e.reason})" if e.reason else "")
    )
    lines = [
        f"run {e.run_id}, candidate {e.index}, round {e.round}" + (f" (scripted: {e.scripted})" if e.scripted else ""),
        f"machine: {e.machine} ({e.arch}, {e.device}); backend {e.backend}",
        f"speedups: {e.speed_text() if e.verdict == 'correct' else '-'}",
        f"problem sha256: {e.problem_sha256}; source sha256: {e.source_sha256}",
        f"recorded {e.created_at}, updated {e.updated_at}, origin {e.origin}",
        f"message: {e.message or '-'}",
        f"plan: {e.plan or '-'}",
        f"lesson: {e.lesson or '-'}",
        f"profile digest: {e.digest or '-'}",
    ]
    for line in lines:
        out.print(escape(line), highlight=False)
    if source:
        out.print("source:", highlight=False)
        out.print(escape(e.source), highlight=False, markup=False)


@memory_app.command("show")
def show_command(
    ctx: typer.Context,
    entry_id: Annotated[str, typer.Argument(help="An entry id (c12, l3) or a uid prefix (see `memory list`).")],
    source: Annotated[bool, typer.Option("--source/--no-source", help="Print a candidate's source.")] = True,
    as_json: Annotated[bool, typer.Option("--json", help="Print the entry as JSON.")] = False,
) -> int:
    """One entry: a candidate's verdict, speedups, plan, lesson, digest and source, or a lesson."""
    from kernelwright.memory import CandidateEntry

    kb = _open(ctx)
    if kb is None:
        raise UsageError(f"no memory entry {entry_id!r}: there is no memory database yet")
    with kb:
        entry = kb.entry(entry_id)
    if as_json:
        typer.echo(entry.model_dump_json(indent=2))
    elif isinstance(entry, CandidateEntry):
        _show_candidate(entry, source)
    else:
        out.print(f"[bold]{entry.label}[/] ({entry.uid}), {entry.origin}; {escape(entry.scope())}")
        out.print(escape(entry.text), highlight=False)
        out.print(escape(f"source: {entry.source}" + (f" <{entry.url}>" if entry.url else "")), highlight=False)
    return ExitCode.OK


def _recall_for(
    kb: KnowledgeBase,
    ctx: typer.Context,
    problem: str,
    device: DeviceChoice | None,
    backend: Backend | None,
    budget: int,
) -> None:
    from kernelwright.memory import RecallQuery, current_machine
    from kernelwright.problems import resolve_problem
    from kernelwright.tools.evaluate import resolve_device

    state: AppState = ctx.obj
    chosen = resolve_device(device, state.settings())
    key = kb.problem_key(resolve_problem(problem))
    machine = current_machine(chosen)
    query = RecallQuery(
        key, machine, backend or (Backend.CUDA if chosen == Device.CUDA else Backend.CPP), budget_tokens=budget
    )
    found = kb.recall(query)
    out.print(
        escape(
            f"what the planner would recall for {key.name} on {machine.describe()}, backend {query.backend} "
            f"(signature: {key.signature.describe()}; ~{found.tokens} tokens):"
        ),
        highlight=False,
    )
    out.print(escape(found.text()), highlight=False)
    if found.best is not None:
        out.print(escape(f"a new run would start from {found.best.label} ({found.best.outcome()})"), highlight=False)


@memory_app.command("search")
def search_command(
    ctx: typer.Context,
    words: Annotated[
        Optional[list[str]], typer.Argument(help="Words that must all appear (plan, lesson, message, ...).")
    ] = None,
    for_problem: Annotated[
        Optional[str],
        typer.Option("--for", help="Show what the planner would recall for this problem, ranked, with why."),
    ] = None,
    device: Annotated[
        Optional[DeviceChoice], typer.Option("--device", help="With --for: cuda or cpu (default: the GPU if any).")
    ] = None,
    backend: Annotated[Optional[Backend], typer.Option("--backend", help="With --for: cuda, triton or cpp.")] = None,
    budget: Annotated[int, typer.Option("--budget", min=0, help="With --for: the token budget.")] = 1500,
    limit: Annotated[int, typer.Option("--limit", min=1, help="At most this many candidates.")] = 20,
    as_json: Annotated[bool, typer.Option("--json", help="Print the matches as JSON (not with --for).")] = False,
) -> int:
    """Find candidates and lessons by words, or (--for PROBLEM) show the planner's ranked recall."""
    text = " ".join(words or [])
    if not text and not for_problem:
        raise UsageError("give words to search for, or --for PROBLEM", hint="e.g. `memory search tf32`")
    kb = _open(ctx)
    if kb is None:
        return ExitCode.OK
    with kb:
        if for_problem:
            _recall_for(kb, ctx, for_problem, device, backend, budget)
            return ExitCode.OK
        candidates = kb.candidates(text=text, limit=limit)
        lessons = kb.lessons(text=text)
    if as_json:
        doc = {
            "candidates": [e.model_dump(mode="json", exclude={"source"}) for e in candidates],
            "lessons": [lesson.model_dump(mode="json") for lesson in lessons],
        }
        typer.echo(json.dumps(doc, indent=2))
        return ExitCode.OK
    if candidates:
        _print_table(_CANDIDATE_COLUMNS, _candidate_rows(candidates), f"candidates matching {text!r}")
    if lessons:
        _print_table(_LESSON_COLUMNS, _lesson_rows(lessons), f"lessons matching {text!r}")
    if not candidates and not lessons:
        out.print(f"nothing in memory matches {escape(repr(text))}", highlight=False)
    return ExitCode.OK


@memory_app.command("export")
def export_command(
    ctx: typer.Context,
    file: Annotated[Optional[Path], typer.Argument(help="Where to write JSON lines; omit or `-` for stdout.")] = None,
    problem: Annotated[Optional[str], typer.Option("--problem", help="Only this problem's candidates.")] = None,
    lessons: Annotated[bool, typer.Option("--lessons/--no-lessons", help="Include lessons (not the seed's).")] = True,
) -> int:
    """Write the memory as JSON lines (a header, then problems, candidates, lessons) to share it."""
    from kernelwright.memory.exchange import export_lines

    kb = _open(ctx)
    if kb is None:
        return ExitCode.OK
    to_stdout = file is None or str(file) == "-"
    with kb:
        lines = list(export_lines(kb, problem=problem, lessons=lessons))
    body = "".join(line + "\n" for line in lines)
    if to_stdout:
        sys.stdout.write(body)
        sys.stdout.flush()
    else:
        assert file is not None
        try:
            file.parent.mkdir(parents=True, exist_ok=True)
            file.write_text(body, encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"cannot write {file}: {exc}") from exc
    counts = json.loads(lines[0])["counts"]
    where = "stdout" if to_stdout else str(file)
    err.print(
        f"exported {counts['candidates']} candidate(s), {counts['lessons']} lesson(s), "
        f"{counts['problems']} problem signature(s) to {where}",
        highlight=False,
    )
    return ExitCode.OK


@memory_app.command("import")
def import_command(
    ctx: typer.Context,
    file: Annotated[Path, typer.Argument(help="A `memory export` file (JSON lines); `-` for stdin.")],
) -> int:
    """Add an export's entries; none is added twice, and a file with a malformed line is refused whole."""
    from kernelwright.memory.exchange import import_lines

    if str(file) != "-" and not file.is_file():
        raise UsageError(f"no file {file}")
    kb = _open(ctx, create=True)
    assert kb is not None
    with kb:
        if str(file) == "-":
            counts = import_lines(kb, sys.stdin, "stdin")
        else:
            try:
                with file.open(encoding="utf-8") as handle:
                    counts = import_lines(kb, handle, str(file))
            except (OSError, UnicodeDecodeError) as exc:
                raise UsageError(f"cannot read {file}: {exc}") from exc
    out.print(f"imported into {kb.path}: {counts.text()}", highlight=False)
    return ExitCode.OK


@memory_app.command("forget")
def forget_command(
    ctx: typer.Context,
    ids: Annotated[Optional[list[str]], typer.Argument(help="Entry ids (c12, l3) or uid prefixes.")] = None,
    problem: Annotated[Optional[str], typer.Option("--problem", help="Every candidate of this problem.")] = None,
    run_id: Annotated[Optional[str], typer.Option("--run", help="Every candidate of this run.")] = None,
    yes: Annotated[bool, typer.Option("--yes", help="Confirm forgetting by --problem or --run.")] = False,
) -> int:
    """Delete entries (by id, or a problem's or a run's with --yes); a forgotten seed lesson stays gone."""
    if not ids and not problem and not run_id:
        raise UsageError("name entries to forget (ids), or --problem NAME / --run RUN_ID with --yes")
    kb = _open(ctx)
    if kb is None:
        raise UsageError("there is no memory database yet: nothing to forget")
    with kb:
        chosen: list[Any] = [kb.entry(i) for i in ids or []]  # an unknown id: usage error, nothing deleted
        if problem or run_id:
            bulk = kb.candidates(problem=problem, run_id=run_id)
            if bulk and not yes:
                raise UsageError(f"that selects {len(bulk)} candidate(s); add --yes to forget them")
            chosen += bulk
        count = kb.forget(chosen)
    out.print(f"forgot {count} entr{'y' if count == 1 else 'ies'} from {kb.path}", highlight=False)
    return ExitCode.OK


def register(app: typer.Typer) -> None:
    app.add_typer(memory_app, name="memory")
