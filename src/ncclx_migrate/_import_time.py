"""What ``import ncclx_migrate`` does beyond defining names: cheap, torch-free checks.

Budget: under 20 ms and no torch import (benchmarks/bench_import.py).
"""

from __future__ import annotations

import os
import sys

__all__ = ["run_import_time_checks"]

_CLI_NAMES = ("ncclx", "ncclx.exe", "ncclx-script.py")


def _running_the_cli() -> bool:
    """True inside the ``ncclx`` command (console script or ``python -m ncclx_migrate``)."""
    if sys.argv and os.path.basename(sys.argv[0]) in _CLI_NAMES:
        return True
    # During `python -m ncclx_migrate`, sys.argv[0] is still "-m" while the package imports.
    orig = list(getattr(sys, "orig_argv", ()))
    return any(a == "-m" and orig[i + 1 : i + 2] == ["ncclx_migrate"] for i, a in enumerate(orig)) or (
        "-mncclx_migrate" in orig
    )


def run_import_time_checks() -> None:
    # The ncclx command reports the environment (doctor) rather than warning about it:
    # its warnings would point at bin/ncclx, NCCLX_WARNINGS=error would crash it, and a
    # doctor or analyzer run must not start a hang watchdog.
    if _running_the_cli():
        return
    # Issue 4: warn once per finding about legacy toggles and ignored TORCH_NCCL_* names.
    from ._envwarnings import warn_environment

    warn_environment()
    # Issue 5: NCCLX_HANG_DUMP=SECONDS turns the hang watchdog on.
    from ._fr._env import start_from_env

    start_from_env()
