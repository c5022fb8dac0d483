#!/usr/bin/env bash
# Single-node launch: 8 GPUs, one process each.
set -euo pipefail

export TORCH_DIST_USE_NCCL2=0           # pin legacy ProcessGroupNCCL
export TORCH_NCCL_TRACE_BUFFER_SIZE=2000
export TORCH_NCCL_ENABLE_MONITORING=1
export NCCL_ASYNC_ERROR_HANDLING=1
export TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC=600  # ncclx: ignore[NCX203]  (our watchdog reads it)

NPROC=${NPROC:-8}
BACKEND=nccl-legacy

TORCH_NCCL_DUMP_ON_TIMEOUT=1 torchrun \
    --nproc-per-node "$NPROC" \
    train.py --dist-backend "$BACKEND" --steps "${STEPS:-100}" "$@"
