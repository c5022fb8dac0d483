"""Refuse source nested deeper than CPython itself accepts, before libcst sees it.

libcst's native parser has no depth guard: 1,500 nested parentheses, or 100,000 chained
unary operators, attribute accesses or lambdas, overflow its stack and kill the process
(SIGSEGV) where no ``except`` can catch it.  CPython's own parser stops such input with a
SyntaxError (200 nested brackets), a RecursionError or a MemoryError, and every shape it
accepts was measured to parse in libcst (docs/migrate.md).  So a file CPython refuses for
its depth is not valid Python anyway: report it and never hand it to libcst.
"""

from __future__ import annotations

import ast

__all__ = ["checked_ast", "too_deep"]

# CPython's own messages for nesting limits (tokenizer MAXLEVEL / MAXINDENT).
_DEPTH_ERRORS = ("too many nested parentheses", "too many levels of indentation")


def too_deep(source: str) -> str | None:
    """A one-line reason when ``source`` is nested past CPython's limits, else None.

    Any other SyntaxError is left to libcst, which knows newer syntax than this Python."""
    return checked_ast(source)[0]


def checked_ast(source: str) -> tuple[str | None, ast.Module | None]:
    """(:func:`too_deep`'s reason, and Python's own tree of ``source`` where it parses)."""
    try:
        tree = compile(source, "<ncclx>", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except (RecursionError, MemoryError):
        return "cannot parse: too deeply nested for Python's own parser; left unchanged", None
    except SyntaxError as exc:
        if any(m in (exc.msg or "") for m in _DEPTH_ERRORS):
            return f"cannot parse: too deeply nested ({exc.msg}, line {exc.lineno}); left unchanged", None
        return None, None
    except ValueError:  # NUL bytes: libcst reports those itself
        return None, None
    return None, tree if isinstance(tree, ast.Module) else None
