"""The `kernelwright` command line (typer). Every command returns an ExitCode; `main` maps
errors to exit codes and one line on stderr (`--debug` for the traceback)."""

from __future__ import annotations

import datetime as dt
import logging
import signal
import sys
import traceback
from pathlib import Path
from typing import Annotated, Optional

import typer

from kernelwright import __version__
from kernelwright.cli import (
    ask_cmd,
    batch_cmd,
    demo_cmd,
    doctor_cmd,
    eval_cmd,
    export_cmd,
    memory_cmd,
    model_cmd,
    optimize_cmd,
    profile_cmd,
    runs_cmd,
    specs_cmd,
    tui_cmd,
)
from kernelwright.cli.context import AppState
from kernelwright.cli.problems_cmd import problems_app
from kernelwright.errors import ExitCode, KernelwrightError
from kernelwright.harness.workers import live

app = typer.Typer(
    name="kernelwright",
    help="An agentic kernel engineer: writes custom CUDA/Triton/C++ kernels for PyTorch programs, "
    "proves them correct by fuzzing, and times them honestly against eager and torch.compile.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    add_completion=False,
)
app.add_typer(problems_app, name="problems")

# Commands living in their own modules register themselves with `register(app)`.
for _module in (
    optimize_cmd,
    demo_cmd,
    runs_cmd,
    eval_cmd,
    specs_cmd,
    profile_cmd,
    doctor_cmd,
    batch_cmd,
    memory_cmd,
    ask_cmd,
    tui_cmd,
    model_cmd,
    export_cmd,
):
    _module.register(app)

_state = AppState()


def _version(value: bool) -> None:
    if value:
        typer.echo(f"kernelwright {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    ctx: typer.Context,
    config: Annotated[
        Optional[Path],
        typer.Option(
            "--config",
            help="Config file (TOML); default: $KERNELWRIGHT_CONFIG, ./kernelwright.toml, $KERNELWRIGHT_HOME/config.toml.",
        ),
    ] = None,
    home: Annotated[
        Optional[Path],
        typer.Option("--home", help="kernelwright's state folder (memory, caches). Env: KERNELWRIGHT_HOME."),
    ] = None,
    runs_dir: Annotated[
        Optional[Path],
        typer.Option("--runs-dir", help="Folder of run folders. Env: KERNELWRIGHT_RUNS_DIR. Default: ./runs."),
    ] = None,
    debug: Annotated[bool, typer.Option("--debug", help="Print tracebacks and debug logs.")] = False,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    _state.debug = debug
    _state.config_file = config
    _state.home, _state.runs_dir = home, runs_dir
    logging.basicConfig(level=logging.DEBUG if debug else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    ctx.obj = _state


def _crash_log(exc: BaseException) -> Path | None:
    """Save an internal error's traceback; the path is printed so a bug report can attach it."""
    text = "".join(traceback.format_exception(exc))
    try:
        home = _state.settings().home if _state.config_file is None else Path.cwd()
    except KernelwrightError:
        home = Path.cwd()
    folder = home / "logs"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"crash-{dt.datetime.now():%Y%m%d-%H%M%S}.txt"
        from kernelwright.harness.sandbox.isolation import redact  # only on this rare path

        path.write_text(redact(text))  # a traceback can quote an API key (a failed request's headers)
        return path
    except OSError:
        return None


class _Interrupted(BaseException):
    """Ctrl-C, raised by our handler. Not a KeyboardInterrupt, which click would swallow into an
    Abort after printing a blank line: this one reaches `main` untouched."""


def _on_interrupt(signum: int, frame: object) -> None:
    """Ctrl-C: end every worker (and the compilers they started) at once, before the stack
    unwinds through code that would otherwise wait for them; then unwind."""
    live.interrupt()
    raise _Interrupted


INTERRUPTED_LINE = "interrupted: every process kernelwright started has been stopped"


def main(argv: list[str] | None = None) -> None:
    """Entry point of the console script and `python -m kernelwright`."""
    code: int
    live.resume()
    previous = signal.signal(signal.SIGINT, _on_interrupt)
    try:
        result = app(args=argv, prog_name="kernelwright", standalone_mode=False)
        code = int(result) if isinstance(result, int) else 0
    except typer.Exit as exc:
        code = exc.exit_code
    except typer.Abort:  # click turns a KeyboardInterrupt inside a command into Abort
        typer.echo(INTERRUPTED_LINE, err=True)
        code = ExitCode.INTERRUPTED
    except typer.TyperException as exc:  # bad flags, missing arguments (typer's own click)
        show = getattr(exc, "show", None)
        if callable(show):
            show()
        else:
            typer.echo(f"usage error: {exc}", err=True)
        code = ExitCode.USAGE
    except KernelwrightError as exc:
        if _state.debug:
            traceback.print_exc()
        typer.echo(exc.one_line(), err=True)
        code = exc.exit_code
    except (_Interrupted, KeyboardInterrupt):
        typer.echo(INTERRUPTED_LINE, err=True)
        code = ExitCode.INTERRUPTED
    except Exception as exc:  # a bug in kernelwright: say so, keep the traceback
        if _state.debug:
            traceback.print_exc()
        path = _crash_log(exc)
        where = f"; traceback saved to {path}" if path else ""
        typer.echo(f"internal error: {type(exc).__name__}: {exc}{where}", err=True)
        code = ExitCode.INTERNAL
    finally:
        signal.signal(signal.SIGINT, previous)
    sys.exit(code)
