"""Lines a C++ fix adds keep to the project's ``.clang-format`` ``ColumnLimit``.

The limit is read from the nearest ``.clang-format`` (or ``_clang-format``) above the file:
``ColumnLimit``, else the default of its ``BasedOnStyle`` (LLVM, Google, Chromium, Mozilla:
80; GNU: 79; Microsoft: 120; WebKit: none); no file, no limit.  A line a fix wrote that is
longer is broken where the grammar allows: after the ``=`` of a declaration or assignment,
after a ``,`` between arguments, before ``||`` / ``&&`` / ``?`` / ``:``, with clang-format's
continuation indent (4 columns); a trailing ``//`` comment moves to its own line above.
"""

from __future__ import annotations

import functools
import os

import yaml  # type: ignore[import-untyped]  # PyYAML: a dependency of libcst

from .._text import Edit, apply_edits
from ._parse import parse_snippet, walk

__all__ = ["column_limit", "fit", "fit_edits", "fit_touched"]

_STYLE_LIMITS = {"llvm": 80, "google": 80, "chromium": 80, "mozilla": 80, "gnu": 79, "microsoft": 120, "webkit": 0}
_PREFIX = b"void __ncclx_fit__() {\n"
_CONTINUATION = 4


@functools.cache
def _limit_in(folder: str) -> int | None:
    for name in (".clang-format", "_clang-format"):
        path = os.path.join(folder, name)
        if os.path.isfile(path):
            try:
                with open(path, encoding="utf-8") as fh:
                    docs = [d for d in yaml.safe_load_all(fh) if isinstance(d, dict)]
            except (OSError, UnicodeDecodeError, yaml.YAMLError):
                return None
            cpp = next((d for d in docs if str(d.get("Language", "Cpp")).lower() == "cpp"), docs[0] if docs else {})
            limit = cpp.get("ColumnLimit")
            if limit is None:
                limit = _STYLE_LIMITS.get(str(cpp.get("BasedOnStyle", "llvm")).lower(), 80)
            return int(limit) if isinstance(limit, int) and limit > 0 else None
    parent = os.path.dirname(folder)
    return None if parent == folder else _limit_in(parent)


def column_limit(path: str) -> int | None:
    """The ColumnLimit for ``path`` (None: no .clang-format above it, or no limit)."""
    return _limit_in(os.path.dirname(os.path.abspath(path)))


def fit(line: str, limit: int) -> str:
    """``line`` (one statement, no newline) broken into lines within ``limit`` where it can be."""
    if len(line) <= limit:
        return line
    indent = line[: len(line) - len(line.lstrip())]
    body = line.strip()
    comment = ""
    code = body.encode("utf-8")
    if len(code) != len(body):
        return line  # offsets below are bytes: only ASCII lines are broken
    tree = parse_snippet("x.cpp", _PREFIX + code + b"\n}")
    for n in walk(tree.root_node):
        if n.type == "comment" and n.end_byte - len(_PREFIX) == len(code):
            cut = n.start_byte - len(_PREFIX)
            comment, body = code[cut:].decode("utf-8"), code[:cut].decode("utf-8").rstrip()
            code = body.encode("utf-8")
            tree = parse_snippet("x.cpp", _PREFIX + code + b"\n}")
            break
    if tree.root_node.has_error:
        return line
    breaks: list[tuple[int, bool]] = []  # (byte offset in code, break before the token?)
    for n in walk(tree.root_node):
        at = n.start_byte - len(_PREFIX)
        if at < 0:
            continue
        if n.type in ("=",) and n.parent is not None and n.parent.type in ("init_declarator", "assignment_expression"):
            breaks.append((n.end_byte - len(_PREFIX), False))
        elif n.type == "," and n.parent is not None and n.parent.type == "argument_list":
            breaks.append((n.end_byte - len(_PREFIX), False))
        elif n.type in ("||", "&&", "?", ":") and n.parent is not None \
                and n.parent.type in ("binary_expression", "conditional_expression"):
            breaks.append((at, True))
    lines = [f"{indent}{comment}"] if comment else []
    rest, first = body, True
    pad = indent
    offset = 0  # of ``rest`` in ``code``
    while len(pad) + len(rest) > limit:
        room = limit - len(pad)
        cands = [b - offset for b, _ in breaks if 0 < b - offset <= room]
        if not cands:
            break
        cut = max(cands)
        head = rest[:cut].rstrip()
        lines.append(pad + head)
        skipped = len(rest[cut:]) - len(rest[cut:].lstrip())
        offset += cut + skipped
        rest = rest[cut + skipped:]
        if first:
            pad, first = indent + " " * _CONTINUATION, False
    lines.append(pad + rest)
    return "\n".join(lines)


def fit_edits(text: str, edits: list[Edit], limit: int) -> list[Edit]:
    """``edits`` (sorted, not overlapping) with each line of new text they write fitted to
    ``limit``: where a line changes, the edits on the lines of ``text`` it spans become one
    edit of those whole lines, so that the edits still say what changed (the fixed point maps
    positions from them, _lines.line_map_edits)."""
    nl = "\r\n" if "\r\n" in text else "\n"
    out: list[Edit] = []
    group: list[Edit] = []
    lo = hi = 0  # the lines of ``text`` that ``group`` touches

    def flush() -> None:
        if not group:
            return
        shifted = [Edit(e.start - lo, e.end - lo, e.text) for e in group]
        seg = apply_edits(text[lo:hi], shifted)
        fitted = fit_touched(seg, _new_spans(shifted), limit, nl)
        out.extend(group if fitted == seg else [Edit(lo, hi, fitted)])

    for e in edits:
        start = text.rfind("\n", 0, e.start) + 1
        if e.end > e.start and text[e.end - 1] == "\n":
            end = e.end  # whole lines: the next one is not touched
        else:
            at = text.find("\n", e.end)
            end = len(text) if at < 0 else at + 1
        if group and start < hi:
            hi = max(hi, end)
        else:
            flush()
            group, lo, hi = [], start, end
        group.append(e)
    flush()
    return out


def _new_spans(edits: list[Edit]) -> list[tuple[int, int]]:
    """Where each edit's text lands in the edited text."""
    out, shift = [], 0
    for e in edits:
        out.append((e.start + shift, e.start + shift + len(e.text)))
        shift += len(e.text) - (e.end - e.start)
    return out


def fit_touched(text: str, spans: list[tuple[int, int]], limit: int, nl: str | None = None) -> str:
    """``text`` with each line that a span (of new text) touches fitted to ``limit``
    (lines broken with ``nl``, by default the text's own line break)."""
    nl = nl or ("\r\n" if "\r\n" in text else "\n")
    starts = {text.rfind("\n", 0, s) + 1 for s, e in spans}
    for s, e in spans:  # every line inside a multi-line insertion too
        at = text.find("\n", s, e)
        while 0 <= at < e - 1:
            starts.add(at + 1)
            at = text.find("\n", at + 1, e)
    out = text
    for start in sorted(starts, reverse=True):
        end = out.find("\n", start)
        end = len(out) if end < 0 else end
        line = out[start:end].rstrip("\r")
        if len(line) > limit and not line.lstrip().startswith("#"):
            new = fit(line, limit).replace("\n", nl)
            out = out[:start] + new + out[start + len(line):]
    return out
