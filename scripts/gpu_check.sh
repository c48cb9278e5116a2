#!/usr/bin/env bash
# The device check (scripts/gpu_check.py, docs/gpu_check.md), on a CUDA machine without network:
#   bash scripts/gpu_check.sh --out "$OUT"          # the lent GPU machine (its own python3)
#   bash scripts/gpu_check.sh --dry --out DIR       # CPU/gloo, same path (CI: tests/scripts)
#   bash scripts/gpu_check.sh --help               # this help and the check's options; installs nothing
# Installs the carried wheels (.gpu-carry/wheels, made here by `make gpu-carry`; never torch or
# numpy) with `pip install --no-index` into a folder of its own (SITE, first on PYTHONPATH), puts
# this checkout on PYTHONPATH (the project is not installed), then runs the check with the same
# Python. Environment: PYTHON (default python3), GPU_CARRY (default .gpu-carry), GPU_CHECK_SITE
# (default: a new temporary folder). Exit status: the check's (1 on any mismatch).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
for arg in "$@"; do
  if [ "$arg" = "-h" ] || [ "$arg" = "--help" ]; then
    sed -n '2,10p' "$0" | cut -c3-
    echo
    exec "$PYTHON" scripts/gpu_check.py --help
  fi
done
CARRY="${GPU_CARRY:-.gpu-carry}"
if [ ! -f "$CARRY/.complete" ]; then
  echo "error: $CARRY is missing or incomplete: run \`make gpu-carry\` on a machine with the package registry, then carry it (docs/gpu_check.md)." >&2
  exit 2
fi
SITE="${GPU_CHECK_SITE:-$(mktemp -d)/site}"
"$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --disable-pip-version-check \
  --target "$SITE" --find-links "$CARRY/wheels" -r scripts/gpu_wheels.txt
export PYTHONPATH="$SITE:$PWD${PYTHONPATH:+:$PYTHONPATH}"
exec "$PYTHON" scripts/gpu_check.py --carry "$CARRY" "$@"
