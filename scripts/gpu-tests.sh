#!/usr/bin/env bash
# The tests that need a real CUDA GPU (marked `gpu`; skipped everywhere else).
# Run on a GPU machine: scripts/gpu-tests.sh [pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-}
if [ -z "$PY" ]; then
  scripts/bootstrap.sh main >&2
  PY=.venv/bin/python
fi
"$PY" -c 'import torch; assert torch.cuda.is_available(), "no CUDA device visible"; print("torch", torch.__version__, "devices", torch.cuda.device_count(), "nccl", torch.cuda.nccl.version())'
exec "$PY" -m pytest -q -m gpu -p no:cacheprovider "$@"
