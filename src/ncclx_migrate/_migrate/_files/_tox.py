"""``tox.ini``: the ``setenv`` (tox 4: ``set_env``) of every ``[testenv]`` section, read with
configparser, and the ``--backend`` flags of its ``commands``.

configparser says what the sections, keys and values are; :func:`ini_values` finds where
each value line is in the file, and keeps only a key whose lines it found give configparser's
value back (anything else is skipped).  ``KEY = VALUE`` lines of ``setenv`` set the test
environment.  tox passes no host variable into it unless ``pass_env`` names it, so no form
of an added name defers to an inherited one: adds are unsafe.  ``{env:X}`` and other
substitutions make a value computed.  ``commands`` are argv lines (no shell): only their
flags are read (``--backend nccl-legacy``, ``docker run -e X=1``).
"""

from __future__ import annotations

import configparser
import re
from collections.abc import Callable
from dataclasses import dataclass

from ._checks import Collector, EnvAssign
from ._shell import Ctx, analyze_words, lex
from ._text import Edit, LineIndex, newline_of

__all__ = ["Entry", "IniLine", "assign", "entry", "ini_values", "scan_tox", "setting_assigns"]

_SECTION = re.compile(r"\[(?P<header>.+)\]")  # configparser's SECTCRE
_KEY = re.compile(r"(?P<key>[^=:\s][^=:]*?)\s*[=:]\s*")
_ENTRY = re.compile(r"(?P<name>[A-Za-z_][A-Za-z0-9_]*)\s*=\s*")
_SETENV = ("setenv", "set_env")
_Insert = Callable[[str], "list[Edit]"]


@dataclass
class IniLine:
    """One line of a value: its text and where it starts; ``first``: on the key's own line."""

    start: int
    text: str
    first: bool


def _parser(text: str) -> configparser.RawConfigParser | None:
    parser = configparser.RawConfigParser(strict=False, interpolation=None)
    try:
        parser.read_string(text)
    except configparser.Error:
        return None
    return parser


def ini_values(text: str, wanted: dict[str, tuple[str, ...]]) -> dict[tuple[str, str], list[IniLine]]:
    """(section, key) -> the value's lines, for the sections whose name starts with a key of
    ``wanted`` and the keys it lists there."""
    parser = _parser(text)
    if parser is None:
        return {}
    index = LineIndex(text)
    found: dict[tuple[str, str], list[IniLine]] = {}
    section = ""
    current: tuple[str, str] | None = None
    indent = 0
    for n in range(len(index)):
        start, end, _ = index.bounds(n)
        row = text[start:end]
        body = row.strip()
        if not body or body[0] in "#;":
            continue
        lead = len(row) - len(row.lstrip())
        if current is not None and lead > indent:
            found.setdefault(current, []).append(IniLine(start + lead, body, False))
            continue
        current = None
        m = _SECTION.fullmatch(body)
        if m is not None:
            section = m.group("header")
            continue
        k = _KEY.match(row, lead)
        if k is None:
            continue
        key = k.group("key").lower()
        if any(section.startswith(p) and key in keys for p, keys in wanted.items()):
            current, indent = (section, key), lead
            first = row[k.end():].rstrip()
            found[current] = [IniLine(start + k.end(), first, True)] if first else []
    return {where: lines for where, lines in found.items()
            if parser.has_option(*where) and _same(parser.get(*where), lines)}


def _same(value: str, lines: list[IniLine]) -> bool:
    return [v.strip() for v in value.splitlines() if v.strip()] == [line.text for line in lines]


@dataclass
class Entry:
    """One ``[FLAGS]NAME=VALUE`` setting (pytest-env's flags: ``D:`` default, ``R:`` raw)."""

    mode: str
    name: str
    name_at: int  # offsets in the entry's text
    raw: str
    value_at: int
    value: str | None
    default: str | None


def entry(body: str, flags: bool) -> Entry | None:
    mode, off = "", 0
    if flags:
        m = re.match(r"(?:[DR]:)*", body)
        mode, off = (m.group(0), m.end()) if m else ("", 0)
    e = _ENTRY.match(body, off)
    if e is None:
        return None
    raw = body[e.end():]
    substituted = "{" in raw and "R:" not in mode
    value = None if substituted or re.search(r"\s[#;]", raw) else raw
    default = None
    if "D:" in mode and value is not None:  # set only where not set: a default, as ${X:-d}
        value, default = None, value
    return Entry(mode, e.group("name"), e.start("name"), raw, e.end(), value, default)


def setting_assigns(text: str, sink: Collector, lines: list[IniLine], *, flags: bool, keep: bool) -> None:
    """``KEY=VALUE`` lines (pytest-env: ``flags``, a ``D:``/``R:`` prefix); ``keep``: the safe
    add ``D:NEW=VALUE`` (pytest-env sets a ``D:`` name only where it is not set already)."""
    index = LineIndex(text)
    nl = newline_of(text)
    for line in lines:
        found = entry(line.text, flags)
        if found is None:
            continue
        row = index.line_of(line.start)
        ls, _, full = index.bounds(row)
        lead = text[ls:line.start]

        def insert(row_text: str, line: IniLine = line, lead: str = lead, full: int = full) -> list[Edit]:
            if line.first:
                return [Edit(line.start + len(line.text), line.start + len(line.text), f"{nl}    {row_text}")]
            if full == len(text) and not text.endswith("\n"):
                return [Edit(full, full, f"{nl}{lead}{row_text}")]
            return [Edit(full, full, f"{lead}{row_text}{nl}")]

        def remove(line: IniLine = line, ls: int = ls, full: int = full) -> list[Edit] | None:
            if line.first:
                return [Edit(line.start, line.start + len(line.text), "")]
            return [Edit(ls, full, "")]

        sink.env(assign(found, line.start, insert, remove, keep))


def assign(found: Entry, at: int, insert: _Insert, remove: Callable[[], list[Edit] | None],
           keep: bool) -> EnvAssign:
    """The :class:`EnvAssign` of ``found`` (its text at offset ``at``); ``insert`` puts a
    new entry's text next to it."""

    def add(new: str) -> list[Edit] | None:
        return insert(f"{found.mode}{new}={found.raw}")

    def keep_add(new: str, alone: bool) -> list[Edit] | None:
        if not (alone and found.mode == "" and found.value is not None):
            return None  # a D: or computed OLD: NEW would not follow what torch reads of it
        return insert(f"D:{new}={found.value}")

    return EnvAssign(found.name, at + found.name_at, found.value, found.raw, at + found.value_at, found.default,
                     add=add, remove=remove, keep_add=keep_add if keep else None)


def scan_tox(text: str, sink: Collector) -> None:
    values = ini_values(text, {"testenv": (*_SETENV, "commands"), "pytest": ("env",)})
    ctx = Ctx(text, sink, lines_ok=False, quotable=False, refs="")
    for (_, key), lines in values.items():
        if key in _SETENV:
            setting_assigns(text, sink, lines, flags=False, keep=False)
        elif key == "env":
            setting_assigns(text, sink, lines, flags=True, keep=True)
        else:
            for line in lines:
                for cmd in lex(text, line.start, line.start + len(line.text)):
                    analyze_words(ctx, cmd.words, directive=True)  # argv: no X=1 prefixes
