"""The project's line length: the formatter it runs decides, as that formatter reads it.

A fix that adds text must not push a line past the limit the project enforces, and lines the
project's formatter would not leave there.  A project runs a formatter when black, ufmt
(usort, then black), ruff's formatter or yapf is a hook of its ``.pre-commit-config.yaml``
(every one of them must leave the line alone: the shortest length wins), when pyproject.toml has ``[tool.black]``,
``[tool.ruff.format]`` (ruff.toml: ``[format]``) or ``[tool.ufmt]`` (black, or ruff with
``formatter = "ruff-api"``), or when yapf is configured.  Its length is resolved as it
resolves it: a pre-commit hook's ``--line-length``; black's project root (the nearest folder
with ``.git``, ``.hg`` or a pyproject.toml that has ``[tool.black]``) and its ``line-length``
(88 by default); ruff's nearest config file (``.ruff.toml``, ``ruff.toml``, a pyproject.toml
with ``[tool.ruff]``) and its ``line-length`` through ``extend`` (88); yapf's nearest style
(``.style.yapf``, setup.cfg ``[yapf]``, ``[tool.yapf]``): ``column_limit``, else its
``based_on_style`` (pep8 79, google/facebook/yapf 80).  Only without a formatter does a
linter decide: in the nearest folder that sets one, ruff's ``line-length``, then flake8's
``max-line-length`` (setup.cfg, tox.ini, .flake8); 88 when none says.  Read only when a fix
needs it, once per folder; a file that cannot be read is said on stderr (``.._config``).
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from .._config import read_ini, read_text, read_toml

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


def _pyproject(d: Path) -> dict[str, object]:
    if not (d / "pyproject.toml").is_file():
        return {}
    tool = (read_toml(d / "pyproject.toml") or {}).get("tool")
    return tool if isinstance(tool, dict) else {}


def _ups(d: Path) -> list[Path]:
    """``d`` and the folders above it, up to the repository root (``.git``) if there is one."""
    out = []
    for p in (d, *d.parents):
        out.append(p)
        if (p / ".git").exists():
            break
    return out


# --- the formatters -----------------------------------------------------------------------------
def _black(d: Path) -> int:
    """black's ``line-length``: its project root is the nearest folder with ``.git``/``.hg`` or
    a pyproject.toml that configures black (one that does not is passed over)."""
    for p in (d, *d.parents):
        black = _pyproject(p).get("black")
        if isinstance(black, dict):
            return _key(black, "line-length", "line_length") or DEFAULT_LINE_LENGTH
        if (p / ".git").exists() or (p / ".hg").is_dir():
            break
    return DEFAULT_LINE_LENGTH


def _ruff_config(d: Path) -> tuple[Path, dict[str, object]] | None:
    """ruff's nearest config: ``.ruff.toml``, ``ruff.toml``, then a pyproject.toml with ``[tool.ruff]``."""
    for p in (d, *d.parents):
        for name in (".ruff.toml", "ruff.toml"):
            if (p / name).is_file():
                return p / name, dict(read_toml(p / name) or {})
        ruff = _pyproject(p).get("ruff")
        if isinstance(ruff, dict):
            return p / "pyproject.toml", ruff
    return None


def _ruff_length(path: Path, table: dict[str, object], depth: int = 0) -> int:
    found = _key(table, "line-length")
    if found:
        return found
    extend = table.get("extend")
    if isinstance(extend, str) and depth < 8:  # ruff follows `extend` to the base config
        base = (path.parent / os.path.expanduser(extend)).resolve()
        data = read_toml(base) if base.is_file() else None
        if data is not None:
            tool = data.get("tool")
            sub = tool.get("ruff") if base.name == "pyproject.toml" and isinstance(tool, dict) else data
            if isinstance(sub, dict):
                return _ruff_length(base, sub, depth + 1)
    return DEFAULT_LINE_LENGTH


_YAPF_STYLES = {"pep8": 79, "google": 80, "facebook": 80, "yapf": 80}


def _yapf(d: Path) -> int | None:
    """yapf's nearest style: ``.style.yapf``, setup.cfg ``[yapf]``, pyproject ``[tool.yapf]``."""
    for p in _ups(d):
        style: dict[str, object] | None = None
        for name, section in ((".style.yapf", "style"), ("setup.cfg", "yapf")):
            if style is None and (p / name).is_file():
                cp = read_ini(p / name)
                if cp is not None and cp.has_section(section):
                    style = dict(cp.items(section))
        if style is None and isinstance(_pyproject(p).get("yapf"), dict):
            style = dict(_pyproject(p)["yapf"])  # type: ignore[call-overload]
        if style is not None:
            base = str(style.get("based_on_style", "pep8")).strip().lower()
            return _key(style, "column_limit", "column-limit") or _YAPF_STYLES.get(base, 79)
    return None


def _hook_length(args: object) -> int | None:
    """``--line-length N``, ``--line-length=N``, ``-l N`` among a pre-commit hook's args."""
    if not isinstance(args, list):
        return None
    words = [str(a) for a in args]
    for k, w in enumerate(words):
        if w.startswith("--line-length="):
            return _int(w.split("=", 1)[1])
        if w in ("--line-length", "-l") and k + 1 < len(words):
            return _int(words[k + 1])
    return None


# A pre-commit hook id -> the formatter it runs: ufmt runs black (or ruff's formatter, by its
# [tool.ufmt] formatter), usort only sorts imports and decides no length.
_HOOKS = {"black": "black", "black-jupyter": "black", "ufmt": "ufmt", "ruff-format": "ruff", "yapf": "yapf"}


def _hook_kind(hook: dict[str, object]) -> str | None:
    """The formatter a hook runs: by its id, or for a local hook by its ``entry`` command."""
    kind = _HOOKS.get(str(hook.get("id")))
    if kind is None:
        words = str(hook.get("entry") or "").split()
        kind = {"black": "black", "ufmt": "ufmt", "yapf": "yapf"}.get(words[0] if words else "")
        if words[:2] == ["ruff", "format"]:
            kind = "ruff"
    return kind


def _pre_commit(d: Path) -> list[tuple[str, int | None]] | None:
    """The formatter hooks of the nearest ``.pre-commit-config.yaml`` (pre-commit runs from the
    repository root), each with the line length its args give; None without such a file."""
    for p in _ups(d):
        config = p / ".pre-commit-config.yaml"
        if not config.is_file():
            continue
        text = read_text(config)
        if text is None:
            return None
        import yaml  # type: ignore[import-untyped]  # PyYAML (libcst needs it too)

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError:
            return None
        found: list[tuple[str, int | None]] = []
        repos = data.get("repos") if isinstance(data, dict) else None
        for repo in repos if isinstance(repos, list) else []:
            for hook in (repo.get("hooks") or []) if isinstance(repo, dict) else []:
                kind = _hook_kind(hook) if isinstance(hook, dict) else None
                if kind is not None:
                    found.append((kind, _hook_length(hook.get("args"))))
        return found or None
    return None


def _ufmt(d: Path) -> int:
    """ufmt's formatter: black, or ruff's with ``[tool.ufmt] formatter = "ruff-api"``."""
    for p in _ups(d):
        ufmt = _pyproject(p).get("ufmt")
        if isinstance(ufmt, dict):
            if ufmt.get("formatter") == "ruff-api":
                ruff = _ruff_config(d)
                return _ruff_length(*ruff) if ruff else DEFAULT_LINE_LENGTH
            break
    return _black(d)


def _hook(d: Path, kind: str, given: int | None) -> int:
    if given:
        return given
    if kind == "black":
        return _black(d)
    if kind == "ufmt":
        return _ufmt(d)
    if kind == "ruff":
        ruff = _ruff_config(d)
        return _ruff_length(*ruff) if ruff else DEFAULT_LINE_LENGTH
    return _yapf(d) or 79


def _formatter(d: Path) -> int | None:
    """The line length of the formatter the project runs, or None when it runs none."""
    hooks = _pre_commit(d)
    if hooks:  # every formatter the hooks run must leave the line alone: the shortest wins
        return min(_hook(d, kind, given) for kind, given in hooks)
    for p in _ups(d):
        tool = _pyproject(p)
        if isinstance(tool.get("black"), dict):
            return _black(d)
        if isinstance(tool.get("ufmt"), dict):
            return _ufmt(d)
    ruff = _ruff_config(d)
    if ruff is not None:
        path, table = ruff
        if isinstance(table.get("format"), dict):
            return _ruff_length(path, table)
    return _yapf(d)


# --- the linters, when no formatter runs ----------------------------------------------------------
def _in_dir(d: Path) -> tuple[int | None, bool]:
    """(the linter limit configured in ``d``, whether ``d`` is a project root)."""
    found: list[int | None] = []
    for name in ("ruff.toml", ".ruff.toml"):
        if (d / name).is_file():
            found.append(_key(read_toml(d / name), "line-length"))
    root = (d / "pyproject.toml").is_file()
    if root:
        found.append(_key(_pyproject(d).get("ruff"), "line-length"))
    found += [_ini_key(d, name, "flake8", "max-line-length", "max_line_length")
              for name in ("setup.cfg", "tox.ini", ".flake8")]
    limit = next((v for v in found if v), None)
    return limit, limit is not None or root or (d / ".git").exists()


@functools.lru_cache(maxsize=256)
def _for_dir(d: Path) -> int:
    formatted = _formatter(d)
    return formatted if formatted is not None else _linted(d)


def _linted(d: Path) -> int:
    limit, root = _in_dir(d)
    if limit is not None:
        return limit
    if root or d.parent == d:
        return DEFAULT_LINE_LENGTH
    return _linted(d.parent)


def line_length(path: str) -> int:
    """The line length the project of ``path`` enforces (88 when it says nothing)."""
    try:
        return _for_dir(Path(path).resolve().parent)
    except (OSError, RuntimeError):
        return DEFAULT_LINE_LENGTH
