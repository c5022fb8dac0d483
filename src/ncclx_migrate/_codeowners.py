"""A repository's CODEOWNERS, read and matched as GitHub does.

``ncclx migrate --format json`` carries the rules in its ``project`` object (the file stays in
the repository); ``ncclx report`` matches each finding's path against them.  GitHub's rules
(docs.github.com, "About code owners"): the first of ``.github/CODEOWNERS``, ``CODEOWNERS`` and
``docs/CODEOWNERS`` is used; the last matching line wins, and a line without owners leaves its
paths unowned; patterns follow .gitignore's, except that ``!`` negation, ``[ ]`` ranges and
``\\#`` escapes do not exist (the characters are literal), and ``docs/*`` matches only the files
directly in docs/.  Paths are case-sensitive.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

__all__ = ["LOCATIONS", "Owners", "find", "parse"]

LOCATIONS = (".github/CODEOWNERS", "CODEOWNERS", "docs/CODEOWNERS")
MAX_BYTES = 3 << 20  # GitHub ignores a larger file


def find(root: Path) -> tuple[str, str] | None:
    """(the file's path in the repository, its text) for the CODEOWNERS GitHub would use."""
    for rel in LOCATIONS:
        path = root / rel
        try:
            if not path.is_file() or path.stat().st_size > MAX_BYTES:
                continue
            return rel, path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
    return None


def parse(text: str) -> list[tuple[str, list[str]]]:
    """(pattern, owners) per rule line, in file order; comments and blank lines dropped."""
    rules: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        owners: list[str] = []
        for word in words[1:]:
            if word.startswith("#"):  # an inline comment ends the line
                break
            owners.append(word)
        rules.append((words[0], owners))
    return rules


@functools.lru_cache(maxsize=4096)  # a fleet's CODEOWNERS files share most patterns
def _regex(pattern: str) -> re.Pattern[str]:
    """``pattern`` as a regex over a repository-relative POSIX path (no leading slash)."""
    dir_only = pattern.endswith("/")
    body = pattern.strip("/")
    anchored = pattern.startswith("/") or "/" in body
    children_only = body.endswith("/*")
    out: list[str] = [] if anchored else ["(?:.*/)?"]
    parts = body.split("/")
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if part == "**":
            out.append(".*" if last else "(?:.*/)?")
            continue
        for ch in part:
            out.append("[^/]*" if ch == "*" else "[^/]" if ch == "?" else re.escape(ch))
        if not last:
            out.append("/")
    if children_only:
        tail = "$"  # docs/*: the files in docs/, not those in its subfolders
    elif dir_only:
        tail = "/.*$"  # apps/: what is inside a folder of that name
    else:
        tail = "(?:/.*)?$"  # the path itself, or anything inside it when it is a folder
    return re.compile("".join(out) + tail)


class Owners:
    """Owners of repository paths under one CODEOWNERS; answers are cached per path."""

    def __init__(self, rules: list[tuple[str, list[str]]]) -> None:
        self._rules: list[tuple[re.Pattern[str], tuple[str, ...]]] = []
        for pattern, owners in rules:
            if pattern == "/":
                pattern = "*"
            self._rules.append((_regex(pattern), tuple(owners)))
        self._rules.reverse()  # the last matching rule wins: try it first
        self._cache: dict[str, tuple[str, ...]] = {}

    def __call__(self, path: str) -> tuple[str, ...]:
        """The owners of ``path`` (relative, POSIX); () when no rule or an owner-less rule matches."""
        got = self._cache.get(path)
        if got is None:
            got = next((owners for rx, owners in self._rules if rx.match(path)), ())
            self._cache[path] = got
        return got
