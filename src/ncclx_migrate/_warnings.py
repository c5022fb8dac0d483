"""``LegacyNCCLWarning`` and how it is emitted (attributed to user code)."""

from __future__ import annotations

import os
import sys
import warnings

__all__ = ["LegacyNCCLWarning", "warn_legacy"]

_PKG_DIR = os.path.dirname(os.path.abspath(__file__))


class LegacyNCCLWarning(FutureWarning):
    """Use of the legacy NCCL backend or of a name nccl2 ignores.

    Every message starts with ``[NCX...]``, the rule code ``ncclx migrate`` reports
    for the same pattern.
    """


def warn_legacy(code: str, message: str) -> None:
    """Warn with ``LegacyNCCLWarning``, blaming the first frame outside this package."""
    text = f"[{code}] {message} (see `ncclx explain {code}`)"
    if sys.version_info >= (3, 12):
        warnings.warn(text, LegacyNCCLWarning, skip_file_prefixes=(_PKG_DIR,))
        return
    # 3.10/3.11: walk out of this package and importlib's frames by hand.
    frame = sys._getframe(1)
    level = 1
    while frame is not None and (
        frame.f_code.co_filename.startswith(_PKG_DIR)
        or frame.f_code.co_filename.startswith("<frozen importlib")
    ):
        frame = frame.f_back  # type: ignore[assignment]
        level += 1
    warnings.warn(text, LegacyNCCLWarning, stacklevel=level)
