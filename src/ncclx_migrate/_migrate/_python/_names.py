"""Recognising torch names and backend strings without importing torch."""

from __future__ import annotations

import re

__all__ = [
    "BACKEND_ARG_POS",
    "NCCL_NAMES",
    "backend_parts",
    "dist_member",
    "is_backend_spec",
]

# Where each torch.distributed function takes its backend (positional index).
BACKEND_ARG_POS: dict[str, int] = {
    "init_process_group": 0,
    "new_group": 2,
    "new_subgroups": 3,
    "new_subgroups_by_enumeration": 2,
    "is_backend_available": 0,
    "Backend": 0,
}

# Every name that builds some NCCL implementation on 2.14/2.15.
NCCL_NAMES: tuple[str, ...] = ("nccl", "nccl2", "nccl-legacy", "nccl-lazy")

# Module paths under which torch exposes torch.distributed members (longest first).
_DIST_PREFIXES = (
    "torch.distributed.distributed_c10d.",
    "torch._C._distributed_c10d.",
    "torch.distributed.c10d.",
    "torch.distributed.",
)

_SPEC_PART = re.compile(r"^[a-z]+:[a-z0-9_-]+$")
_NAME = re.compile(r"^[a-z0-9_-]+$")


def dist_member(qualified: set[str]) -> str | None:
    """``"init_process_group"`` for ``torch.distributed.init_process_group`` etc., else None.

    The rest may be dotted (``"Backend.NCCL"``, ``"ProcessGroupNCCL.Options"``).
    """
    for q in qualified:
        for prefix in _DIST_PREFIXES:
            if q.startswith(prefix):
                return q[len(prefix):]
    return None


def backend_parts(spec: str) -> list[tuple[str | None, str]] | None:
    """``"cpu:gloo,cuda:nccl"`` -> [("cpu","gloo"),("cuda","nccl")]; ``"nccl"`` -> [(None,"nccl")].

    None when ``spec`` does not look like a torch.distributed backend string.
    """
    spec = spec.strip()
    if not spec:
        return None
    if "," in spec or ":" in spec:
        parts = spec.split(",")
        if not all(_SPEC_PART.match(p.strip()) for p in parts):
            return None
        out: list[tuple[str | None, str]] = []
        for p in parts:
            dev, name = p.strip().split(":", 1)
            out.append((dev, name))
        return out
    if not _NAME.match(spec):
        return None
    return [(None, spec)]


def is_backend_spec(spec: str, name: str) -> bool:
    """True when ``spec`` is ``name`` or a device spec that maps some device to ``name``."""
    parts = backend_parts(spec)
    return parts is not None and any(n == name for _, n in parts)


def replace_backend(spec: str, old: str, new: str) -> str:
    """``spec`` with every backend named ``old`` renamed ``new`` (structure kept)."""
    parts = backend_parts(spec)
    if parts is None:
        return spec
    if len(parts) == 1 and parts[0][0] is None:
        return new if parts[0][1] == old else spec
    return ",".join(f"{d}:{new if n == old else n}" for d, n in parts)
