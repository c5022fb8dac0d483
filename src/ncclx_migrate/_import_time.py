"""What ``import ncclx_migrate`` does beyond defining names: cheap, torch-free checks.

Budget: under 20 ms and no torch import (benchmarks/bench_import.py).
"""

from __future__ import annotations

__all__ = ["run_import_time_checks"]


def run_import_time_checks() -> None:
    # Issue 4: warn once per finding about legacy toggles and ignored TORCH_NCCL_* names.
    from ._envwarnings import warn_environment

    warn_environment()
    # Issue 5: NCCLX_HANG_DUMP=SECONDS turns the hang watchdog on.
    from ._fr._env import start_from_env

    start_from_env()
