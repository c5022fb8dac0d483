"""``.env`` files: ``KEY=VALUE`` lines (optionally ``export KEY=VALUE``), ``#`` comments,
single- or double-quoted values.  Fixes are whole-line: a new ``KEY=VALUE`` line below,
or the line removed."""

from __future__ import annotations

import re

from ._checks import Collector, EnvAssign
from ._text import Edit, LineIndex, newline_of

__all__ = ["scan_dotenv"]

_LINE = re.compile(r"^(\s*(?:export\s+)?)([A-Za-z_][A-Za-z0-9_.]*)(\s*=\s*)(.*)$")


def _value(raw: str) -> tuple[str, str | None]:
    """(raw value without a trailing comment, literal value or None when interpolated)."""
    if raw[:1] in ("'", '"'):
        q = raw[0]
        k = raw.find(q, 1)
        if k < 0:
            return raw, None
        inner = raw[1:k]
        return raw[: k + 1], (None if q == '"' and "$" in inner else inner)
    m = re.search(r"\s+#", raw)
    body = (raw[: m.start()] if m else raw).rstrip()
    return body, (None if "$" in body else body)


def scan_dotenv(text: str, sink: Collector) -> None:
    index = LineIndex(text)
    nl = newline_of(text)
    for n in range(len(index)):
        start, end, full = index.bounds(n)
        line = text[start:end]
        m = _LINE.match(line)
        if m is None:
            continue
        name = m.group(2)
        raw_value, value = _value(m.group(4))
        name_start = start + m.start(2)
        value_start = start + m.start(4)
        new_tail = f"{m.group(3)}{raw_value}"

        def add(new: str, n: int = n, full: int = full, lead: str = m.group(1),
                tail: str = new_tail) -> list[Edit] | None:
            row = f"{lead}{new}{tail}"
            if full == len(text) and not text.endswith("\n"):
                return [Edit(full, full, nl + row)]
            return [Edit(full, full, row + nl)]

        def remove(start: int = start, full: int = full) -> list[Edit] | None:
            return [Edit(start, full, "")]

        sink.env(EnvAssign(name, name_start, value, raw_value, value_start, None, add, remove))
