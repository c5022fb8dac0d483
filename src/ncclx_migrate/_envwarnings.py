"""Import-time environment warnings (LegacyNCCLWarning). Owned by the backend work."""

from __future__ import annotations

__all__ = ["warn_environment"]


def warn_environment() -> None:
    """Warn once per finding about the process environment."""
