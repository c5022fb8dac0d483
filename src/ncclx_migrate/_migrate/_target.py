"""``--target-torch`` when not given: the oldest torch the project says it supports."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ._config import read_ini, read_text, read_toml
from ._project_files import project_root

__all__ = ["DEFAULT_TARGET", "detect_target", "parse_target"]

DEFAULT_TARGET = (2, 15)


def parse_target(text: str) -> tuple[int, int]:
    m = re.fullmatch(r"\s*(\d+)\.(\d+)(?:\.\d+)?\s*", text)
    if not m:
        raise ValueError(f"--target-torch wants MAJOR.MINOR such as 2.14, got {text!r}")
    return int(m.group(1)), int(m.group(2))


def _floor(req_text: str) -> tuple[int, int] | None:
    if "torch" not in req_text.lower():
        return None  # (no requirement on torch: packaging is not even imported)
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.version import InvalidVersion, Version

    try:
        req = Requirement(req_text)
    except InvalidRequirement:
        return None
    if req.name.lower() != "torch":
        return None
    floors: list[tuple[int, int]] = []
    for spec in req.specifier:
        try:
            v = Version(spec.version.replace(".*", ""))
        except InvalidVersion:
            continue
        # ">2.14" still allows 2.14.1 (PEP 440), so its floor is 2.14 as for ">=".
        if spec.operator in (">=", ">", "==", "~=", "==="):
            floors.append((v.major, v.minor))
    return min(floors) if floors else None



def _from_pyproject(path: Path) -> tuple[int, int] | None:
    data: dict[str, Any] | None = read_toml(path)
    if data is None:
        return None
    project = data.get("project", {})
    reqs: list[str] = list(project.get("dependencies", []) or [])
    for extra in (project.get("optional-dependencies", {}) or {}).values():
        reqs.extend(extra)
    for group in (data.get("dependency-groups", {}) or {}).values():
        reqs.extend(r for r in group if isinstance(r, str))
    poetry = data.get("tool", {}).get("poetry", {}).get("dependencies", {}) or {}
    torch_dep = poetry.get("torch")
    if isinstance(torch_dep, dict):  # torch = {version = "^2.14", source = "..."}
        torch_dep = torch_dep.get("version")
    if isinstance(torch_dep, str):
        spec = torch_dep.strip()
        spec = ">=" + spec[1:] if spec[:1] in "^~" else spec
        reqs.append("torch" + (spec if spec[:1] in "<>=!~" else "==" + spec))
    floors = [f for f in (_floor(r) for r in reqs if isinstance(r, str)) if f]
    return min(floors) if floors else None


def _from_requirements(path: Path) -> tuple[int, int] | None:
    text = read_text(path)
    if text is None:
        return None
    floors = [f for f in (_floor(line.split("#")[0].strip()) for line in text.splitlines()) if f]
    return min(floors) if floors else None


def _strings(node: ast.expr | None, names: dict[str, ast.expr]) -> list[str]:
    """The string literals of a list/tuple/set (or of a module-level name bound to one)."""
    if isinstance(node, ast.Name) and node.id in names:
        node = names[node.id]
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):  # base + ["torch==2.9"]
        return _strings(node.left, names) + _strings(node.right, names)
    return []


def _from_setup_py(path: Path) -> tuple[int, int] | None:
    """``install_requires`` and every ``extras_require`` list of the ``setup()`` call."""
    text = read_text(path)
    if text is None or "torch" not in text:
        return None
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    names = {t.id: n.value for n in tree.body if isinstance(n, ast.Assign)
             for t in n.targets if isinstance(t, ast.Name)}
    reqs: list[str] = []
    for call in ast.walk(tree):
        if not (isinstance(call, ast.Call) and getattr(call.func, "id", getattr(call.func, "attr", None)) == "setup"):
            continue
        for kw in call.keywords:
            if kw.arg == "install_requires":
                reqs += _strings(kw.value, names)
            elif kw.arg == "extras_require":
                extras = names.get(kw.value.id, kw.value) if isinstance(kw.value, ast.Name) else kw.value
                if isinstance(extras, ast.Dict):
                    for v in extras.values:
                        reqs += _strings(v, names)
    floors = [f for f in map(_floor, reqs) if f]
    return min(floors) if floors else None


def _from_setup_cfg(path: Path) -> tuple[int, int] | None:
    cp = read_ini(path)
    if cp is None:
        return None
    reqs: list[str] = []
    if cp.has_option("options", "install_requires"):
        reqs += cp.get("options", "install_requires").splitlines()
    if cp.has_section("options.extras_require"):
        for _, value in cp.items("options.extras_require"):
            reqs += value.splitlines()
    floors = [f for f in (_floor(r.split("#")[0].strip()) for r in reqs) if f]
    return min(floors) if floors else None


# conda: `pytorch=2.9.1`, `pytorch>=2.9`, `pytorch 2.9.*`, `conda-forge::pytorch==2.9`
_CONDA = re.compile(r"^(?:[\w.-]+::)?(?:py)?torch(?:\s*(==|=|>=|>|~=)\s*|\s+)(\d+)\.(\d+)")


def _from_environment_yml(path: Path) -> tuple[int, int] | None:
    """A conda ``environment.yml``: its ``dependencies`` and their ``pip:`` list."""
    text = read_text(path)
    if text is None or "torch" not in text:
        return None
    import yaml  # type: ignore[import-untyped]  # PyYAML (libcst needs it too)

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return None
    deps = data.get("dependencies") if isinstance(data, dict) else None
    floors: list[tuple[int, int]] = []
    for dep in deps if isinstance(deps, list) else []:
        if isinstance(dep, dict):
            floors += [f for f in (_floor(str(r)) for r in dep.get("pip") or []) if f]
        elif isinstance(dep, str):
            m = _CONDA.match(dep.strip())
            if m:
                floors.append((int(m.group(2)), int(m.group(3))))
    return min(floors) if floors else None


_PIP_TORCH = re.compile(r"""(?<![\w.-])["']?torch\s*((?:==|>=|~=|>)\s*[\d.*]+)""")


def _from_dockerfile(path: Path) -> tuple[int, int] | None:
    """A ``pip install torch==X`` (or ``>=``) in a Dockerfile ``RUN``."""
    text = read_text(path)
    if text is None or "torch" not in text:
        return None
    floors = [f for line in text.splitlines() if "pip" in line
              for m in _PIP_TORCH.finditer(line) if (f := _floor("torch" + m.group(1).replace(" ", "")))]
    return min(floors) if floors else None


def _sources(d: Path) -> list[tuple[Path, Callable[[Path], tuple[int, int] | None]]]:
    """Every file of the project folder ``d`` that can state the torch it supports."""
    try:
        listing = sorted(p for p in d.iterdir() if p.is_file())
    except OSError:
        return []
    out: list[tuple[Path, Callable[[Path], tuple[int, int] | None]]] = []
    for p in listing:
        name = p.name
        if name == "pyproject.toml":
            out.append((p, _from_pyproject))
        elif name == "setup.py":
            out.append((p, _from_setup_py))
        elif name == "setup.cfg":
            out.append((p, _from_setup_cfg))
        elif name.startswith("requirements") and name.endswith(".txt"):
            out.append((p, _from_requirements))
        elif name in ("environment.yml", "environment.yaml"):
            out.append((p, _from_environment_yml))
        elif name == "Dockerfile" or name.startswith("Dockerfile.") or name.endswith(".Dockerfile"):
            out.append((p, _from_dockerfile))
    return out


def detect_target(start: str, root: Path | None = None) -> tuple[tuple[int, int], str | None]:
    """(target, the file it came from): the lowest torch bound any file of the project states
    (pyproject.toml, setup.py, setup.cfg, requirements*.txt, environment.yml, a Dockerfile's
    ``pip install torch==``), each with every extra; the project is the nearest folder up from
    ``start`` that is a project root (_project_files.py; ``root``: that folder, already found)."""
    root = root if root is not None else project_root(start)
    if root is None:
        return DEFAULT_TARGET, None
    found = [(floor, str(p)) for p, read in _sources(root) if (floor := read(p))]
    return min(found) if found else (DEFAULT_TARGET, None)
