"""The lines a finding's message cites ("the GPU picked on line 8") follow its position.

A rule cites lines of the text it ran on.  Where the finding's position is moved into other
numbering (a later pass's text back to the file as given; a notebook's cells run as one module
back to the cell), the cited lines move the same way, so that "line N" in a message is always a
line in the numbering of the finding's own position.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from ._model import Finding

__all__ = ["recite"]

_CITED = re.compile(r"(?<!, )\bline (\d+)\b")  # not the line of a "cell K, line L" already moved


def recite(finding: Finding, where: Callable[[int], str]) -> None:
    """Rewrite every ``line N`` in ``finding``'s message and detail as ``where(N)`` (which
    returns the replacement text, e.g. ``line 3`` or ``cell 2, line 3``)."""
    def sub(text: str) -> str:
        return _CITED.sub(lambda m: where(int(m.group(1))), text)

    finding.message = sub(finding.message)
    finding.detail = sub(finding.detail)
