"""The project's line length, read where its formatter and linter read it.

A fix that adds text must not push a line past the limit the project enforces.  In the
nearest directory (walking up from the file) that configures one, a formatter's setting
wins over a linter's: ``ruff.toml``/``.ruff.toml`` ``line-length``; pyproject.toml
``[tool.ruff] line-length``, ``[tool.black] line-length`` (or ``line_length``, black takes
both), ``[tool.yapf] column_limit``; ``.style.yapf`` ``[style]`` and setup.cfg ``[yapf]``
``column_limit``; then flake8's ``max-line-length`` in setup.cfg/tox.ini/.flake8.  Black's
default, 88, when none says.  Read only when a fix needs it, once per directory; a file
that cannot be read is said on stderr (see ``.._config``).
"""

from __future__ import annotations

import functools
from pathlib import Path

from .._config import read_ini, read_toml
from .._crossfile import consumed

__all__ = ["DEFAULT_LINE_LENGTH", "line_length"]

DEFAULT_LINE_LENGTH = 88

def _int(value: object) -> int | None:
    if isinstance(value, str) and value.strip().isdigit():  # INI values are text
        value = int(value)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _key(table: object, *names: str) -> int | None:
    if not isinstance(table, dict):
        return None
    return next((v for v in (_int(table.get(n)) for n in names) if v), None)


def _ini_key(d: Path, name: str, section: str, *keys: str) -> int | None:
    if not (d / name).is_file():
        return None
    cp = read_ini(d / name)
    if cp is None or not cp.has_section(section):
        return None
    return _key(dict(cp.items(section)), *keys)


def _in_dir(d: Path) -> tuple[int | None, bool]:
    """(the limit configured in ``d``, whether ``d`` is a project root)."""
    formatters: list[int | None] = []
    for name in ("ruff.toml", ".ruff.toml"):
        if (d / name).is_file():
            formatters.append(_key(read_toml(d / name), "line-length"))
    root = (d / "pyproject.toml").is_file()
    if root:
        tool = (read_toml(d / "pyproject.toml") or {}).get("tool")
        if isinstance(tool, dict):
            formatters += [_key(tool.get("ruff"), "line-length"), _key(tool.get("black"), "line-length", "line_length"),
                           _key(tool.get("yapf"), "column_limit", "column-limit")]
    formatters += [_ini_key(d, ".style.yapf", "style", "column_limit", "column-limit"),
                   _ini_key(d, "setup.cfg", "yapf", "column_limit", "column-limit")]
    linters = [_ini_key(d, name, "flake8", "max-line-length", "max_line_length")
               for name in ("setup.cfg", "tox.ini", ".flake8")]
    found = next((v for v in formatters + linters if v), None)
    return found, found is not None or root or (d / ".git").exists()


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
    consumed("line_length", path)
    try:
        return _for_dir(Path(path).resolve().parent)
    except (OSError, RuntimeError):
        return DEFAULT_LINE_LENGTH
