"""Reading the project's own config files, and saying so when one cannot be read.

A pyproject.toml with a syntax error, or a setup.cfg nobody may read, must not silently
turn into "target torch 2.15, line length 88": each reader here notes one line naming
the file, the error and what was assumed instead; the CLI prints them on stderr (so
JSON and SARIF on stdout stay valid).  Pool workers hand theirs back with each file's
Outcome (:func:`drain`).
"""

from __future__ import annotations

import configparser
import os
from pathlib import Path

import tomllib

__all__ = ["drain", "read_ini", "read_text", "read_toml"]

_notes: dict[str, str] = {}  # file -> its one line, in the order met


def _assumed(path: Path) -> str:
    if path.name == "pyproject.toml":
        return "it requires no torch version and sets no line length"
    return "it requires no torch version" if path.suffix == ".txt" else "it sets no line length"


def _note(path: Path, error: str) -> None:
    shown = os.path.relpath(path)
    shown = str(path) if shown.startswith(os.pardir) else shown
    _notes.setdefault(str(path), f"{shown}: warning: cannot read it ({error}); assumed {_assumed(path)}")


def drain() -> list[str]:
    """The lines noted since the last call (each file once)."""
    out = list(_notes.values())
    _notes.clear()
    return out


def read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        _note(path, str(exc.strerror or exc))
    except UnicodeDecodeError as exc:
        _note(path, f"not UTF-8 at byte {exc.start}")
    return None


def read_toml(path: Path) -> dict[str, object] | None:
    text = read_text(path)
    if text is None:
        return None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        _note(path, f"invalid TOML: {exc}")
        return None


def read_ini(path: Path) -> configparser.RawConfigParser | None:
    text = read_text(path)
    if text is None:
        return None
    cp = configparser.RawConfigParser()
    try:
        cp.read_string(text, source=str(path))
    except configparser.Error as exc:
        where = f" at line {exc.lineno}" if isinstance(exc, configparser.MissingSectionHeaderError) else ""
        _note(path, f"invalid INI{where}: {str(exc).splitlines()[0]}")
        return None
    return cp
