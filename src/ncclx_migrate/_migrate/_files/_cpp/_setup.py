"""The build of a C++ extension that ``--use-shim`` makes include ``<ncclx/compat.h>``.

The header lives in this package (``ncclx_migrate.backend.get_include()``), so the build must
put that folder on its include path.  Where the build is a ``setup.py`` using
``torch.utils.cpp_extension`` (``CppExtension`` / ``CUDAExtension``) whose sources are
string literals, the runner's pre-pass finds which of its sources the shim fix rewrites
(:func:`shimmed_setups`), and the fix adds ``ncclx_migrate.backend.get_include()`` to that
extension's ``include_dirs`` (:func:`add_include_dir`, with libcst, so the file keeps its
layout).  Any other build (CMake, Bazel, a custom script) is told in the finding what to add
(:data:`BUILD_HINT`).
"""

from __future__ import annotations

import ast
import os
from collections.abc import Callable

import libcst as cst

from ..._model import FileResult, Options

__all__ = ["BUILD_HINT", "SETUP_HINT", "add_include_dir", "extension_sources", "setup_result", "shim_builds"]

_EXTENSIONS = frozenset({"CppExtension", "CUDAExtension", "SyclExtension"})
_GET_INCLUDE = "ncclx_migrate.backend.get_include()"
SETUP_HINT = f"the shim's folder, `{_GET_INCLUDE}`, is added to setup.py's include_dirs"
BUILD_HINT = (f"the build needs `{_GET_INCLUDE}` on its include path (setup.py: `include_dirs=[...]`; CMake: "
              "`target_include_directories` with the folder printed by `python -c \"import ncclx_migrate.backend "
              "as b; print(b.get_include())\"`; Bazel: an `includes` entry) and ncclx-migrate installed where "
              "it builds (`[build-system].requires` of pyproject.toml for an isolated build)")


def _name(f: ast.expr) -> str:
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def extension_sources(path: str, text: str) -> list[str]:
    """The sources (normalised paths) of the ``torch.utils.cpp_extension`` extensions that
    ``setup.py`` at ``path`` builds, where every one of them is a string literal."""
    if "cpp_extension" not in text:
        return []
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    base = os.path.dirname(path)
    out: list[str] = []
    for call in ast.walk(tree):
        if not isinstance(call, ast.Call) or _name(call.func) not in _EXTENSIONS:
            continue
        sources = call.args[1] if len(call.args) > 1 else next(
            (k.value for k in call.keywords if k.arg == "sources"), None)
        if isinstance(sources, (ast.List, ast.Tuple)) and all(
                isinstance(e, ast.Constant) and isinstance(e.value, str) for e in sources.elts):
            out += [os.path.normpath(os.path.join(base, str(e.value))) for e in sources.elts
                    if isinstance(e, ast.Constant)]
    return out


def shim_builds(files: list[str], read: Callable[[str], str | None],
                shimmed: Callable[[str, str], bool]) -> tuple[tuple[str, str], ...]:
    """(setup.py, source) for each source of the run that the shim fix rewrites and that a
    ``setup.py`` of the run builds."""
    in_run = {os.path.normpath(f) for f in files}
    out = []
    for setup in files:
        if os.path.basename(setup) != "setup.py":
            continue
        text = read(setup)
        for src in extension_sources(setup, text) if text is not None else []:
            body = read(src) if src in in_run else None
            if body is not None and shimmed(src, body):
                out.append((os.path.normpath(setup), src))
    return tuple(out)


def setup_result(path: str, text: str, result: FileResult, options: Options) -> FileResult:
    """``setup.py``'s result with the shim's include folder added, where its sources get the shim."""
    options.project.asked("cpp_shim_builds", "")
    if os.path.normpath(path) not in {s for s, _ in options.cpp_shim_builds} or result.error is not None:
        return result
    new = add_include_dir(result.new_text if result.new_text is not None else text)
    if new is not None:
        result.new_text = new
    return result


class _AddIncludeDir(cst.CSTTransformer):
    def __init__(self) -> None:
        self.changed = False

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        func = updated.func
        name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
        if name not in _EXTENSIONS:
            return updated
        new_elem = cst.Element(cst.parse_expression(_GET_INCLUDE))
        args = list(updated.args)
        for i, a in enumerate(args):
            if a.keyword is not None and a.keyword.value == "include_dirs":
                if not isinstance(a.value, cst.List):
                    return updated  # computed elsewhere: not provable, the finding says what to add
                elems = list(a.value.elements)
                if elems and elems[-1].comma is cst.MaybeSentinel.DEFAULT:
                    elems[-1] = elems[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
                args[i] = a.with_changes(value=a.value.with_changes(elements=[*elems, new_elem]))
                self.changed = True
                return updated.with_changes(args=args)
        last = args[-1]
        kw = cst.Arg(value=cst.List([new_elem]), keyword=cst.Name("include_dirs"),
                     equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                           whitespace_after=cst.SimpleWhitespace("")))
        if isinstance(last.comma, cst.Comma):  # a trailing comma: the new argument takes it
            sep = args[-2].comma if len(args) > 1 and isinstance(args[-2].comma, cst.Comma) else \
                cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
            args[-1] = last.with_changes(comma=sep)
            args.append(kw.with_changes(comma=last.comma))
        else:
            args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
            args.append(kw)
        self.changed = True
        return updated.with_changes(args=args)


def add_include_dir(text: str) -> str | None:
    """``setup.py``'s text with the shim's folder in each extension's ``include_dirs`` and
    ``import ncclx_migrate.backend`` after its imports; None when nothing is to change."""
    if "ncclx_migrate.backend.get_include()" in text:
        return None
    try:
        module = cst.parse_module(text)
    except cst.ParserSyntaxError:
        return None
    t = _AddIncludeDir()
    module = module.visit(t)
    if not t.changed:
        return None
    body = list(module.body)
    last_import = max((i for i, s in enumerate(body) if isinstance(s, cst.SimpleStatementLine)
                       and any(isinstance(x, (cst.Import, cst.ImportFrom)) for x in s.body)), default=-1)
    imp = cst.parse_statement("import ncclx_migrate.backend\n")
    body.insert(last_import + 1, imp)
    return module.with_changes(body=body).code
