"""When the comment right above a removed line goes with it, in every file kind.

A comment directly above a removed line is taken to explain that line alone when the line ends
its paragraph (a blank line, the end of the block or of the file follows), when the comment
names something the line sets (``TORCH_DIST_USE_NCCL2``, ``nccl-legacy``), or when it speaks of
NCCL or its rollback and the line that follows (which stays) does not.  Otherwise it heads the
lines that stay (``# Training settings`` above several exports) and stays with them.
"""

from __future__ import annotations

import re

__all__ = ["explains_only"]

# What a comment about the NCCL switch speaks of.
_TOPIC = (r"nccl", r"legacy", r"roll\s*back")
# Names a removed setting is written with: identifiers with an underscore, and backend names.
_NAME = re.compile(r"\b[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+\b|\bnccl(?:-legacy|2|-lazy)\b")


def explains_only(comment: str, removed: str, following: str) -> bool:
    """True when ``comment`` (right above ``removed``, with ``following`` the next line, which
    stays) is about ``removed`` alone."""
    if any(re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", comment) for n in set(_NAME.findall(removed))):
        return True
    # every line a rule removes is an NCCL setting: a comment on that topic is about it
    topic = [w for w in _TOPIC if re.search(w, comment, re.IGNORECASE)]
    return bool(topic) and not any(re.search(w, following, re.IGNORECASE) for w in topic)
