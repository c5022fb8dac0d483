"""The new NCCL backend on every torch that has it, a legacy shim and compat helpers.

Importing this package does not import torch; each function imports it on first use.
See docs/backend.md.
"""

from __future__ import annotations

from ._compat import (
    NCCL_BACKEND_NAMES,
    build_nccl_version,
    coalescing,
    is_nccl,
    runtime_nccl_version,
    set_timeout,
)
from ._legacy import install_legacy_shim
from ._select import BackendSelectionError, use_nccl2

__all__ = [
    "NCCL_BACKEND_NAMES",
    "BackendSelectionError",
    "build_nccl_version",
    "coalescing",
    "install_legacy_shim",
    "is_nccl",
    "runtime_nccl_version",
    "set_timeout",
    "use_nccl2",
]
