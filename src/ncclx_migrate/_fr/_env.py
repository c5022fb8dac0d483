"""NCCLX_HANG_DUMP read at import. Owned by the flight-recorder work."""

from __future__ import annotations

__all__ = ["start_from_env"]


def start_from_env() -> None:
    """Start the hang watchdog when NCCLX_HANG_DUMP is set (must not import torch)."""
