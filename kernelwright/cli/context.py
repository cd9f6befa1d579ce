"""State shared by the CLI's commands: global flags and the settings they imply."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kernelwright.config import Settings


@dataclass
class AppState:
    debug: bool = False
    config_file: Path | None = None
    overrides: dict[str, Any] = field(default_factory=dict)

    def settings(self, **more: Any) -> Settings:
        """Settings with this invocation's flags on top (flags set to None are ignored). The
        settings machinery (pydantic-settings) is imported here, not at start-up: `--help` never
        reads a setting."""
        from kernelwright.config import load_settings

        return load_settings(self.config_file, **{**self.overrides, **more})
