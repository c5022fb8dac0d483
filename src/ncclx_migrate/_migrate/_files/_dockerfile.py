"""Dockerfiles: ``ENV`` (``ENV K=V ...`` and the legacy ``ENV K V``), ``ARG``, and the
commands of ``RUN``/``CMD``/``ENTRYPOINT`` in shell form (read with tree-sitter-bash, as
the shell kind) or exec form (a JSON argv).  A suppression comment may sit on the
instruction's line (shell form only: Docker passes it to the shell) or on the comment line
directly above it.

Instructions are split as Docker's own parser splits them, line by line: continuations
with the escape character (``\\``, or what a ``# escape=`` directive at the top sets;
a `` ` `` continuation reads as ``\\`` to the shell) and BuildKit here-documents
(``RUN <<EOF`` ... ``EOF``), whose body is the script where the command is only the
here-document or a shell reading it, and data otherwise (``COPY <<EOF file``, ``RUN
python3 <<EOF``).  tree-sitter-dockerfile (0.2.0) is not used: it reads ``ARG A=1 B``,
the legacy ``ENV K value with spaces`` and a `` ` `` continuation as errors.

An ``ARG`` is a build argument: it is in the environment of the build's ``RUN`` commands
only, never the container's, so it sets no job's environment (only its backend value is
checked).  It reaches the image through an ``ENV`` that names it (``ENV X=$A``,
``ENV X=${A:-d}``): that ``ENV`` is the finding, with the ``ARG``'s default as its
default.  Scope as Docker's: an ``ARG`` holds from its line to the end of its stage (a
stage ``FROM`` another one inherits its ``ARG``s and ``ENV``s); one declared before the
first ``FROM`` is seen in a stage only where the stage declares it again (``ARG A``), and
an ``ENV`` of the same name overrides an ``ARG``."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field

from ._bash import read_commands
from ._checks import Collector, EnvAssign
from ._shell import Ctx, Word, analyze_words, balanced, continued_lines, scan_shell_range
from ._text import Edit, LineIndex, remove_word

__all__ = ["scan_dockerfile"]

_ESCAPE = re.compile(r"#[ \t]*escape[ \t]*=[ \t]*([\\`])", re.IGNORECASE)
_DIRECTIVE = re.compile(r"#[ \t]*[A-Za-z]+[ \t]*=")  # `# syntax=...`, `# check=...`
_HEREDOC = re.compile(r"(?<!<)<<(?!<)(-?)([\"']?)([A-Za-z_][A-Za-z0-9_]*)\2")
_SHELLS = {"sh", "bash", "dash", "zsh", "ksh"}
_INSTR = re.compile(r"\s*([A-Za-z]+)(\s+|$)")
_ASSIGN = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=")
_JSON_STR = re.compile(r'"(?:[^"\\]|\\.)*"')
# FROM [--platform=...] image [AS name]
_FROM = re.compile(r"(?:--\S+\s+)*(\S+)(?:\s+as\s+(\S+))?\s*$", re.IGNORECASE)
# A whole value that is one variable: $A, ${A}, ${A:-word} (optionally double-quoted).
_REF = re.compile(r'"?\$(?:([A-Za-z_][A-Za-z0-9_]*)|\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}$`"\'\\]*))?\})"?')


@dataclass
class _Scope:
    """The variables of one build stage, as far as a value can be read from them."""

    args: dict[str, str | None] = field(default_factory=dict)  # ARG -> literal default
    envs: set[str] = field(default_factory=set)  # names an ENV set (they override an ARG)

    def copy(self) -> _Scope:
        return _Scope(dict(self.args), set(self.envs))

    def default_of(self, raw_value: str) -> str | None:
        """The value ``raw_value`` takes when the build passes no ``--build-arg``, where it
        is one ``ARG`` (``$A``, ``${A}``) or ``${A:-word}``; None when unknown."""
        m = _REF.fullmatch(raw_value.strip())
        if m is None:
            return None
        name = m.group(1) or m.group(2)
        word = m.group(3)
        if name in self.envs:
            return None  # an ENV's value (maybe itself computed) wins over the ARG
        default = self.args.get(name)
        if word is None:
            return default
        return default or word


@dataclass
class _Instr:
    first: int  # its first line (0-based)
    last: int  # its last line, following continuations (here-document bodies not included)
    heredocs: list[tuple[int, int]]  # (first body line, delimiter line) of each here-document


def escape_of(index: LineIndex) -> str:
    """The line-continuation character: ``\\``, or what a ``# escape=`` parser directive at the
    top of the file sets (Docker reads directives only before any other line)."""
    for n in range(len(index)):
        line = index.line_text(n).strip()
        m = _ESCAPE.fullmatch(line)
        if m is not None:
            return m.group(1)
        if not _DIRECTIVE.match(line):
            break
    return "\\"


def _instructions(index: LineIndex, escape: str) -> list[_Instr]:
    """Each instruction's lines, following ``escape`` continuations and, for ``RUN``, ``COPY``
    and ``ADD``, the here-documents it opens (``<<EOF`` ... ``EOF``: BuildKit's syntax)."""
    out: list[_Instr] = []
    n = 0
    total = len(index)
    while n < total:
        line = index.line_text(n)
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            n += 1
            continue
        first = n
        while line.rstrip().endswith(escape) and n + 1 < total:
            n += 1
            line = index.line_text(n)
            while n + 1 < total and index.line_text(n).strip().startswith("#"):
                n += 1  # comment lines inside a continuation are dropped by Docker
                line = index.line_text(n)
        instr = _Instr(first, n, [])
        if stripped.split(None, 1)[0].upper() in ("RUN", "COPY", "ADD"):
            head = index.text[index.starts[first] : index.bounds(n)[1]]
            for m in _HEREDOC.finditer(head):
                strip, delim = m.group(1) == "-", m.group(3)
                k = n + 1
                while k < total and (index.line_text(k).lstrip("\t") if strip else index.line_text(k)) != delim:
                    k += 1
                instr.heredocs.append((n + 1, min(k, total - 1)))
                n = k
        out.append(instr)
        n += 1
    return out


def _masked(text: str, index: LineIndex, instrs: list[_Instr], escape: str) -> str:
    """``text`` as the shell reads it: with ``# escape=`` `` ` `` a continuation is written
    `` `<newline> ``, which is ``\\<newline>`` to the shell (same length: offsets hold)."""
    if escape == "\\":
        return text
    chars = list(text)
    for instr in instrs:
        for n in range(instr.first, instr.last):
            _, end, _ = index.bounds(n)
            if text[end - 1 : end] == escape:
                chars[end - 1] = "\\"
    return "".join(chars)


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
    refs, ctx.refs = ctx.refs, ""  # no shell: "$B" in an exec-form argv stays as written
    analyze_words(ctx, words)
    ctx.refs = refs
    return True


def scan_dockerfile(text: str, sink: Collector) -> None:
    index = LineIndex(text)
    escape = escape_of(index)
    instrs = _instructions(index, escape)
    text = _masked(text, index, instrs, escape)
    index = LineIndex(text)
    ctx = Ctx(text, sink)
    continued_lines(text, sink)
    global_args = _Scope()  # ARGs before the first FROM
    scope: _Scope | None = None  # the current stage's (None before the first FROM)
    stages: dict[str, _Scope] = {}
    for instr in instrs:
        first, last = instr.first, instr.last
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
        if keyword == "RUN" and instr.heredocs:
            _heredoc_run(ctx, instr, body, end)
        elif keyword in ("RUN", "CMD", "ENTRYPOINT"):
            if not _exec_form(ctx, body, end):
                scan_shell_range(ctx, body, end)
        elif keyword == "FROM":
            fm = _FROM.match(text[body:end].strip())
            base = stages.get(fm.group(1).lower()) if fm else None
            scope = base.copy() if base is not None else _Scope()
            if fm and fm.group(2):
                stages[fm.group(2).lower()] = scope
        elif keyword in ("ENV", "ARG"):
            _env(ctx, keyword, first, last, body, end, scope or global_args,
                 global_args if scope is not None else None, escape)


def _heredoc_run(ctx: Ctx, instr: _Instr, body: int, end: int) -> None:
    """``RUN <<EOF`` ... ``EOF``: the shell gets the instruction with its here-documents.  A
    here-document is the script itself where the command is nothing else (BuildKit runs it
    with the default shell) or a shell reading it (``RUN bash -e <<EOF``); else it is data."""
    index = ctx.index
    _, stop, _ = index.bounds(instr.heredocs[-1][1])
    scan_shell_range(ctx, body, stop)
    rest = [w for w in _HEREDOC.sub(" ", ctx.text[body:end]).split() if w != "\\"]
    if rest and not (os.path.basename(rest[0]) in _SHELLS
                     and all(w.startswith("-") and "c" not in w for w in rest[1:])):
        return
    for body_line, delim_line in instr.heredocs:
        if body_line < delim_line:
            scan_shell_range(ctx, index.starts[body_line], index.starts[delim_line])


def _env(ctx: Ctx, keyword: str, first: int, last: int, start: int, end: int, scope: _Scope,
         global_args: _Scope | None, escape: str) -> None:
    text = ctx.text
    index = ctx.index
    single_line = first == last
    # Docker splits an ENV/ARG body into words as the shell does.
    words = [w for cmd in read_commands(text, start, end).commands for w in cmd.words]
    # Legacy form `ENV NAME value with spaces`: the first word has no `=`.
    j = words[0].end if words else start
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

        ctx.sink.env(EnvAssign(name, start, value, raw_value, value_start,
                               scope.default_of(raw_value) if value is None else None,
                               add_legacy, remove_legacy))
        scope.envs.add(name)
        return
    if keyword == "ARG":
        for w in words:  # `ARG A` in a stage takes the global default of A, if any
            if not _ASSIGN.match(w.raw) and w.value is not None:
                scope.args[w.value] = global_args.args.get(w.value) if global_args else None
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
            line_start, line_end, _ = index.bounds(index.line_of(w.start))
            if not single_line and not text[line_start:w.start].strip() and text[w.end:line_end].strip() in ("", "\\"):
                # one assignment per continued line: the new one gets a line of its own
                return [Edit(w.end, w.end, f" {escape}{ctx.nl}{text[line_start:w.start]}{new}={raw_value}")]
            return [Edit(w.end, w.end, f" {new}={raw_value}")]

        def remove(w: Word = w, lone: bool = lone) -> list[Edit] | None:
            if lone:
                return [_drop_lines(ctx, first, last)]
            if len(words) == 1:
                return None
            return [remove_word(index, w.start, w.end)]

        default = scope.default_of(raw_value) if value is None else None
        if keyword == "ARG":
            scope.args[name] = value if value is not None else default
        else:
            scope.envs.add(name)
        ctx.sink.env(EnvAssign(name, w.start, value, raw_value, w.start + len(name) + 1,
                               default, add, remove, sets_env=keyword == "ENV"))


def ctx_line_insert(ctx: Ctx, line: int, row: str) -> Edit:
    _, _, full = ctx.index.bounds(line)
    if full == len(ctx.text) and not ctx.text.endswith("\n"):
        return Edit(full, full, ctx.nl + row)
    return Edit(full, full, row + ctx.nl)


def _drop_lines(ctx: Ctx, first: int, last: int) -> Edit:
    start = ctx.index.starts[first]
    _, _, full = ctx.index.bounds(last)
    return Edit(start, full, "")
