"""What ``import ncclx_migrate`` does beyond defining names: cheap, torch-free checks."""

from __future__ import annotations

__all__ = ["run_import_time_checks"]


def run_import_time_checks() -> None:
    """Environment warnings (issue 4) and the NCCLX_HANG_DUMP watchdog (issue 5)."""
