"""Deprecated variable names that more than one file of a run sets.

The safe add (the new name takes the old one's value unless it is set) keeps what torch
reads only if nothing sets the old name after it.  A later set in the same file is seen by
the scanners; one in another file is not: a launcher that sources or imports this file and
sets the old name again, or a child program that sets it after inheriting the new name this
file now exports.  So a name that two files of the tree set gets the unsafe form in both.
"Sets" is textual and generous (`OLD=`, `OLD:`, `"OLD"] =`, `setdefault("OLD"`, `name: OLD`,
`ENV OLD v`, `-x OLD`, `unset OLD`, `del env["OLD"]`, ...); a file that only reads the name does not count.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable

from .._torch.envvars import ENV_VARS, Fix
from ._crossfile import SharedNames
from ._model import Options

__all__ = ["sets_in", "shared_names", "shared_note", "shared_of"]

_ADDED = sorted({v.name for v in ENV_VARS if v.replacement and Fix.ADD in (v.fix, v.unsafe_fix)},
                key=len, reverse=True)
_WORD = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")
# What makes an occurrence of a name a set: the text right before it, or right after it.
_BEFORE = re.compile(rb"(?:setdefault|putenv|setenv|unsetenv|pop|name:|\bENV|-x|--export=\S*?|\bunset"
                     rb"|\bdel\s+[\w.]+\[)\s*\(?\s*[\"']?$")
_AFTER = re.compile(rb"[\"']?\s*(?:\]\s*)?(?:=(?!=)|:(?!:))")


def _sets(data: bytes, name: bytes) -> bool:
    """Does ``data`` set ``name`` somewhere (bytes.find first: the regexes only run at hits)?"""
    at = data.find(name)
    while at >= 0:
        end = at + len(name)
        whole = (at == 0 or data[at - 1] not in _WORD) and (end == len(data) or data[end] not in _WORD)
        if whole and (at == 0 or data[at - 1] not in b"${") and (
                _AFTER.match(data, end) or _BEFORE.search(data[max(0, at - 40):at])):
            return True
        at = data.find(name, end)
    return False


def sets_in(data: bytes) -> list[str]:
    """The names of ``_ADDED`` that one file's ``data`` sets (kept by the cache per file)."""
    if b"NCCL" not in data:
        return []
    return [n for n in _ADDED if _sets(data, n.encode())]


def shared_names(paths: Iterable[str], read: Callable[[str], bytes | None]) -> SharedNames:
    """The names of ``_ADDED`` that at least two of ``paths`` set; ``read`` gives a file's
    bytes, or None for one the scan will not read (it reports those itself)."""
    return shared_of(sets_in(data) for data in map(read, paths) if data is not None)


def shared_of(per_file: Iterable[list[str]]) -> SharedNames:
    """The names that at least two files set, from each file's :func:`sets_in`."""
    seen: Counter[str] = Counter()
    for names in per_file:
        seen.update(names)
    return SharedNames(n for n, k in seen.items() if k > 1)


def shared_note(name: str, options: Options) -> str:
    """The sentence a finding's detail gets when ``name`` is one of the run's shared names."""
    if name not in options.shared_names:
        return ""
    return (f" Another file of this project also sets {name}: if it runs after this one (a launcher that "
            "sources or imports this file, a child that inherits the new name), the new name given a value "
            "here would hide that set, so no add is safe.")
