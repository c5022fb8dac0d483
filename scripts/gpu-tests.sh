#!/usr/bin/env bash
# The tests that need a real CUDA GPU (marked `gpu`; skipped everywhere else).
#   scripts/gpu-tests.sh [pytest args]                 # in the project's .venv (torch 2.15)
#   PYTHON=python3 scripts/gpu-tests.sh [pytest args]  # against that interpreter's own torch,
#       e.g. a GPU image with no network: ncclx-migrate runs from src/ (libcst must be importable).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-}
if [ -z "$PY" ]; then
  scripts/bootstrap.sh main >&2
  PY=.venv/bin/python
elif ! "$PY" -c 'import ncclx_migrate' 2>/dev/null; then
  export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
  bindir=$(mktemp -d)
  printf '#!/bin/sh\nexec "%s" -m ncclx_migrate "$@"\n' "$(command -v "$PY")" > "$bindir/ncclx"
  chmod +x "$bindir/ncclx"
  export PATH="$bindir:$PATH"
fi
"$PY" -c 'import torch; assert torch.cuda.is_available(), "no CUDA device visible"; print("torch", torch.__version__, "devices", torch.cuda.device_count(), "nccl", torch.cuda.nccl.version())'
status=0
"$PY" -m pytest -q -m gpu -p no:cacheprovider "$@" || status=$?
# For docs/gpu-runs.md: `ncclx compare` with "nccl" against gloo on real CUDA tensors (the harness on a
# GPU; tests/compare/test_gpu.py asserts it). On torch 2.15, also run plain `ncclx compare`: nccl2
# against the rollback (docs/compare.md).
"$PY" -m ncclx_migrate compare --device cuda --arm gloo --arm nccl --sizes 1K,1M,64M \
  --collectives all_reduce_sum,all_reduce_max,broadcast,all_gather --timeout 600 || true
# The interleaved design on CUDA (issue 33): "nccl" against "nccl" must name nothing; the text
# states per collective the smallest slowdown this GPU node could have shown.
"$PY" -m ncclx_migrate compare --device cuda --arm nccl --arm nccl --sizes 1K,1M,64M,1G \
  --collectives all_reduce_sum,all_gather,broadcast --timeout 600 || true
exit $status
