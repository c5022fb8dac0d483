"""Suppression comments, shared by every scanner.

``# ncclx: ignore[NCX101, NCX120]`` (or a bare ``# ncclx: ignore``) on a line silences
the findings reported on that line.  Shell, YAML, Dockerfile and ``.env`` files use the
same ``#`` comment text, so the non-Python scanners call :func:`suppressions` too; C++ and
CUDA sources write it after ``//`` or ``/*``.
"""

from __future__ import annotations

import re

__all__ = ["ALL", "HASH", "IGNORE", "SLASHES", "codes_in", "ignore_comments", "is_suppressed", "suppressions",
           "unknown_codes"]

ALL: frozenset[str] = frozenset({"*"})
# The comment's text after its marker (C++ sources read it from `//` and `/* */` comments).
IGNORE = r"ncclx:\s*ignore\b(?:\[([A-Za-z0-9_,\s]*)\])?"
HASH = r"#"  # Python, shell, YAML, Dockerfile, .env
SLASHES = r"(?://|/\*)"  # C++ and CUDA
_PATS = {m: re.compile(m + r"\s*" + IGNORE) for m in (HASH, SLASHES)}


def ignore_comments(marker: str = HASH) -> re.Pattern[str]:
    """The ignore comment that opens with ``marker``; :func:`codes_in` reads a match."""
    return _PATS[marker]


def codes_in(m: re.Match[str]) -> frozenset[str]:
    """The codes an ignore comment names, upper-cased (:data:`ALL` for a bare ignore)."""
    if m.group(1) is None:
        return ALL
    return frozenset(c.strip().upper() for c in m.group(1).split(",") if c.strip())


def suppressions(text: str, marker: str = HASH) -> dict[int, frozenset[str]]:
    """1-based line number -> suppressed codes (:data:`ALL` for a bare ignore), from ignore
    comments that open with ``marker``."""
    out: dict[int, frozenset[str]] = {}
    if "ncclx:" not in text:
        return out
    for lineno, line in enumerate(text.splitlines(), 1):
        if "ncclx:" not in line:
            continue
        for m in _PATS[marker].finditer(line):
            codes = codes_in(m)
            if codes is ALL:
                out[lineno] = ALL
                break
            out[lineno] = out.get(lineno, frozenset()) | codes
    return out


def is_suppressed(code: str, lines: tuple[int, ...], table: dict[int, frozenset[str]]) -> bool:
    """True when any of ``lines`` carries an ignore that covers ``code`` (prefixes allowed)."""
    for line in lines:
        codes = table.get(line)
        if codes is None:
            continue
        if codes is ALL or "*" in codes or any(code.startswith(c) for c in codes):
            return True
    return False


def unknown_codes(text: str, marker: str = HASH) -> list[tuple[int, str]]:
    """(line, code) for each code in an ignore comment that no rule code starts with.

    Such a comment silences nothing (a typo, or a rule that does not exist): say so.
    """
    if "ncclx:" not in text:
        return []
    from ._rule_table import RULES

    known = [r.code for r in RULES]
    out = []
    for lineno, codes in suppressions(text, marker).items():
        for code in sorted(codes - {"*"}):
            if not any(k.startswith(code) for k in known):
                out.append((lineno, code))
    return out
