"""A ``# noqa: E402`` that a fix made unneeded goes.

pycodestyle's E402 flags a module-level import below code; projects silence it on imports that
follow an ``os.environ["TORCH_DIST_USE_NCCL2"] = "0"`` (set before torch is imported).  When a
fix removes that code and the import is no longer below any, the comment would silence nothing:
E402 goes from it (the whole comment, with any words after the code, when it named only E402).  Only where the change made it
unneeded: an import that was below code before the fix and is not after.  "Code" as pycodestyle
reads it: a module-level statement other than an import, the docstring, a dunder assignment
(``__all__``) and the ``if``/``try``/``with`` blocks it allows.  ``ast`` over both texts, only
when the fixed text holds ``E402``.
"""

from __future__ import annotations

import ast
import re
from collections import Counter

__all__ = ["drop_stale_e402"]

_NOQA = re.compile(r"[ \t]*#[ \t]*noqa[ \t]*:[ \t]*(?P<codes>[A-Z]+[0-9]+(?:[ \t]*,[ \t]*[A-Z]+[0-9]+)*)",
                   re.IGNORECASE)


def _is_code(stmt: ast.stmt, k: int) -> bool:
    if isinstance(stmt, (ast.Import, ast.ImportFrom, ast.If, ast.Try, ast.With)):
        return False
    if k == 0 and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(
            stmt.value.value, str):
        return False  # the docstring
    if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        if all(isinstance(t, ast.Name) and t.id.startswith("__") and t.id.endswith("__") for t in targets):
            return False
    return True


def _below_code(text: str) -> list[int] | None:
    """The first lines (1-based) of the module-level imports that follow code; None: no parse."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    out: list[int] = []
    seen_code = False
    for k, stmt in enumerate(tree.body):
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            if seen_code:
                out.append(stmt.lineno)
        elif _is_code(stmt, k):
            seen_code = True
    return out


def drop_stale_e402(before: str, after: str) -> str:
    """``after`` without the E402 of a ``# noqa`` on an import that the fix moved off code."""
    if "E402" not in after.upper():
        return after
    old, new = _below_code(before), _below_code(after)
    if old is None or new is None:
        return after
    old_lines = before.splitlines(keepends=True)
    was_below = Counter(old_lines[n - 1] for n in old)  # the import lines that followed code
    lines = after.splitlines(keepends=True)
    still = set(new)
    changed = False
    for n, line in enumerate(lines, 1):
        m = _NOQA.search(line)
        if m is None or n in still or not was_below[line]:
            continue
        codes = [c.strip() for c in m.group("codes").split(",")]
        if "E402" not in (c.upper() for c in codes):
            continue
        was_below[line] -= 1
        rest = [c for c in codes if c.upper() != "E402"]
        head, tail = line[: m.start()], line[m.end():]
        if rest:
            lines[n - 1] = f"{head}{m.group(0)[: m.start('codes') - m.start()]}{', '.join(rest)}{tail}"
        else:  # the whole comment (its words explain the noqa), not the newline
            lines[n - 1] = head.rstrip(" \t") + tail[len(tail.rstrip("\r\n")):]
        changed = True
    return "".join(lines) if changed else after
