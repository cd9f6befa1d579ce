# kernelwright: `make demo` sets up and runs the main job; `make test` runs the tests.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: setup dev demo harness-demo test lint check clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

setup: $(BIN)/python  ## runtime install (torch: see scripts/install-torch, TORCH_SPEC overrides)
	scripts/install-torch $(BIN)/python
	$(BIN)/python -m pip install -q -e .

dev: setup  ## runtime + dev tools (pytest, ruff, mypy, import-linter)
	$(BIN)/python -m pip install -q -e '.[dev]'

demo: setup  ## the main job on a built-in default: the agent on `relu`, driven by a scripted LLM
	$(BIN)/kernelwright demo --device cpu

harness-demo: setup  ## the harness alone: the bundled oracle solutions of `relu`, with their expected verdicts
	$(BIN)/kernelwright eval relu --bundled --device cpu --size small --baselines eager

test: dev  ## CPU test suite (GPU tests skip without a GPU; `pytest -m gpu` on a GPU host)
	$(BIN)/python -m pytest -q -n auto --dist loadgroup --durations=15 -m "not alone"
	$(BIN)/python -m pytest -q -m alone

lint: dev
	$(BIN)/ruff check kernelwright tests
	$(BIN)/ruff format --check kernelwright tests
	$(BIN)/mypy kernelwright
	$(BIN)/lint-imports

check: test lint

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
