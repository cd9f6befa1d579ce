"""State shared by the CLI's commands: global flags and the settings they imply."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kernelwright.config import Settings


@dataclass
class AppState:
    debug: bool = False
    config_file: Path | None = None
    home: Path | None = None
    """`--home` (None: not given)."""
    runs_dir: Path | None = None
    """`--runs-dir` (None: not given)."""

    def settings(self) -> Settings:
        """Settings with this invocation's global flags on top. The settings machinery
        (pydantic-settings) is imported here, not at start-up: `--help` never reads a setting."""
        from kernelwright.config import load_settings

        return load_settings(self.config_file, home=self.home, runs_dir=self.runs_dir)
