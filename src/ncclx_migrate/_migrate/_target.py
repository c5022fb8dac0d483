"""``--target-torch`` when not given: the oldest torch the project says it supports."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

from ._config import read_text, read_toml

__all__ = ["DEFAULT_TARGET", "detect_target", "parse_target"]

DEFAULT_TARGET = (2, 15)


def parse_target(text: str) -> tuple[int, int]:
    m = re.fullmatch(r"\s*(\d+)\.(\d+)(?:\.\d+)?\s*", text)
    if not m:
        raise ValueError(f"--target-torch wants MAJOR.MINOR such as 2.14, got {text!r}")
    return int(m.group(1)), int(m.group(2))


def _floor(req_text: str) -> tuple[int, int] | None:
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


def detect_target(start: str) -> tuple[tuple[int, int], str | None]:
    """(target, the file it came from); walks up from ``start`` to the first project file."""
    here = Path(start).resolve()
    if not here.is_dir():
        here = here.parent
    for d in (here, *here.parents):
        candidates = [d / "pyproject.toml", *sorted(d.glob("requirements*.txt"))]
        present = [c for c in candidates if c.is_file()]
        for c in present:
            found = _from_pyproject(c) if c.name == "pyproject.toml" else _from_requirements(c)
            if found:
                return found, str(c)
        if present or (d / ".git").exists():
            break  # the project root: stop here
    return DEFAULT_TARGET, None
