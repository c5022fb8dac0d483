"""pytest-env's settings: ``[tool.pytest.ini_options] env = [...]`` and the ``[tool.pytest_env]``
table of ``pyproject.toml`` (read with tomllib, placed with tree-sitter-toml), and
``[pytest] env =`` of ``pytest.ini`` (configparser, as tox.ini's: ``_tox``).

pytest-env sets these in the test process before any test runs.  ``D:NAME=V`` (or
``skip_if_set = true``) sets NAME only where it is not set already, so the safe add is
``D:NEW=<OLD's value>``: NEW keeps an inherited value, else takes OLD's, which is what torch
read before.  ``{VAR}`` in a value is expanded (unless ``R:`` or ``transform = false``): computed.
A string with escapes is not placed (its text is not its value) and is skipped.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from ._checks import Collector, EnvAssign
from ._grammar import Node, Offsets, nodes, parse
from ._text import Edit, LineIndex, newline_of
from ._tox import Entry, assign, entry, ini_values, setting_assigns

try:
    import tomllib
except ImportError:  # Python 3.10: no pyproject.toml reading (pytest.ini still is)
    tomllib = None  # type: ignore[assignment]

__all__ = ["scan_pytest_env"]

_TABLES = frozenset({"table"})


def scan_pytest_env(path: str, text: str, sink: Collector) -> None:
    if path.lower().endswith(".ini"):
        for lines in ini_values(text, {"pytest": ("env",)}).values():
            setting_assigns(text, sink, lines, flags=True, keep=True)
        return
    if tomllib is None:
        return
    try:
        data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, ValueError):
        return
    tool = data.get("tool")
    tool = tool if isinstance(tool, dict) else {}
    root, offsets = parse("tree_sitter_toml", text)
    for table in nodes(root, _TABLES):
        key = _table_key(table)
        if key == "tool.pytest.ini_options":
            pytest = tool.get("pytest")
            options = pytest.get("ini_options") if isinstance(pytest, dict) else None
            wanted = options.get("env") if isinstance(options, dict) else None
            _ini_array(text, sink, offsets, table, wanted)
        elif key == "tool.pytest_env":
            _native(text, sink, offsets, table, tool.get("pytest_env"))


def _table_key(table: Node) -> str:
    key = next((c for c in table.children if c.type in ("bare_key", "dotted_key", "quoted_key")), None)
    return re.sub(r"\s+", "", key.text.decode("utf-8", "replace")) if key is not None and key.text else ""


def _decoded(node: Node) -> str | None:
    """A TOML string's value, where its text between the quotes is that value."""
    raw = (node.text or b"").decode("utf-8", "replace")
    if tomllib is None or len(raw) < 2 or raw[:3] in ('"""', "'''") or (raw[0] == '"' and "\\" in raw):
        return None
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        return None
    return value if isinstance(value, str) and value == raw[1:-1] else None


def _pair(table: Node, name: str) -> Node | None:
    for pair in table.children:
        if pair.type == "pair" and pair.children and pair.children[0].text == name.encode():
            return pair
    return None


def _ini_array(text: str, sink: Collector, offsets: Offsets, table: Node, wanted: object) -> None:
    pair = _pair(table, "env")
    array = pair.children[-1] if pair is not None else None
    if array is None or array.type != "array" or not isinstance(wanted, list):
        return
    items = [c for c in array.children if c.type == "string"]
    if [_decoded(s) for s in items] != wanted:
        return  # not what tomllib read (escapes, a value that is not a string): left alone
    index = LineIndex(text)
    for k, item in enumerate(items):
        found = entry(wanted[k], flags=True)
        if found is None:
            continue
        start, end = offsets.char(item.start_byte), offsets.char(item.end_byte)
        quote = text[start]

        def insert(body: str, end: int = end, quote: str = quote) -> list[Edit]:
            return [Edit(end, end, f", {quote}{body}{quote}")]

        sink.env(assign(found, start + 1, insert, _item_remover(text, index, item, offsets), keep=True))


def _item_remover(text: str, index: LineIndex, item: Node,
                  offsets: Offsets) -> Callable[[], list[Edit] | None]:
    """Delete an array item: its line when nothing else is on it, else the item and a comma."""
    start, end = offsets.char(item.start_byte), offsets.char(item.end_byte)
    after = item.next_sibling
    before = item.prev_sibling

    def remove() -> list[Edit] | None:
        line = index.line_of(start)
        ls, le, full = index.bounds(line)
        rest = text[end:le].strip()
        if not text[ls:start].strip() and (rest in ("", ",") or re.fullmatch(r",?\s*#.*", rest)):
            return [Edit(ls, full, "")]
        if after is not None and after.type == ",":
            stop = offsets.char(after.end_byte)
            while stop < le and text[stop] in " \t":
                stop += 1
            return [Edit(start, stop, "")]
        if before is not None and before.type == ",":
            return [Edit(offsets.char(before.start_byte), end, "")]
        return None
    return remove


def _native(text: str, sink: Collector, offsets: Offsets, table: Node, wanted: object) -> None:
    """``[tool.pytest_env]``: ``NAME = "value"`` or ``NAME = {value = "v", skip_if_set = true}``."""
    if not isinstance(wanted, dict):
        return
    index = LineIndex(text)
    nl = newline_of(text)
    for pair in table.children:
        if pair.type != "pair" or len(pair.children) < 3 or pair.children[0].type != "bare_key":
            continue
        name = (pair.children[0].text or b"").decode()
        setting = wanted.get(name)
        node = pair.children[-1]
        skip_if_set = transform = False
        if node.type == "inline_table" and isinstance(setting, dict):
            skip_if_set, transform = bool(setting.get("skip_if_set")), bool(setting.get("transform"))
            node = next((p.children[-1] for p in node.children if p.type == "pair"
                         and p.children and p.children[0].text == b"value"), node)
            setting = setting.get("value")
        if node.type != "string" or not isinstance(setting, str) or _decoded(node) != setting:
            continue  # a number or a flag (no rule's value), or a string not placed
        value: str | None = None if transform and "{" in setting else setting
        default = None
        if skip_if_set and value is not None:
            value, default = None, value
        found = Entry("D:" if skip_if_set else "", name, 0, setting, 0, value, default)
        name_start = offsets.char(pair.children[0].start_byte)
        value_start = offsets.char(node.start_byte) + 1
        line = index.line_of(name_start)
        ls, _, full = index.bounds(line)
        alone = index.line_of(offsets.char(pair.end_byte)) == line and not text[ls:name_start].strip()
        lead = text[ls:name_start]

        def insert(entry_text: str, full: int = full, lead: str = lead) -> list[Edit]:
            new, _, value = entry_text.partition("=")
            flag = new.startswith("D:")
            new = new.split(":")[-1]
            quoted = '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
            row = f"{lead}{new} = " + ("{value = " + quoted + ", skip_if_set = true}" if flag else quoted)
            if full == len(text) and not text.endswith("\n"):
                return [Edit(full, full, nl + row)]
            return [Edit(full, full, row + nl)]

        def remove(ls: int = ls, full: int = full) -> list[Edit] | None:
            return [Edit(ls, full, "")]

        a = assign(found, 0, insert, remove, keep=True)
        sink.env(EnvAssign(a.name, name_start, a.value, setting, value_start, a.default,
                           add=a.add if alone else None, remove=remove if alone else None,
                           keep_add=a.keep_add if alone else None))
