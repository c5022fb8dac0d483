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
from ._flight import dump_flight_recorder
from ._legacy import install_legacy_shim
from ._reconfigure import ReconfigureError, reconfigure, reconfigure_handle
from ._select import BackendSelectionError, use_nccl2

__all__ = [
    "NCCL_BACKEND_NAMES",
    "BackendSelectionError",
    "ReconfigureError",
    "build_nccl_version",
    "coalescing",
    "dump_flight_recorder",
    "install_legacy_shim",
    "is_nccl",
    "reconfigure",
    "reconfigure_handle",
    "runtime_nccl_version",
    "set_timeout",
    "use_nccl2",
]
