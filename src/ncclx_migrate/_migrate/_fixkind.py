"""Fix kinds, apart from the findings model: the rule table (read by `ncclx rules` and
`ncclx explain`, which must start fast) needs them without the codemod's imports."""

from __future__ import annotations

import enum

__all__ = ["FixKind"]


class FixKind(enum.Enum):
    SAFE = "safe"  # behaviour unchanged on every torch from --target-torch on
    UNSAFE = "unsafe"  # changes behaviour; applied only with --unsafe-fixes
    NONE = "none"  # flag only
