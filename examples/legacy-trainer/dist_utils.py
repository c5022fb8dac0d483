"""Process-group setup for the trainer (written against torch 2.14, legacy NCCL)."""

from __future__ import annotations

import datetime
import os

import torch
import torch.distributed as dist
from torch.distributed import ProcessGroupNCCL

# Keep the flight recorder on: we attach its dumps to every hang ticket.
os.environ.setdefault("TORCH_NCCL_TRACE_BUFFER_SIZE", "2000")
os.environ.setdefault("TORCH_NCCL_DUMP_ON_TIMEOUT", "1")
# Catch NaNs at the collective boundary.
os.environ["TORCH_NCCL_NAN_CHECK"] = "1"

DEFAULT_TIMEOUT = datetime.timedelta(minutes=20)


def init_distributed(backend: str = "nccl") -> int:
    """Bind this process to its GPU and join the default process group. Returns the local rank."""
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if backend == "gloo":  # CPU smoke runs
        dist.init_process_group(backend="gloo", timeout=DEFAULT_TIMEOUT)
        return local_rank
    torch.cuda.set_device(local_rank)
    dist.init_process_group(backend=backend, timeout=DEFAULT_TIMEOUT)
    return local_rank


def is_nccl(group: dist.ProcessGroup | None = None) -> bool:
    """True when ``group`` runs on NCCL (decides barrier(device_ids=...) and teardown)."""
    return dist.get_backend(group) == "nccl"


def nccl_backend(group: dist.ProcessGroup | None = None) -> ProcessGroupNCCL | None:
    """The NCCL backend object of ``group``, for timeouts and debug counters."""
    if not is_nccl(group):
        return None
    pg = group or dist.group.WORLD
    backend = pg._get_backend(torch.device("cuda"))
    if isinstance(backend, ProcessGroupNCCL):
        return backend
    return None


def set_collective_timeout(timeout: datetime.timedelta, group: dist.ProcessGroup | None = None) -> None:
    """Shorten the timeout after warm-up so a hang fails fast."""
    backend = nccl_backend(group)
    if backend is not None:
        backend._set_default_timeout(timeout)


def dump_flight_recorder(path: str) -> None:
    """Write the NCCL flight-recorder trace (collective history) next to the checkpoint."""
    trace = torch._C._distributed_c10d._dump_nccl_trace()
    with open(path, "wb") as f:
        f.write(trace)


def barrier() -> None:
    if is_nccl():
        dist.barrier(device_ids=[torch.cuda.current_device()])
    else:
        dist.barrier()
