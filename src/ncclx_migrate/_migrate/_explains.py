"""When the comment right above a removed line goes with it, in every file kind.

A comment directly above a removed line is taken to explain that line alone when the line ends
its paragraph (a blank line, the end of the block or of the file follows), when the comment
names something the line sets (``TORCH_DIST_USE_NCCL2``, ``nccl-legacy``), when the line is the
rollback and the comment speaks of rolling back or pinning legacy NCCL while the line that follows
does not (it may speak of NCCL: ``# Roll back to legacy NCCL until nccl2 is validated`` above
``TORCH_DIST_USE_NCCL2=0`` and ``TORCH_NCCL_TRACE_BUFFER_SIZE``), or when it speaks of NCCL and
the line that follows does not.  Otherwise it heads the
lines that stay (``# Training settings`` above several exports) and stays with them.
"""

from __future__ import annotations

import re

__all__ = ["explains_only", "rollback_comment"]

# What a comment about the NCCL switch speaks of.
_TOPIC = (r"nccl", r"legacy", r"roll\s*back")
# Names a removed setting is written with: identifiers with an underscore, and backend names.
# What a comment about the rollback speaks of, and what a rollback line sets.
_ROLLBACK = (r"legacy", r"roll(?:ing|s|ed)?\s*back", r"\bpin(?:s|ned|ning)?\b", r"revert", r"fall(?:ing|s)?\s*back")
_ROLLBACK_LINE = re.compile(r"TORCH_DIST_USE_NCCL2|nccl-legacy", re.IGNORECASE)
_NAME = re.compile(r"\b[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+\b|\bnccl(?:-legacy|2|-lazy)\b")


def explains_only(comment: str, removed: str, following: str) -> bool:
    """True when ``comment`` (right above ``removed``, with ``following`` the next line, which
    stays) is about ``removed`` alone."""
    if any(re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", comment) for n in set(_NAME.findall(removed))):
        return True
    if _ROLLBACK_LINE.search(removed) and rollback_comment(comment, following):
        return True  # about the rollback, which goes; the next line's NCCL setting is not a rollback
    # every line a rule removes is an NCCL setting: a comment on that topic is about it
    topic = [w for w in _TOPIC if re.search(w, comment, re.IGNORECASE)]
    return bool(topic) and not any(re.search(w, following, re.IGNORECASE) for w in topic)


def _speaks_of(text: str, words: tuple[str, ...]) -> bool:
    return any(re.search(w, text, re.IGNORECASE) for w in words)


def rollback_comment(comment: str, following: str) -> bool:
    """``comment`` speaks of rolling back or pinning legacy NCCL, and ``following`` does not."""
    return _speaks_of(comment, _ROLLBACK) and not _speaks_of(following, _ROLLBACK)
