"""What ``import ncclx_migrate`` does beyond defining names: cheap, torch-free checks.

Budget: under 20 ms and no torch import (benchmarks/bench_import.py).
"""

from __future__ import annotations

import os
import sys

__all__ = ["run_import_time_checks"]

_CLI_NAMES = ("ncclx", "ncclx.exe", "ncclx-script.py")


def _is_own_module(name: str) -> bool:
    return name == "ncclx_migrate" or name.startswith("ncclx_migrate.")


def _running_the_cli() -> bool:
    """True inside the ``ncclx`` command and its helper processes (console script,
    ``python -m ncclx_migrate``, the doctor's ``-m ncclx_migrate._doctor._probe_worker``)."""
    if sys.argv and os.path.basename(sys.argv[0]) in _CLI_NAMES:
        return True
    # During `python -m X`, sys.argv[0] is still "-m" while the package imports.
    orig = list(getattr(sys, "orig_argv", ()))
    for i, arg in enumerate(orig):
        if arg == "-m":
            return i + 1 < len(orig) and _is_own_module(orig[i + 1])
        if arg.startswith("-m") and not arg.startswith("--"):
            return _is_own_module(arg[2:])
    return False


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
