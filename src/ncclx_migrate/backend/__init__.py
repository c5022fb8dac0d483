"""The new NCCL backend on every torch that has it, a legacy shim and compat helpers.

Importing this package does not import torch; each function imports it on first use.
See docs/backend.md.
"""

from __future__ import annotations

import os

from ._compat import (
    NCCL_BACKEND_NAMES,
    build_nccl_version,
    coalescing,
    is_nccl,
    is_nccl_backend,
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
    "get_include",
    "install_legacy_shim",
    "is_nccl",
    "is_nccl_backend",
    "reconfigure",
    "reconfigure_handle",
    "runtime_nccl_version",
    "set_timeout",
    "use_nccl2",
]


def get_include() -> str:
    """The folder holding ``ncclx/compat.h``, for a C++ extension's ``include_dirs``.

    The header tells the legacy ProcessGroupNCCL from nccl2 and gives the communicator on
    torch 2.13-2.15 (docs/backend.md). Like ``numpy.get_include()``: no torch import.
    """
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "include")
