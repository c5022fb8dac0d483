"""What ``ncclx compare`` runs: the arms, the collectives, sizes, dtypes, and nccl-tests' factors.

Torch-free: the worker reads the plan as JSON, the parent builds it before any rank starts.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

__all__ = [
    "COLLECTIVES",
    "CPU_MAX_BYTES",
    "DTYPES",
    "GPU_MAX_BYTES",
    "ITERS",
    "MIN_BYTES",
    "ROUNDS",
    "WARMUP",
    "Arm",
    "ArmError",
    "busbw_factor",
    "default_sizes",
    "human_size",
    "needs_gpu",
    "parse_arm",
    "parse_sizes",
    "unknown_backend",
]

# Collective ids, in report order.  "all_reduce_sum" and "all_reduce_max" are one torch call
# with two ops; "sendrecv" is a ring: every rank sends to rank+1 and receives from rank-1.
COLLECTIVES = ("all_reduce_sum", "all_reduce_max", "all_gather", "reduce_scatter", "all_to_all",
               "broadcast", "sendrecv")
DTYPES = ("fp32", "bf16", "int32")
DTYPE_BYTES = {"fp32": 4, "bf16": 2, "int32": 4}

# nccl-tests' defaults: -w 5 warm-up iterations, -n 20 timed ones (NVIDIA/nccl-tests' src/common.cu).
WARMUP = 5
ITERS = 20
# The timed calls are spread over paired rounds (docs/compare.md): 20 rounds of 1 call per arm.
# More rounds of fewer calls: the sign test's interval then rests on the 4th-smallest of 20
# ratios instead of the smallest of 10, which one lucky block cannot move.
ROUNDS = 20

MIN_BYTES = 8
GPU_MAX_BYTES = 1 << 30  # 1 GiB, further bounded by free GPU memory (the worker's _max_bytes)
# gloo on CPU copies through sockets: 1 GiB would take minutes per collective, so the default
# sweep stops at 1 MiB there (docs/compare.md; --sizes goes further on purpose).
CPU_MAX_BYTES = 1 << 20


def busbw_factor(collective: str, world: int) -> float:
    """nccl-tests' bus-bandwidth factor (NVIDIA/nccl-tests' doc/PERFORMANCE.md): busbw = algbw x factor."""
    n = world
    if collective.startswith("all_reduce"):
        return 2 * (n - 1) / n
    if collective in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    return 1.0  # broadcast, sendrecv


_UNITS = {"": 1, "B": 1, "K": 1 << 10, "KB": 1 << 10, "KIB": 1 << 10, "M": 1 << 20, "MB": 1 << 20,
          "MIB": 1 << 20, "G": 1 << 30, "GB": 1 << 30, "GIB": 1 << 30}


def parse_sizes(text: str) -> list[int]:
    """"1K,64K,1M" -> bytes, sorted, without repeats (ValueError saying what is wrong)."""
    out: set[int] = set()
    for part in text.split(","):
        m = re.fullmatch(r"\s*(\d+)\s*([A-Za-z]*)\s*", part)
        unit = m.group(2).upper() if m else ""
        if not m or unit not in _UNITS:
            raise ValueError(f"{part.strip()!r} is not a size like 8, 1K, 64K, 1M or 1G")
        size = int(m.group(1)) * _UNITS[unit]
        if not MIN_BYTES <= size <= 16 * GPU_MAX_BYTES:
            raise ValueError(f"{part.strip()!r} is outside 8 B .. 16 GiB")
        out.add(size)
    return sorted(out)


def default_sizes(max_bytes: int) -> list[int]:
    """nccl-tests' sweep with -f 2: 8 B, 16 B, ... up to ``max_bytes``."""
    sizes, size = [], MIN_BYTES
    while size <= max_bytes:
        sizes.append(size)
        size *= 2
    return sizes


def human_size(n: int) -> str:
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale}{unit}"
    return f"{n}B" if n < 1024 else f"{n / 1024:.1f}K"


class ArmError(ValueError):
    """An --arm that cannot be read."""


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class Arm:
    """One side of the comparison: a backend name and the environment its ranks start with.

    ``env`` values of None remove the variable from the inherited environment.
    """

    label: str  # "A" (the baseline) or "B"
    spec: str  # as the user wrote it, or how the default was built
    backend: str
    env: dict[str, str | None] = field(default_factory=dict)
    expected: str | None = None  # what torch's facts say the backend builds here (None: unknown)

    def environ(self, base: dict[str, str]) -> dict[str, str]:
        out = dict(base)
        for name, value in self.env.items():
            if value is None:
                out.pop(name, None)
            else:
                out[name] = value
        return out

    def describe(self) -> str:
        settings = ", ".join(f"{k}={v}" if v is not None else f"{k} unset" for k, v in self.env.items())
        return f'"{self.backend}"' + (f" with {settings}" if settings else "")


def parse_arm(text: str, label: str, default_backend: str) -> Arm:
    """``--arm``: ``BACKEND``, ``NAME=VALUE,...`` or ``BACKEND,NAME=VALUE,...`` (a value holds
    no comma).  Only environment settings: the backend is ``default_backend``."""
    backend: str | None = None
    env: dict[str, str | None] = {}
    parts = [p.strip() for p in text.split(",")]
    if not text.strip() or any(not p for p in parts):
        raise ArmError(f"--arm {text!r}: empty item; write BACKEND, NAME=VALUE,... or BACKEND,NAME=VALUE,...")
    for n, part in enumerate(parts):
        name, eq, value = part.partition("=")
        if eq:
            if not _NAME.fullmatch(name.strip()):
                raise ArmError(f"--arm {text!r}: {name.strip()!r} is not an environment variable name")
            env[name.strip()] = value
        elif n == 0:
            if not re.fullmatch(r"[A-Za-z0-9_:,.-]+", part):
                raise ArmError(f"--arm {text!r}: {part!r} is not a backend name")
            backend = part
        else:
            raise ArmError(f"--arm {text!r}: {part!r} is neither the backend (it comes first) nor NAME=VALUE")
    return Arm(label, text, backend or default_backend, env)


# NCCL's names (every release's, _torch.releases.BACKEND_NAMES): CUDA tensors only.
_GPU_BACKENDS = ("nccl", "nccl2", "nccl-legacy", "nccl-lazy")


def needs_gpu(backend: str) -> bool:
    return backend.lower() in _GPU_BACKENDS


def unknown_backend(arm: Arm) -> str | None:
    """Why ``arm``'s backend cannot be built by its ranks (None: it can), decided before any
    rank starts, against the names ``ncclx doctor --backend`` accepts (``startable_backends``),
    with the entry points of the arm's own PYTHONPATH (a test or plugin backend) counted."""
    from .._torch.probe import startable_backends

    extra = tuple(p for p in (arm.env.get("PYTHONPATH") or "").split(os.pathsep) if p)
    known = startable_backends(extra)
    if arm.backend.lower() in known:
        return None
    return (f"--arm {arm.spec!r}: {arm.backend!r} is not a backend this torch knows; known: {', '.join(known)} "
            "(a plugin's backend counts when its entry point is on the arm's PYTHONPATH=...)")
