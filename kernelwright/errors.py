"""One exception family for kernelwright, mapped to the CLI exit codes of DESIGN.md.

Expected failures of a candidate (a build error, a crash, a wrong answer) are *values* in results;
these exceptions are for conditions that end a command: user mistakes, a missing environment,
and bugs.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """Process exit codes shared by every command. With several outcomes, the highest wins."""

    OK = 0
    NEEDS_ATTENTION = 1  # incorrect/rejected candidate, target not reached
    USAGE = 2  # bad flag, unknown problem, malformed problem or candidate file, bad config
    BUILD = 3  # candidate failed to build
    CRASH = 4  # candidate crashed or timed out
    ENVIRONMENT = 5  # no GPU, no ncu, no counter permission, LLM endpoint unreachable
    INTERNAL = 70  # a bug in kernelwright
    INTERRUPTED = 130  # Ctrl-C; the run is saved and resumable


class KernelwrightError(Exception):
    """Base of every error kernelwright raises on purpose.

    `message` is one line meant for a person; `hint` (optional) says what to try next.
    """

    exit_code: ExitCode = ExitCode.INTERNAL
    title: str = "error"

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def one_line(self) -> str:
        text = f"{self.title}: {self.message}"
        if self.hint:
            text += f" ({self.hint})"
        return text.replace("\n", " ")


class UsageError(KernelwrightError):
    """A bad flag, an unknown name, a bad config value."""

    exit_code = ExitCode.USAGE
    title = "usage error"


class ProblemError(UsageError):
    """A problem or candidate file that cannot be used (syntax error, missing Model, ...)."""

    title = "bad problem file"


class ConfigError(UsageError):
    title = "bad configuration"


class CandidateCrashed(KernelwrightError):
    exit_code = ExitCode.CRASH
    title = "candidate crashed"


class EnvironmentProblem(KernelwrightError):
    """Something the machine lacks: a GPU, ncu, counter permission, a reachable LLM endpoint."""

    exit_code = ExitCode.ENVIRONMENT
    title = "environment"


class InternalError(KernelwrightError):
    exit_code = ExitCode.INTERNAL
    title = "internal error"


def worst(codes: list[int] | list[ExitCode]) -> ExitCode:
    """The exit code for several outcomes: the highest wins (DESIGN.md)."""
    return ExitCode(max((int(c) for c in codes), default=0))
