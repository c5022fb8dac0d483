"""The package's import graph, read from the source (ast over src/, nothing imported): no circle
between modules or between packages, ``import ncclx_migrate`` reaches no torch knowledge but
``_torch``'s, and ``_torch`` imports nothing else of the project. docs/architecture.md draws
the package graph that ``python -m tests.test_import_graph`` prints (``--inside-functions``: the
imports that load on use)."""

from __future__ import annotations

import ast
import functools
import sys
from collections import defaultdict
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
TOP = "ncclx_migrate"

# Circles that issue 32 takes apart in other slices: each names the modules and why it is left.
# A circle not listed fails, and so does a listed one that is gone (then delete its line).
KNOWN_CIRCLES = {
    frozenset({"_migrate._baseline", "_migrate._output"}): "_cell_line, a notebook fact, is in the renderer",
    # Options carries the run's Project (_model imports _project), and the Project's pre-pass
    # (root, target torch, indexes) reaches the scanners, which build Findings: issue 32, 4.
    frozenset({
        "_migrate._cited", "_migrate._discover", "_migrate._files", "_migrate._files._checks",
        "_migrate._files._cpp", "_migrate._files._cpp._bindings", "_migrate._files._cpp._fix",
        "_migrate._files._cpp._index", "_migrate._files._cpp._result", "_migrate._files._cpp._rules",
        "_migrate._files._cpp._setup", "_migrate._files._notebook", "_migrate._files._shell",
        "_migrate._fixpoint", "_migrate._model", "_migrate._project", "_migrate._project_files",
        "_migrate._python", "_migrate._python._astcheck", "_migrate._python._bounds",
        "_migrate._python._clashes", "_migrate._python._ctx", "_migrate._python._edits",
        "_migrate._python._engine", "_migrate._python._flow", "_migrate._python._gpu",
        "_migrate._python._r_api", "_migrate._python._r_backend", "_migrate._python._r_env",
        "_migrate._python._wrap", "_migrate._python._xcall", "_migrate._shared", "_migrate._target",
    }): "Options carries the Project, whose pre-pass reaches the scanners (issue 32, 4)",
}

# What `import ncclx_migrate` may run: the public names, the import-time checks (env warnings,
# NCCLX_HANG_DUMP's watchdog) and the torch knowledge they read.
IMPORT_TIME = {"", "_warnings", "_shown", "_import_time", "_envwarnings", "_fr", "_fr._env", "_fr._watchdog",
               "_fr._dump", "_fr._paths", "_fr._pickle", "_fr._frames", "_torch.envvars", "_torch.releases"}


@functools.cache
def modules() -> dict[str, tuple[Path, bool]]:
    """Module name below ncclx_migrate ("" for the package itself, "_torch.probe") -> (file, is a package)."""
    out = {}
    for path in (SRC / TOP).rglob("*.py"):
        parts = path.relative_to(SRC / TOP).with_suffix("").parts
        is_package = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return out


@functools.cache
def imports() -> dict[str, set[str]]:
    """module -> the project's modules it imports anywhere: at the top, inside a function, or under
    TYPE_CHECKING (a type-only import still ties the two modules together)."""
    mods = modules()
    graph: dict[str, set[str]] = defaultdict(set)
    for name, (path, is_package) in mods.items():
        here = [TOP, *name.split(".")] if name else [TOP]
        package = here if is_package else here[:-1]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join([*package[: len(package) - node.level + 1], *([base] if base else [])])
                targets = [f"{base}.{alias.name}" for alias in node.names]
            for target in targets:
                parts = target.split(".")
                if parts[0] != TOP:
                    continue
                while ".".join(parts[1:]) not in mods:  # `from .x import name`: the module x
                    parts.pop()
                if (found := ".".join(parts[1:])) != name:
                    graph[name].add(found)
    return graph


def circles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[frozenset[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while (w := stack.pop()) != v:
                component.append(w)
            if component:
                out.append(frozenset([v, *component]))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Which top-level package imports which, without the root package: every module may read
    ``__version__`` from it, and it imports only what IMPORT_TIME lists."""
    out: dict[str, set[str]] = defaultdict(set)
    for name, targets in graph.items():
        for target in targets:
            a, b = name.split(".")[0], target.split(".")[0]  # "_migrate._runner" is in "_migrate"
            if a and b and a != b:
                out[a].add(b)
    return out


def test_no_circle_between_modules() -> None:
    found = {frozenset(c) for c in circles(imports())}
    assert found - set(KNOWN_CIRCLES) == set(), "new import circles"
    assert set(KNOWN_CIRCLES) - found == set(), "a listed circle is gone: delete it from KNOWN_CIRCLES"


def test_no_circle_between_packages() -> None:
    assert circles(package_graph(imports())) == []


def test_import_ncclx_migrate_reaches_only_the_import_time_modules() -> None:
    graph = imports()
    seen, todo = set(), [""]
    while todo:
        if (name := todo.pop()) not in seen:
            seen.add(name)
            todo.extend(graph.get(name, ()))
    assert seen - IMPORT_TIME == set()


def test_torch_knowledge_imports_nothing_else_of_the_project() -> None:
    graph = imports()
    for name, targets in graph.items():
        if name.startswith("_torch"):
            assert {t for t in targets if not t.startswith("_torch")} == set(), name
    assert graph["_torch.releases"] == set()  # the bottom: envvars and probe read it


def inside_functions() -> list[str]:
    """``module:line`` of each import of a project module inside a function (loaded on use)."""
    out = []
    for name, (path, _) in modules().items():
        for fn in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out += [f"{name}:{node.lineno}" for node in ast.walk(fn)
                        if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith(TOP))]
    return sorted(set(out))


def mermaid() -> str:
    """The package graph as a mermaid flowchart, for docs/architecture.md."""
    lines = ["flowchart TD"]
    for a, targets in sorted(package_graph(imports()).items()):
        lines += [f"  {a.strip('_') or TOP} --> {b.strip('_')}" for b in sorted(targets)]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":  # python -m tests.test_import_graph [--inside-functions]
    if sys.argv[1:] == ["--inside-functions"]:
        lines = inside_functions()
        sys.stdout.write("".join(f"{line}\n" for line in lines) + f"{len(lines)} imports inside functions\n")
    else:
        sys.stdout.write(mermaid())
