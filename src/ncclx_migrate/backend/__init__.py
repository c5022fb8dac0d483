"""The new NCCL backend on every torch that has it, a legacy shim and compat helpers."""

from __future__ import annotations

__all__: list[str] = []
