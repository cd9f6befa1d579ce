"""Test-session setup: every location kernelwright writes to points into a temporary folder, and
tests marked `gpu` skip cleanly on machines without an NVIDIA GPU."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kernelwright import fastext


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU (run `pytest -m gpu` on a GPU host)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def shared_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One temporary KERNELWRIGHT_HOME for the whole session, so the build cache is shared across
    tests. Never the user's: a KERNELWRIGHT_HOME set in the environment is ignored here."""
    return tmp_path_factory.mktemp("kernelwright-home")


@pytest.fixture(autouse=True)
def _isolated_locations(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, shared_home: Path) -> None:
    monkeypatch.setenv("KERNELWRIGHT_HOME", str(shared_home))
    monkeypatch.setenv("KERNELWRIGHT_RUNS_DIR", str(tmp_path / "runs"))
    # Memory is per test: one test's runs must not become another's starting point.
    monkeypatch.setenv("KERNELWRIGHT_MEMORY_DB", str(tmp_path / "memory.sqlite"))
    monkeypatch.delenv("KERNELWRIGHT_CONFIG", raising=False)
    # No precompiled torch header (a minute and ~800 MB to prepare): the suite builds few C++
    # extensions; tests/harness/test_build_headers.py turns it on where it is the subject.
    monkeypatch.setenv("KERNELWRIGHT_PCH", "0")
    # A test that loads a candidate in its own process routes fastext's builds into its cache;
    # the next test in this process must start from fastext's defaults again.
    monkeypatch.setattr(fastext, "_HOOKS", fastext._Hooks())
    monkeypatch.chdir(tmp_path)
