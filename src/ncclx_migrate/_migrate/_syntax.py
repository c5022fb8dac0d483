"""The one-line reason a Python file does not parse, at one position."""

from __future__ import annotations

import ast
import re

import libcst as cst

__all__ = ["parse_error"]

# libcst's native parser prefixes its own, often different, position to the message.
_LIBCST_PREFIX = re.compile(r"^(?:parser error: )?(?:error at \d+:\d+: )?")


def parse_error(source: str, exc: cst.ParserSyntaxError) -> str:
    """CPython's message and position where CPython refuses the file too (its messages name
    the construct: "expected an indented block after 'if' statement on line 3"); libcst's
    otherwise (syntax newer than this Python)."""
    try:
        compile(source, "<ncclx>", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as err:
        if err.lineno:
            column = f", column {err.offset}" if err.offset else ""
            return f"cannot parse: {err.msg} (line {err.lineno}{column})"
    except (ValueError, RecursionError, MemoryError):
        pass
    message = _LIBCST_PREFIX.sub("", exc.message)
    return f"cannot parse: {message} (line {exc.raw_line}, column {exc.raw_column + 1})"
