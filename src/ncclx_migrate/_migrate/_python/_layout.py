"""The project's line length, read where its formatter and linter read it.

A fix that adds text must not push a line past the limit the project enforces: the first
of ``ruff.toml``/``.ruff.toml`` ``line-length``, pyproject.toml ``[tool.ruff]`` then
``[tool.black]`` ``line-length``, ``[flake8] max-line-length`` in setup.cfg/tox.ini/.flake8,
found walking up from the file (black's default, 88, when none says).  Read only when a
fix needs it, once per directory.
"""

from __future__ import annotations

import configparser
import functools
from pathlib import Path

import tomllib

__all__ = ["DEFAULT_LINE_LENGTH", "line_length"]

DEFAULT_LINE_LENGTH = 88


def _toml(path: Path) -> dict[str, object] | None:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _in_dir(d: Path) -> tuple[int | None, bool]:
    """(the limit configured in ``d``, whether ``d`` is a project root)."""
    for name in ("ruff.toml", ".ruff.toml"):
        data = _toml(d / name) if (d / name).is_file() else None
        if data is not None and _int(data.get("line-length")):
            return _int(data.get("line-length")), True
    root = False
    if (d / "pyproject.toml").is_file():
        root = True
        data = _toml(d / "pyproject.toml") or {}
        tool = data.get("tool")
        if isinstance(tool, dict):
            for section in ("ruff", "black"):
                table = tool.get(section)
                if isinstance(table, dict) and _int(table.get("line-length")):
                    return _int(table.get("line-length")), True
    for name in ("setup.cfg", "tox.ini", ".flake8"):
        if not (d / name).is_file():
            continue
        cp = configparser.RawConfigParser()
        try:
            cp.read(d / name, encoding="utf-8")
            value = cp.get("flake8", "max-line-length", fallback=None) or cp.get(
                "flake8", "max_line_length", fallback=None)
        except (configparser.Error, UnicodeDecodeError, OSError):
            continue
        if value is not None and value.strip().isdigit():
            return int(value.strip()), True
    return None, root or (d / ".git").exists()


@functools.lru_cache(maxsize=256)
def _for_dir(d: Path) -> int:
    limit, root = _in_dir(d)
    if limit is not None:
        return limit
    if root or d.parent == d:
        return DEFAULT_LINE_LENGTH
    return _for_dir(d.parent)


def line_length(path: str) -> int:
    """The line length the project of ``path`` enforces (88 when it says nothing)."""
    try:
        return _for_dir(Path(path).resolve().parent)
    except (OSError, RuntimeError):
        return DEFAULT_LINE_LENGTH
