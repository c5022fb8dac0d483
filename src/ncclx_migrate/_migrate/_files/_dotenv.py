"""``.env`` files, read by python-dotenv's own parser (the one ``load_dotenv`` uses):
``KEY=VALUE`` (optionally ``export KEY=VALUE``), ``#`` comments, single- or
double-quoted values that may span several lines.  Fixes are whole-binding: a new
``KEY=VALUE`` binding below (the value copied as written), or the binding removed."""

from __future__ import annotations

import re

from dotenv.parser import parse_stream

from ..._torch.envvars import ENV_VARS
from ._checks import Collector, EnvAssign, mentions_backend
from ._text import Edit, LineIndex, newline_of

__all__ = ["scan_dotenv"]

# The names a rule looks at: the deprecated ones and what replaces them.
_NAMES = frozenset({v.name for v in ENV_VARS} | {v.replacement for v in ENV_VARS if v.replacement})

# The start of a binding as python-dotenv reads it: export, the (maybe quoted) key, "=".
_HEAD = re.compile(r"[ \t]*(export[ \t]+)?(['\"]?)([^=#\s'\"]+)\2[ \t]*=[ \t]*")


def _raw_value(rest: str) -> str:
    """The value as written (quotes included, trailing comment and blanks dropped)."""
    if rest[:1] in ("'", '"'):
        q = rest[0]
        k = 1
        while k < len(rest):
            if rest[k] == "\\" and k + 1 < len(rest):
                k += 2
                continue
            if rest[k] == q:
                return rest[: k + 1]
            k += 1
        return rest
    line = re.split(r"\r\n|\n|\r", rest, maxsplit=1)[0]
    m = re.search(r"\s+#", line)
    return (line[: m.start()] if m else line).rstrip()


class _Stream:
    """What parse_stream reads (all of it, once): the text itself, where io.StringIO would
    hold a copy at 4 bytes a character, and read() a second one."""

    def __init__(self, text: str) -> None:
        self.text = text

    def read(self) -> str:
        return self.text


def scan_dotenv(text: str, sink: Collector) -> None:
    index = LineIndex(text)
    nl = newline_of(text)
    end = 0
    for binding in parse_stream(_Stream(text)):  # type: ignore[arg-type]
        chunk = binding.original.string
        start, end = end, end + len(chunk)
        if binding.key is None or binding.value is None or binding.error:
            continue  # a comment, a blank line, a line dotenv cannot read, or KEY without =
        if binding.key not in _NAMES and not mentions_backend(binding.value):
            continue  # no rule concerns it: not kept (a large file has millions of them)
        body = len(chunk) - len(chunk.lstrip("\r\n"))  # blank lines before it belong to it
        m = _HEAD.match(chunk, body)
        if m is None or m.group(3) != binding.key:
            continue
        line_start = start + body
        raw_value = _raw_value(chunk[m.end():])
        quoted = raw_value[:1] in ("'", '"')
        value = None if "$" in binding.value and not raw_value.startswith("'") else binding.value
        if not quoted and value is not None:
            value = raw_value  # unquoted: as written (dotenv's value is the same text)
        name_start = start + m.start(3)
        value_start = start + m.end()
        first = index.line_of(line_start)
        last = index.line_of(max(line_start, value_start + len(raw_value) - 1))
        lead = chunk[body:m.start(3) - len(m.group(2))]  # indent and "export "
        tail = chunk[m.end(3) + len(m.group(2)):m.end()] + raw_value  # " = " and the value

        def add(new: str, end: int = end, chunk: str = chunk, lead: str = lead, tail: str = tail,
                ) -> list[Edit] | None:
            row = f"{lead}{new}{tail}"
            if chunk.endswith(("\n", "\r")):
                return [Edit(end, end, row + nl)]
            return [Edit(end, end, nl + row)]

        def remove(line_start: int = line_start, end: int = end) -> list[Edit] | None:
            return [Edit(line_start, end, "")]

        sink.env(EnvAssign(binding.key, name_start, value, raw_value, value_start, None, add, remove,
                           also_lines=tuple(range(first + 1, last + 1))))
