"""YAML, read and edited line by line (comments, quoting and layout must survive a fix byte
for byte); flow collections (``[...]``, ``{...}``, on one line or across lines) are read
with tree-sitter-yaml (:mod:`._yaml_flow`), with Helm/Jinja templates masked.

Understood:
- Kubernetes ``env:`` items: ``- name: X`` with a sibling ``value:`` (or ``valueFrom:``,
  which is reported as computed), also the flow form ``- {name: X, value: "Y"}``;
- ``KEY: value`` map entries (compose ``environment:`` maps, Helm values, CI ``env:``
  blocks, any ``ENV_VARS:`` map) and ``- KEY=value`` / ``["KEY=value"]`` list items;
- argv lists and command strings under shell-ish keys (``command``, ``args``, ``script``,
  ``run``, ``entrypoint``, ``cmd``, ``*.sh`` keys of a ConfigMap): sequences, flow
  sequences, plain/quoted scalars and ``|``/``>`` block scalars, analysed as shell;
- ``backend: nccl-legacy``-style keys, and ``nccl-legacy`` anywhere as a whole scalar
  (flag only).
Block scalars under other keys are data (a ConfigMap's ``train.py``) and are skipped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ._checks import Collector, EnvAssign, mentions_backend
from ._grammar import Node
from ._shell import Ctx, Word, analyze_words, scan_shell_range
from ._text import Edit
from ._yaml_flow import Flows, Item

__all__ = ["scan_yaml"]

_LEAD = re.compile(r"( *)((?:-(?: +|$))*)")
_KEY = re.compile(
    r"""("(?:[^"\\]|\\.)*"|'(?:[^']|'')*'|[^\s#'"\[\]{},&*!|>%@`-][^#]*?|-[^\s#][^#]*?)"""
    r"""[ \t]*:(?:[ \t]+|$)"""
)
_BLOCK = re.compile(r"[|>][0-9+-]*[ \t]*(#.*)?$")
_ENV_ITEM = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=")
_FLOW_KEY = re.compile(r"[A-Za-z_][\w.-]*")
_SHELLISH = {"command", "args", "cmd", "entrypoint", "script", "run", "before_script",
             "after_script", "commands", "exec", "shell", "pre_script", "post_script"}


def _shellish(key: str) -> bool:
    k = key.lower()
    return k in _SHELLISH or k.endswith((".sh", ".bash", ".sbatch"))


@dataclass
class _Scalar:
    kind: str  # plain | single | double | block | flow | map | empty | other
    start: int  # column of the scalar (quote included)
    end: int  # column after it (closing quote included)
    inner_start: int
    inner_end: int
    value: str | None  # literal value (None when it has escapes or is not a scalar)

    @property
    def simple(self) -> bool:
        return self.kind in ("plain", "single", "double")


def _rest_is_comment(text: str, col: int) -> bool:
    rest = text[col:].strip()
    return not rest or rest.startswith("#")


def _scalar(text: str, col: int) -> _Scalar:
    n = len(text)
    if col >= n or text[col:].strip() == "" or text[col:].lstrip().startswith("#"):
        return _Scalar("empty", col, col, col, col, None)
    c = text[col]
    if c == '"':
        k = col + 1
        while k < n and text[k] != '"':
            k += 2 if text[k] == "\\" else 1
        if k >= n or not _rest_is_comment(text, k + 1):
            return _Scalar("other", col, n, col, n, None)
        inner = text[col + 1 : k]
        return _Scalar("double", col, k + 1, col + 1, k, None if "\\" in inner else inner)
    if c == "'":
        k = col + 1
        while k < n:
            if text[k] == "'":
                if k + 1 < n and text[k + 1] == "'":
                    k += 2
                    continue
                break
            k += 1
        if k >= n or not _rest_is_comment(text, k + 1):
            return _Scalar("other", col, n, col, n, None)
        inner = text[col + 1 : k]
        return _Scalar("single", col, k + 1, col + 1, k, inner.replace("''", "'"))
    if _BLOCK.match(text, col):
        return _Scalar("block", col, n, col, n, None)
    if c == "[":
        return _Scalar("flow", col, n, col, n, None)
    if c == "{":
        return _Scalar("map", col, n, col, n, None)
    if c in "&*!%@`":
        return _Scalar("other", col, n, col, n, None)
    m = re.search(r"[ \t]#", text[col:])
    end = col + m.start() if m else n
    while end > col and text[end - 1] in " \t":
        end -= 1
    return _Scalar("plain", col, end, col, end, text[col:end])


@dataclass
class _Line:
    n: int
    start: int  # absolute offset of the line
    text: str  # without the line break
    indent: int
    dashes: int  # number of `- ` markers
    dash_col: int  # column of the last dash (-1: none)
    key: str | None
    key_col: int  # column of the key (inner, after a quote)
    col: int  # column where the key or item scalar starts
    value: _Scalar

    @property
    def blank(self) -> bool:
        s = self.text.strip()
        return not s or s.startswith("#")


def _parse(n: int, start: int, text: str) -> _Line:
    m = _LEAD.match(text)
    assert m is not None
    indent = len(m.group(1))
    dashes = m.group(2).count("-")
    dash_col = m.start(2) + m.group(2).rstrip().rfind("-") if dashes else -1
    col = m.end()
    km = _KEY.match(text, col) if col < len(text) and text[col] != "#" else None
    if km is not None and not text.startswith("---", 0):
        raw_key = km.group(1)
        key = raw_key[1:-1] if raw_key[:1] in "\"'" else raw_key
        key_col = col + (1 if raw_key[:1] in "\"'" else 0)
        return _Line(n, start, text, indent, dashes, dash_col, key, key_col, col,
                     _scalar(text, km.end()))
    return _Line(n, start, text, indent, dashes, dash_col, None, col, col, _scalar(text, col))


_COMPOSE = re.compile(r"^services:", re.MULTILINE)


class _Yaml:
    def __init__(self, text: str, sink: Collector) -> None:
        self.text = text
        self.sink = sink
        # Block scalars: whole lines may be added/removed.  Compose interpolates ${X-d}
        # itself (from the host), so a shell ${NEW-$OLD} would not reach the shell there,
        # nor "$B" the service's environment.  Kubernetes expands $(B) in command/args.
        compose = _COMPOSE.search(text) is not None
        self.refs = "" if compose else "shell"
        self.ctx = Ctx(text, sink, quotable=not compose, refs=self.refs)
        # in one quoted/plain scalar
        self.str_ctx = Ctx(text, sink, lines_ok=False, quotable=False, refs=self.refs)
        self.argv_ctx = Ctx(text, sink, lines_ok=False, env_fixes=False, refs="" if compose else "k8s")
        index = self.ctx.index
        self.index = index
        self.lines = [_parse(n, index.starts[n], index.line_text(n)) for n in range(len(index))]
        self.consumed: set[int] = set()
        self.flows = Flows(text)

    # ------------------------------------------------------------------ helpers
    def abs(self, line: _Line, col: int) -> int:
        return line.start + col

    def line_insert(self, after: int, rows: list[str]) -> Edit:
        _, _, full = self.index.bounds(after)
        nl = self.ctx.nl
        body = nl.join(rows)
        if full == len(self.text) and not self.text.endswith("\n"):
            return Edit(full, full, nl + body)
        return Edit(full, full, body + nl)

    def drop(self, first: int, last: int) -> Edit:
        _, _, full = self.index.bounds(last)
        return Edit(self.index.starts[first], full, "")

    def ends_here(self, line: _Line) -> bool:
        """The entry's value does not continue on the following lines."""
        ref = line.key_col if line.key is not None else line.indent
        for nxt in self.lines[line.n + 1 :]:
            if nxt.blank:
                continue
            return nxt.indent <= ref or (nxt.dashes > 0 and nxt.dash_col <= ref)
        return True

    def sole_child(self, first: _Line, last: int) -> bool:
        """True when ``first``..``last`` is the only entry under its parent key, so that
        removing it would leave ``key:`` with a null value."""
        prev = next((p for p in reversed(self.lines[: first.n]) if not p.blank), None)
        if prev is None or prev.key is None or prev.value.kind != "empty":
            return False
        nxt = next((x for x in self.lines[last + 1 :] if not x.blank), None)
        if nxt is None:
            return True
        if first.dashes:
            return not (nxt.dashes and nxt.dash_col == first.dash_col)
        return not (nxt.indent == first.indent and not nxt.dashes)

    def word(self, line: _Line, s: _Scalar) -> Word:
        return Word(self.abs(line, s.inner_start), self.abs(line, s.inner_end),
                    line.text[s.inner_start : s.inner_end],
                    None if s.value is None or "$" in s.value else s.value)

    def shell_string(self, line: _Line, s: _Scalar, stray: bool) -> None:
        """Read a one-line scalar as a shell command (when its text is its value)."""
        self.shell_span(self.abs(line, s.inner_start), self.abs(line, s.inner_end), s.value, stray)

    def shell_span(self, start: int, end: int, value: str | None, stray: bool) -> None:
        if value is None or self.text[start:end] != value:
            return  # escapes: offsets would not map back
        ctx = self.str_ctx if stray else Ctx(self.text, self.sink, stray=False, lines_ok=False,
                                             quotable=False, refs=self.refs)
        scan_shell_range(ctx, start, end)

    # ------------------------------------------------------------------ walk
    def run(self) -> None:
        openers: list[tuple[int, str, int]] = []  # (indent, key, line) of nested values
        argv: dict[tuple[int, int], list[Word]] = {}
        n = 0
        total = len(self.lines)
        while n < total:
            line = self.lines[n]
            if line.blank:
                n += 1
                continue
            own = line.key_col if line.key is not None else (
                line.dash_col if line.dashes else line.indent)
            limit = line.dash_col if line.dashes else line.indent
            while openers and (openers[-1][0] > limit or (
                    openers[-1][0] == limit and not line.dashes)):
                openers.pop()
            parent = openers[-1][1] if openers else ""
            s = line.value
            if s.kind == "block":
                end = n + 1
                while end < total and (not self.lines[end].text.strip()
                                       or self.lines[end].indent > own):
                    end += 1
                last = end - 1
                while last > n and not self.lines[last].text.strip():
                    last -= 1
                key = line.key if line.key is not None else parent
                if last > n and _shellish(key):
                    _, stop, _ = self.index.bounds(last)
                    scan_shell_range(self.ctx, self.lines[n + 1].start, stop)
                n = end
                continue
            if line.key is not None:
                if line.dashes and n not in self.consumed:
                    self.k8s_item(line)
                if s.kind == "empty":
                    openers.append((line.key_col, line.key, n))
                elif n not in self.consumed:
                    self.entry(line, parent)
            elif line.dashes:
                if s.kind == "map" and not self.flow_pair(line):
                    self.flow_map(line)
                elif s.simple:
                    group = (openers[-1][2] if openers else -1, line.dash_col)
                    if _shellish(parent):
                        argv.setdefault(group, []).append(self.word(line, s))
                        if s.value and any(c in s.value for c in " ;&|"):
                            self.shell_string(line, s, stray=True)
                    else:
                        self.list_item(line)
                elif s.kind == "flow":
                    self.flow_seq(line, parent)
            if s.kind in ("flow", "map"):  # its lines are read: none of them is a key or an item
                node = self.flows.at(self.abs(line, s.start))
                if node is not None:
                    n = max(n, self.index.line_of(max(self.abs(line, s.start), self.flows.end(node) - 1)))
            n += 1
        for words in argv.values():
            analyze_words(self.argv_ctx, words)

    # ------------------------------------------------------------------ shapes
    def entry(self, line: _Line, parent: str) -> None:
        """``key: value`` on one line."""
        assert line.key is not None
        s = line.value
        if s.kind == "flow":
            self.flow_seq(line, line.key)
            return
        if s.kind == "map":
            self.flow_map(line)
            return
        if not s.simple:
            return
        if _shellish(line.key):
            self.shell_string(line, s, stray=True)
            return
        if s.value is not None and mentions_backend(s.value) and " " in s.value:
            self.shell_string(line, s, stray=False)
        key = line.key
        single = line.dashes == 0 and self.ends_here(line)
        name_start = self.abs(line, line.key_col)

        def add(new: str) -> list[Edit] | None:
            if not single:
                return None
            row = line.text[: line.key_col] + new + line.text[line.key_col + len(key) : s.end]
            return [self.line_insert(line.n, [row])]

        def remove() -> list[Edit] | None:
            if not single or self.sole_child(line, line.n):
                return None
            return [self.drop(line.n, line.n)]

        value = s.value
        if s.kind == "plain" and value is not None and value in ("~", "null"):
            return
        self.sink.env(EnvAssign(key, name_start, value, line.text[s.start : s.end],
                                self.abs(line, s.start), None, add, remove))

    def list_item(self, line: _Line) -> None:
        """``- KEY=value`` (compose ``environment:`` list) or a bare scalar item."""
        s = line.value
        raw = line.text[s.inner_start : s.inner_end]
        m = _ENV_ITEM.match(raw)
        if m is None or s.value is None or s.value != raw:
            if s.value is not None and mentions_backend(s.value):
                self.sink.env(EnvAssign("", self.abs(line, s.inner_start), s.value, raw,
                                        self.abs(line, s.inner_start)))
            return
        name = m.group(1)
        raw_value = raw[m.end() :]
        name_start = self.abs(line, s.inner_start)
        single = line.dashes == 1

        def add(new: str) -> list[Edit] | None:
            if not single:
                return None
            row = line.text[: s.inner_start] + new + line.text[s.inner_start + len(name) : s.end]
            return [self.line_insert(line.n, [row])]

        def remove() -> list[Edit] | None:
            if not single or self.sole_child(line, line.n):
                return None
            return [self.drop(line.n, line.n)]

        value = None if "$" in raw_value else raw_value
        self.sink.env(EnvAssign(name, name_start, value, raw_value, name_start + len(name) + 1,
                                None, add, remove))

    def flow_at(self, line: _Line, kind: str) -> Node | None:
        """The flow collection that is ``line``'s value (it may run over several lines)."""
        start = self.abs(line, line.value.start)
        node = self.flows.at(start)
        if node is not None and node.type != kind:
            return None
        if node is None or node.has_error:
            end = self.flows.end(node) if node is not None else line.start + len(line.text)
            chunk = self.text[start:end]
            if not chunk.startswith(("{{", "{%")) and (mentions_backend(chunk) or "NCCL" in chunk):
                self.skipped(start, end)
            return None
        return node

    def skipped(self, start: int, end: int) -> None:
        row, col = self.index.position(start)
        last = self.index.position(max(start, end - 1))[0]
        note = (f"{row}: cannot parse YAML from column {col} (tree-sitter-yaml): lines {row}-{last} are "
                "skipped, and no fix is applied to the file; fix the syntax there")
        if note not in self.sink.skipped:
            self.sink.skipped.append(note)

    def flow_word(self, item: Item) -> Word:
        return Word(item.inner_start, item.inner_end, self.text[item.inner_start : item.inner_end],
                    None if item.value is None or "$" in item.value else item.value)

    def flow_seq(self, line: _Line, key: str) -> None:
        """``key: [a, "b", 'c']`` (on one line or several): an argv under shell-ish keys, else items."""
        node = self.flow_at(line, "flow_sequence")
        if node is None:
            return
        items = self.flows.items(node)
        words = [self.flow_word(item) for item in items]
        if _shellish(key):
            for item in items:
                if item.value and any(c in item.value for c in " ;&|"):
                    self.shell_span(item.inner_start, item.inner_end, item.value, stray=True)
            analyze_words(self.argv_ctx, words)
            return
        for idx, (item, w) in enumerate(zip(items, words, strict=True)):
            if item.kind == "map" and item.node is not None:
                self.k8s_flow(item.node, None)  # `env: [{name: X, value: "1"}]`
                continue
            if w.value is None:
                continue
            m = _ENV_ITEM.match(w.raw)
            if m is None:
                if mentions_backend(w.value):
                    self.sink.env(EnvAssign(key, w.start, w.value, w.raw, w.start))
                continue
            name = m.group(1)
            quote = self.text[item.start] if item.kind != "plain" else ""

            def add(new: str, w: Word = w, name: str = name, end: int = item.end,
                    quote: str = quote) -> list[Edit] | None:
                return [Edit(end, end, f", {quote}{new}{w.raw[len(name):]}{quote}")]

            def remove(idx: int = idx) -> list[Edit] | None:
                if len(items) < 2:
                    return None
                if idx + 1 < len(items):  # up to the next item
                    return [Edit(items[idx].start, items[idx + 1].start, "")]
                return [Edit(items[idx - 1].end, items[idx].end, "")]

            value = None if "$" in w.value else w.value[m.end():]
            self.sink.env(EnvAssign(name, w.start, value, w.raw[m.end():], w.start + m.end(),
                                    None, add, remove))

    def flow_map(self, line: _Line) -> None:
        """``key: {a: 1, backend: nccl-legacy}`` (hydra/OmegaConf style, on one line or
        several): each ``k: scalar`` pair is reported in place; no line is added or removed."""
        node = self.flow_at(line, "flow_mapping")
        if node is None:
            return
        for key, val, _ in self.flows.pairs(node):
            if (key.kind != "plain" or key.value is None or not _FLOW_KEY.fullmatch(key.value)
                    or val is None or val.kind not in ("plain", "single", "double")):
                continue
            value = val.value
            if value is not None and ("\\" in value or "$" in value):
                value = None
            self.sink.env(EnvAssign(key.value, key.start, value, self.text[val.start : val.end], val.start))

    def flow_pair(self, line: _Line) -> bool:
        """``- {name: X, value: "Y"}``."""
        node = self.flow_at(line, "flow_mapping")
        if node is None:
            return False
        one_line = self.index.line_of(self.flows.end(node) - 1) == line.n
        return self.k8s_flow(node, line if one_line else None)

    def k8s_flow(self, node: Node, line: _Line | None) -> bool:
        """A flow mapping ``{name: X, value: "Y"}``: ``line`` is its line when it is alone on
        it as a sequence item (the fixes copy or drop that line; elsewhere there are none)."""
        pairs = {k.value: v for k, v, _ in self.flows.pairs(node) if k.kind == "plain" and k.value}
        name_item, value_item = pairs.get("name"), pairs.get("value")
        if (set(pairs) != {"name", "value"} or name_item is None or value_item is None
                or name_item.value is None or value_item.kind not in ("plain", "single", "double")):
            return False
        name = name_item.value
        raw_value = self.text[value_item.start : value_item.end]
        value = value_item.value
        if value is not None and ("$" in value or "\\" in value):
            value = None
        name_start = name_item.inner_start
        end = self.flows.end(node)

        def add(new: str) -> list[Edit] | None:
            if line is None:
                return None
            rel = name_start - line.start
            row = line.text[:rel] + new + line.text[rel + len(name) : end - line.start]
            return [self.line_insert(line.n, [row])]

        def remove() -> list[Edit] | None:
            if line is None or line.dashes != 1 or self.sole_child(line, line.n):
                return None
            return [self.drop(line.n, line.n)]

        self.sink.env(EnvAssign(name, name_start, value, raw_value, value_item.start, None, add, remove))
        return True

    def k8s_item(self, first: _Line) -> None:
        """A sequence item whose keys include ``name`` and ``value``/``valueFrom``."""
        c = first.key_col
        keys: dict[str, _Line] = {}
        assert first.key is not None
        keys[first.key] = first
        last = first.n
        for nxt in self.lines[first.n + 1 :]:
            if nxt.blank:
                continue
            if nxt.indent < c or (nxt.dashes and nxt.dash_col < c):
                break
            if nxt.indent == c and nxt.key is not None and not nxt.dashes:
                keys.setdefault(nxt.key, nxt)
            last = nxt.n
        name_line = keys.get("name")
        if name_line is None or not name_line.value.simple or name_line.value.value is None:
            return
        name = name_line.value.value
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.-]*", name):
            return
        value_line = keys.get("value")
        if value_line is None:
            if "valueFrom" in keys:
                self.consumed.add(name_line.n)
                self.sink.env(EnvAssign(name, self.abs(name_line, name_line.value.inner_start),
                                        None, "valueFrom", -1))
            return
        vs = value_line.value
        if vs.kind in ("block", "empty"):
            return
        # A templated value (`value: {{ .Values.x | quote }}`) is computed: reported, and
        # copied as written by the add fix, never interpreted.
        computed = not vs.simple
        self.consumed.update((name_line.n, value_line.n))
        pair = sorted((name_line.n, value_line.n))
        simple = (len(keys) == 2 and pair[1] == pair[0] + 1 and last == pair[1]
                  and self.ends_here(value_line))
        rows = [self.lines[pair[0]], self.lines[pair[1]]]

        def add(new: str) -> list[Edit] | None:
            if not simple:
                return None
            out = []
            for row in rows:
                end = row.value.end if row.value.simple else _code_end(row.text)
                text = row.text[:end]
                if row is name_line:
                    s = row.value.inner_start
                    text = text[:s] + new + text[s + len(name) :]
                out.append(text)
            return [self.line_insert(pair[1], out)]

        def remove() -> list[Edit] | None:
            if not simple or self.sole_child(self.lines[pair[0]], pair[1]):
                return None
            return [self.drop(pair[0], pair[1])]

        raw_value = value_line.text[vs.start : vs.end]
        if computed:
            raw_value = value_line.text[vs.start : _code_end(value_line.text)]
        self.sink.env(EnvAssign(
            name, self.abs(name_line, name_line.value.inner_start),
            None if computed else vs.value, raw_value, self.abs(value_line, vs.start), None,
            add, remove, also_lines=(value_line.n, name_line.n),
        ))


def _code_end(text: str) -> int:
    m = re.search(r"[ \t]#", text)
    end = m.start() if m else len(text)
    return len(text[:end].rstrip())


def scan_yaml(text: str, sink: Collector) -> None:
    _Yaml(text, sink).run()
