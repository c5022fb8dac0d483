"""Private torch access for the backend package (torch is imported on first use only)."""

from __future__ import annotations

from types import ModuleType
from typing import Any

__all__ = ["c10d", "dist", "torch_version"]


def dist() -> ModuleType:
    """``torch.distributed``, with a one-line error when torch or its distributed package is missing."""
    try:
        import torch.distributed as d
    except ImportError as exc:
        raise RuntimeError(
            "ncclx_migrate.backend needs torch: install torch>=2.13 (pip install 'ncclx-migrate[torch]')"
        ) from exc
    if not d.is_available():
        raise RuntimeError("this torch build has no torch.distributed support")
    module: ModuleType = d
    return module


def c10d() -> Any:
    """``torch.distributed.distributed_c10d`` (its private names differ between releases)."""
    dist()
    import torch.distributed.distributed_c10d as mod

    return mod


def torch_version() -> tuple[int, int]:
    """(major, minor) of the imported torch."""
    import torch

    major, minor = str(torch.__version__).split(".")[:2]
    digits = "".join(ch for ch in minor if ch.isdigit())
    return int(major), int(digits or 0)
