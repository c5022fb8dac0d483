"""Dockerfiles: ``ENV``/``ARG`` (``ENV K=V ...`` and the legacy ``ENV K V``), and the
commands of ``RUN``/``CMD``/``ENTRYPOINT`` in shell form (lexed as shell) or exec form
(a JSON argv).  A suppression comment may sit on the instruction's line (shell form
only: Docker passes it to the shell) or on the comment line directly above it."""

from __future__ import annotations

import json
import re

from ._checks import Collector, EnvAssign
from ._shell import (
    Ctx,
    Word,
    _read_word,
    analyze_words,
    balanced,
    continued_lines,
    scan_shell_range,
)
from ._text import Edit, LineIndex, remove_word

__all__ = ["scan_dockerfile"]

_INSTR = re.compile(r"\s*([A-Za-z]+)(\s+|$)")
_ASSIGN = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=")
_JSON_STR = re.compile(r'"(?:[^"\\]|\\.)*"')


def _instructions(index: LineIndex) -> list[tuple[int, int]]:
    """(first line, last line) of each instruction, following ``\\`` continuations."""
    out: list[tuple[int, int]] = []
    n = 0
    total = len(index)
    while n < total:
        line = index.line_text(n)
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            n += 1
            continue
        first = n
        while line.rstrip().endswith("\\") and n + 1 < total:
            n += 1
            line = index.line_text(n)
            while n + 1 < total and index.line_text(n).strip().startswith("#"):
                n += 1  # comment lines inside a continuation are dropped by Docker
                line = index.line_text(n)
        out.append((first, n))
        n += 1
    return out


def _exec_form(ctx: Ctx, start: int, end: int) -> bool:
    text = ctx.text
    body = text[start:end].strip()
    if not body.startswith("["):
        return False
    try:
        json.loads(body)
    except ValueError:
        return False
    words: list[Word] = []
    for m in _JSON_STR.finditer(text, start, end):
        raw = m.group(0)
        inner = raw[1:-1]
        value = None if "\\" in inner or "$" in inner else inner
        # An argv item is one word: `["bash", "-c", "export X=0 && ..."]` holds a script.
        if value is not None and any(c in inner for c in " ;&|"):
            quotable, ctx.quotable = ctx.quotable, False  # a `"` added here would end the JSON string
            scan_shell_range(ctx, m.start() + 1, m.end() - 1)
            ctx.quotable = quotable
        words.append(Word(m.start() + 1, m.end() - 1, inner, value))
    analyze_words(ctx, words)
    return True


def scan_dockerfile(text: str, sink: Collector) -> None:
    index = LineIndex(text)
    ctx = Ctx(text, sink)
    continued_lines(text, sink)
    for first, last in _instructions(index):
        if first > 0 and index.line_text(first - 1).lstrip().startswith("#"):
            for n in range(first, last + 1):
                sink.extra_suppress.setdefault(n, []).append(first - 1)
        start = index.starts[first]
        _, end, _ = index.bounds(last)
        m = _INSTR.match(text, start, end)
        if m is None:
            continue
        keyword = m.group(1).upper()
        body = m.end()
        if keyword in ("RUN", "CMD", "ENTRYPOINT"):
            if not _exec_form(ctx, body, end):
                scan_shell_range(ctx, body, end)
        elif keyword in ("ENV", "ARG"):
            _env(ctx, keyword, first, last, body, end)


def _env(ctx: Ctx, keyword: str, first: int, last: int, start: int, end: int) -> None:
    text = ctx.text
    index = ctx.index
    single_line = first == last
    # Legacy form `ENV NAME value with spaces`: the first word has no `=`.
    j, _ = _read_word(text, start, end)
    first_word = text[start:j]
    if keyword == "ENV" and "=" not in first_word and j < end:
        name = first_word
        raw_value = text[j:end].strip()
        value_start = text.index(raw_value, j) if raw_value else j
        value = None if "$" in raw_value or "\\" in raw_value else raw_value.strip("\"'")

        def add_legacy(new: str) -> list[Edit] | None:
            if not single_line:
                return None
            line_start, line_end, _ = index.bounds(first)
            row = text[line_start:start] + new + text[j:line_end]
            return [ctx_line_insert(ctx, first, row)]

        def remove_legacy() -> list[Edit] | None:
            if not single_line:
                return None
            return [_drop_lines(ctx, first, last)]

        ctx.sink.env(EnvAssign(name, start, value, raw_value, value_start, None, add_legacy,
                               remove_legacy))
        return
    words: list[Word] = []
    i = start
    while i < end:
        if text[i] in " \t\r\n\\":
            i += 1
            continue
        j, value = _read_word(text, i, end)
        if j == i:
            i += 1
            continue
        words.append(Word(i, j, text[i:j], value))
        i = j
    assigns = [w for w in words if _ASSIGN.match(w.raw)]
    for w in assigns:
        m = _ASSIGN.match(w.raw)
        assert m is not None
        name = m.group(1)
        raw_value = w.raw[m.end() :]
        value = w.value[m.end() :] if w.value is not None else None
        lone = single_line and len(words) == 1

        def add(new: str, w: Word = w, name: str = name, raw_value: str = raw_value,
                lone: bool = lone) -> list[Edit] | None:
            if ("$" in raw_value and name in raw_value) or not balanced(raw_value):
                return None
            if lone:
                line_start, line_end, _ = index.bounds(first)
                row = text[line_start : w.start] + new + text[w.start + len(name) : line_end]
                return [ctx_line_insert(ctx, first, row)]
            return [Edit(w.end, w.end, f" {new}={raw_value}")]

        def remove(w: Word = w, lone: bool = lone) -> list[Edit] | None:
            if lone:
                return [_drop_lines(ctx, first, last)]
            if len(words) == 1:
                return None
            return [remove_word(index, w.start, w.end)]

        ctx.sink.env(EnvAssign(name, w.start, value, raw_value, w.start + len(name) + 1,
                               None, add, remove))


def ctx_line_insert(ctx: Ctx, line: int, row: str) -> Edit:
    _, _, full = ctx.index.bounds(line)
    if full == len(ctx.text) and not ctx.text.endswith("\n"):
        return Edit(full, full, ctx.nl + row)
    return Edit(full, full, row + ctx.nl)


def _drop_lines(ctx: Ctx, first: int, last: int) -> Edit:
    start = ctx.index.starts[first]
    _, _, full = ctx.index.bounds(last)
    return Edit(start, full, "")
