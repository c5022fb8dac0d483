"""ncclx-migrate: carry training code across the PyTorch 2.15 switch to nccl2.

Importing this package never imports torch.  In training code, the import also
inspects the environment once and warns (``LegacyNCCLWarning``) about legacy
toggles and ``TORCH_NCCL_*`` names nccl2 ignores.
"""

from __future__ import annotations

from ._fr import enable_hang_dump
from ._warnings import LegacyNCCLWarning

__version__ = "0.1.0"

__all__ = ["LegacyNCCLWarning", "__version__", "enable_hang_dump"]

from ._import_time import run_import_time_checks as _run_import_time_checks

_run_import_time_checks()
