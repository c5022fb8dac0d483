"""Shell and sbatch scripts, read with tree-sitter-bash (:mod:`._bash`): the command shapes
that set environment variables or pass a backend name.

Understood: ``export/declare -x/local/readonly X=Y``, prefix assignments ``X=Y cmd``,
``env [-i] [-u N] X=Y cmd``, ``sudo [opts] X=Y cmd``, ``eval`` of a literal string,
Slurm ``--export=ALL,X=Y`` (also in ``#SBATCH`` lines),
``docker/podman run -e X=Y`` / ``--env X=Y``, ``mpirun -x X=Y``, ``${X:=d}`` defaults,
``--backend nccl-legacy`` / ``--dist-backend=nccl-legacy`` and hydra-style
``trainer.backend=nccl-legacy``.  The grammar reads quotes, ``$(..)``, ``${..}``, backticks,
line continuations, comments and here-documents (skipped: their body is data), so that
nothing inside them is mistaken for a command.  The same analyser serves argv
lists from Dockerfiles, YAML and notebooks (:func:`analyze_words`).
"""

from __future__ import annotations

import os
import re

from ._bash import Command, Word, read_commands
from ._checks import (
    NCCL2,
    BackendUse,
    Collector,
    EnvAssign,
    backend_value_spans,
    is_backend_key,
    is_strong_device_list,
    mentions_backend,
)
from ._text import Edit, LineIndex, newline_of, remove_word

__all__ = ["Ctx", "Word", "analyze_words", "balanced", "lex", "scan_shell", "scan_shell_range"]

_ASSIGN = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=")
# ${NAME:-d} / ${NAME-d} / ${NAME:=d} as a whole value (optionally double-quoted)
_DEFAULTED = re.compile(r'^"?\$\{[A-Za-z_][A-Za-z0-9_]*:?[-=]([^}$`"\']*)\}"?$')
# ${NAME:=d} anywhere: assigns d when NAME is unset
_ASSIGN_DEFAULT = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*):?=([^}$`\"']*)\}")
_FLAG = re.compile(r"^--?[A-Za-z0-9_.-]*backend$", re.IGNORECASE)
_FLAG_EQ = re.compile(r"^(--?[A-Za-z0-9_.-]*backend)=", re.IGNORECASE)
_OVERRIDE = re.compile(r"^\+{0,2}([A-Za-z0-9_.-]*backend)=", re.IGNORECASE)
_RESERVED = {"if", "then", "else", "elif", "do", "while", "until", "{", "!", "time", "nohup", "exec"}
_DECLARE = {"export", "declare", "typeset", "local", "readonly"}
_SPECIAL = {".", ":", "source", "eval", "set", "trap", "unset", "export", "readonly", "shift"}
_PLAIN = re.compile(r"^[A-Za-z0-9_./:@%+,=-]*$")  # means the same inside "${X-...}"
_ENV_FLAGS = {"-e", "--env", "-x"}  # docker/podman/apptainer run -e, mpirun -x
_SHELLS = {"bash", "sh", "zsh", "dash", "ksh"}
_DASH_C = re.compile(r"^-[a-z]*c$")  # -c, -lc, -ec, -xc
_PRINTERS = {"echo", "printf", "logger", "log", "info", "warn", "die"}  # messages, not argv
_ENV_ARG = {"-u", "--unset", "-C", "--chdir"}  # env options that take the next word
# sudo options that take a value (`-u root`, `-uroot`, `--user root`, `--user=root`)
_SUDO_ARG = set("CDgpRrtTUu")
_SUDO_LONG_ARG = {"--close-from", "--chdir", "--group", "--host", "--prompt", "--chroot",
                  "--role", "--type", "--command-timeout", "--other-user", "--user"}
_TESTS = {"[", "[[", "test"}  # `[ "$B" = nccl-legacy ]`: a value compared against, not passed
_BODY_END = re.compile(r"^\s*(fi|done|else|elif|esac|\}|;;)\b")
# A whole word that is one variable's value, by who expands it: the shell ($B, ${B},
# "$B") or Kubernetes in a container's command/args ($(B)).
_REFS = {
    "shell": re.compile(r'"?\$(?:([A-Za-z_][A-Za-z0-9_]*)|\{([A-Za-z_][A-Za-z0-9_]*)\})"?'),
    "k8s": re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)()"),
}


class Ctx:
    """What the analyser needs to build edits: the whole text and where findings go."""

    def __init__(self, text: str, sink: Collector, *, stray: bool = True, in_cell: str = "",
                 lines_ok: bool = True, env_fixes: bool = True, quotable: bool = True,
                 refs: str = "shell") -> None:
        self.text = text
        self.index = LineIndex(text)
        self.nl = newline_of(text)
        self.sink = sink
        self.stray = stray  # flag bare `nccl-legacy` words
        self.in_cell = in_cell
        self.lines_ok = lines_ok  # whole-line insert/delete allowed (False inside YAML strings)
        self.env_fixes = env_fixes  # False for argv lists (a YAML sequence item is one word)
        # `"` and `$` may be added (not inside a double-quoted `bash -c "..."` or YAML scalar)
        self.quotable = quotable
        # The safe add form NEW="${NEW-$OLD}" may be offered (False inside an `eval` string:
        # fixes there stay unsafe)
        self.defers = True
        # `eval` and its string when that string is one command: removing the command
        # removes the whole `eval` statement (not `eval ":"`)
        self.outer: list[Word] | None = None
        # Which variable references expand here ("shell", "k8s"; "" where none does:
        # an exec-form argv, a compose file that interpolates from the host)
        self.refs = refs
        # A script without a `#!` line may be sourced (`. env.sh`): an export there leaks into
        # the sourcing shell, which may set the old name again afterwards (scan_shell sets it).
        self.sourced = False

    def ref(self, raw: str) -> str | None:
        """The variable ``raw`` (a whole word or value) expands to, if it is just that."""
        pattern = _REFS.get(self.refs)
        m = pattern.fullmatch(raw) if pattern is not None else None
        return (m.group(1) or m.group(2)) if m is not None else None


def lex(text: str, start: int = 0, end: int | None = None) -> list[Command]:
    """Commands (lists of words) in ``text[start:end]``; offsets are absolute (_bash)."""
    return read_commands(text, start, end).commands



# -------------------------------------------------------------------------- analysis
def balanced(raw: str) -> bool:
    """Every quote in ``raw`` is closed (an unterminated one would swallow what we add)."""
    quote = ""
    k = 0
    while k < len(raw):
        c = raw[k]
        if c == "\\" and quote != "'":
            k += 2
            continue
        if quote:
            if c == quote:
                quote = ""
        elif c in "'\"":
            quote = c
        k += 1
    return not quote


def _copyable(raw_value: str, old: str, inline: bool) -> bool:
    if "$(" in raw_value or "`" in raw_value or not balanced(raw_value):
        return False  # a command substitution may not give the same value twice
    return not (inline and re.search(r"\$\{?" + re.escape(old) + r"\b", raw_value))


def _line_insert(ctx: Ctx, line: int, new_line: str) -> Edit:
    _, _, full = ctx.index.bounds(line)
    if full == len(ctx.text) and not ctx.text.endswith("\n"):
        return Edit(full, full, ctx.nl + new_line)
    return Edit(full, full, new_line + ctx.nl)


def _lone_line(ctx: Ctx, words: list[Word]) -> int | None:
    """The 0-based line when ``words`` are the only code on one physical line."""
    if not ctx.lines_ok:
        return None
    line = ctx.index.line_of(words[0].start)
    if ctx.index.line_of(words[-1].end) != line:
        return None
    start, end, _ = ctx.index.bounds(line)
    before = ctx.text[start : words[0].start]
    after = ctx.text[words[-1].end : end].strip()
    if before.strip() or (after and not after.startswith("#")):
        return None
    return line


def _remove_word(ctx: Ctx, start: int, end: int) -> Edit:
    return remove_word(ctx.index, start, end)


def _drop_statement(ctx: Ctx, words: list[Word]) -> list[Edit]:
    """Remove a whole simple command, keeping the script valid."""
    line = _lone_line(ctx, words)
    nxt = ""
    if line is not None:
        n = line + 1
        while n < len(ctx.index) and not ctx.index.line_text(n).strip():
            n += 1
        nxt = ctx.index.line_text(n) if n < len(ctx.index) else ""
    if line is not None and not _BODY_END.match(nxt):
        start = ctx.index.starts[line]
        _, _, full = ctx.index.bounds(line)
        return [Edit(start, full, "")]
    # `:` is the shell's no-op: it keeps `then ... fi` bodies and `X=0; cmd` valid.
    return [Edit(words[0].start, words[-1].end, ":")]


def _emit_word_assign(ctx: Ctx, words: list[Word], k: int, mode: str) -> None:
    """``words[k]`` is NAME=VALUE. ``mode``: "statement" (export/prefix), "env" (after
    `env`), or a flag such as "-e" / "--env=" for runner options."""
    w = words[k]
    off = len("--env=") if mode == "--env=" else 0
    m = _ASSIGN.match(w.raw, off)
    if m is None:
        return
    name = m.group(1)
    raw_value = w.raw[m.end() :]
    value = w.value[m.end() :] if w.value is not None else None
    dm = _DEFAULTED.match(raw_value) if value is None else None
    flag_word = words[k - 1] if mode in _ENV_FLAGS and k > 0 else None
    prefix = "--env=" if mode == "--env=" else ""
    name_start = w.start + off
    quotable = ctx.quotable  # read now: the edits are built after the scan
    outer = ctx.outer

    def add(new: str) -> list[Edit] | None:
        lone = _lone_line(ctx, words) if mode == "statement" else None
        if lone is not None and all(_ASSIGN.match(x.raw) or x.value in _DECLARE for x in words):
            if not _copyable(raw_value, name, inline=False):
                return None
            if sum(1 for x in words if _ASSIGN.match(x.raw)) == 1:
                start, _, _ = ctx.index.bounds(lone)
                seg = ctx.text[start : w.end]
                rel = name_start - start
                return [_line_insert(ctx, lone, seg[:rel] + new + seg[rel + len(name) :])]
        if not _copyable(raw_value, name, inline=True):
            return None
        lead = f" {flag_word.raw} " if flag_word is not None else " " + prefix
        return [Edit(w.end, w.end, f"{lead}{new}={raw_value}")]

    def keep_add(new: str, alone: bool) -> list[Edit] | None:
        """``NEW="${NEW-$OLD}"``: NEW keeps an inherited value, else takes OLD's; torch
        reads NEW, then OLD, so it reads what it read before whatever the job inherits."""
        body = [x for x in words if x.value not in _RESERVED]
        if not quotable or not body:
            return None
        head = [x for x in body if not _ASSIGN.match(x.raw)]
        if mode == "env":  # `env [X=1 ...] cmd`: no -i/-u in front (they change what is inherited)
            # A bare `env` only: the differential harness (tests/migrate) checks that form;
            # `/usr/bin/env` would run outside it.
            at = next((n for n, x in enumerate(words) if x.value == "env"), None)
            if at is None or not all(_ASSIGN.match(x.raw) for x in words[at + 1 : k]):
                return None
        elif mode != "statement":
            return None  # docker -e / mpirun -x: NEW reaches the job only from this flag
        exported = bool(head) and head[0].value == "export" and len(head) == 1
        # Prefix assignments before a special builtin (`X=1 . ./env.sh`) persist in POSIX sh.
        persists = mode == "statement" and (not head or exported or head[0].value in _SPECIAL)
        if persists and (not alone or ctx.sourced):
            return None  # a later set or unset of OLD would no longer reach what torch reads
        lone = _lone_line(ctx, words) if persists and body[0] is words[0] else None
        if lone is not None:
            start, _, _ = ctx.index.bounds(lone)
            lead = ctx.text[start : body[0].start] + ("export " if exported else "")
            return [_line_insert(ctx, lone, f'{lead}{new}="${{{new}-${name}}}"')]
        if head and not (mode == "env" or not persists or exported):
            return None
        if not persists and head and head[0].value in _DECLARE:
            return None  # declare/local/readonly: scoping and attributes differ
        if value is None or value != raw_value.strip('"') or not _PLAIN.match(value):
            return None  # only a plain literal can be repeated inside ${NEW-...}
        return [Edit(w.end, w.end, f' {new}="${{{new}-{value}}}"')]

    def remove() -> list[Edit] | None:
        if flag_word is not None:
            return [_remove_word(ctx, flag_word.start, w.end)]
        if mode == "--env=":
            return [_remove_word(ctx, w.start, w.end)]
        body = list(words)
        while body and body[0].value in _RESERVED:  # `then export X=0`
            body.pop(0)
        head = [x for x in body if not _ASSIGN.match(x.raw)]
        assigns = [x for x in body if _ASSIGN.match(x.raw)]
        declare_only = bool(head) and head[0].value in _DECLARE and all(
            (h.value or "").startswith("-") for h in head[1:])
        if len(assigns) == 1 and (not head or (mode == "statement" and declare_only)):
            # Nothing useful would be left: `export` alone prints every variable.
            return _drop_statement(ctx, outer or body)
        if mode == "statement" and head and head[0].value in _DECLARE and len(assigns) == 1:
            return None
        return [_remove_word(ctx, w.start, w.end)]

    if value is None and is_backend_key(name):  # DIST_BACKEND="$B"
        ref = ctx.ref(raw_value)
        if ref is not None:
            ctx.sink.backend_ref(ref, name)
    ctx.sink.env(EnvAssign(
        name, name_start, value, raw_value, name_start + len(name) + 1,
        dm.group(1) if dm else None, add if ctx.env_fixes else None,
        remove if ctx.env_fixes else None, in_cell=ctx.in_cell,
        keep_add=keep_add if ctx.env_fixes and ctx.defers else None,
        unsafe_why=_SOURCED.format(old=name) if ctx.sourced and mode == "statement" else "",
    ))


def _emit_list(ctx: Ctx, w: Word, offset: int) -> None:
    """Slurm ``--export=ALL,X=Y,...``: ``w.raw[offset:]`` is the list."""
    body = w.raw[offset:]
    base = w.start + offset
    if len(body) >= 2 and body[0] == body[-1] and body[0] in "'\"":
        body = body[1:-1]
        base += 1
    if "$(" in body or "`" in body:
        return
    items: list[tuple[int, str]] = []
    pos = 0
    for part in body.split(","):
        items.append((pos, part))
        pos += len(part) + 1
    for idx, (pos, part) in enumerate(items):
        m = _ASSIGN.match(part)
        if m is None:
            continue
        name = m.group(1)
        raw_value = part[m.end() :]
        value = None if "$" in raw_value or "'" in raw_value or '"' in raw_value else raw_value
        start = base + pos
        end = start + len(part)

        def add(new: str, raw_value: str = raw_value, end: int = end, name: str = name,
                ) -> list[Edit] | None:
            if not _copyable(raw_value, name, inline=True):
                return None
            return [Edit(end, end, f",{new}={raw_value}")]

        def remove(idx: int = idx, start: int = start, end: int = end) -> list[Edit] | None:
            if len(items) == 1:
                return None  # `--export=X=0` alone means "export only X": not ours to change
            if idx > 0:
                return [Edit(start - 1, end, "")]
            return [Edit(start, end + 1, "")]

        dm = _DEFAULTED.match(raw_value) if value is None else None
        ctx.sink.env(EnvAssign(name, start, value, raw_value, start + len(name) + 1,
                               dm.group(1) if dm else None, add if ctx.env_fixes else None,
                               remove if ctx.env_fixes else None, in_cell=ctx.in_cell))


def _backend_in_word(ctx: Ctx, w: Word, value_offset: int, where: str, fixable: bool,
                     stray: bool = False) -> bool:
    """Report watched backend names in ``w`` whose value starts at ``value_offset`` of raw."""
    if w.value is None:
        return False
    raw_tail = w.raw[value_offset:]
    # Flags and override keys are unquoted, so the value is the literal's tail.
    value = w.value[value_offset:] if value_offset else w.value
    spans = backend_value_spans(value)
    if stray:  # a bare "nccl2" argument could be anything (a run name); lists are torch's
        spans = [(s, n) for s, n in spans if n != NCCL2 or ":" in value]
    if not spans or value not in raw_tail:
        return False
    base = w.start + value_offset + raw_tail.find(value)
    for s, name in spans:
        ctx.sink.backend(BackendUse(base + s, fixable, where, in_cell=ctx.in_cell, name=name))
    return True


def analyze_words(ctx: Ctx, words: list[Word], directive: bool = False) -> None:
    """Find env assignments and backend values in one simple command (an argv)."""
    if not words:
        return
    i = 0
    while i < len(words) and words[i].value in _RESERVED:
        i += 1
    done: set[int] = set()
    if not directive:
        while i < len(words) and _ASSIGN.match(words[i].raw):
            _emit_word_assign(ctx, words, i, "statement")
            done.add(i)
            i += 1
        head = os.path.basename(words[i].value or "") if i < len(words) else ""
        if head in _DECLARE:
            for k in range(i + 1, len(words)):
                if _ASSIGN.match(words[k].raw):
                    _emit_word_assign(ctx, words, k, "statement")
                    done.add(k)
        elif head == "env":
            _env_command(ctx, words, i, "env", done)
        elif head == "sudo":
            # `sudo [opts] X=v cmd` sets X for cmd (sudo's policy may refuse it: then sudo
            # fails).  Fixes stay unsafe: what sudo passes on of the caller's environment
            # (env_reset, env_keep, -E) is its policy's, so NEW="${NEW-v}" would not defer.
            k = _sudo_command(words, i)
            while k < len(words) and _ASSIGN.match(words[k].raw):
                _emit_word_assign(ctx, words, k, "sudo")
                done.add(k)
                k += 1
            if k < len(words) and os.path.basename(words[k].value or "") == "env":
                _env_command(ctx, words, k, "sudo", done)
        elif head == "eval":
            _eval(ctx, words, i)
            done.update(range(i + 1, len(words)))
    for k in range(i, len(words)):
        w = words[k]
        v = w.value
        raw = w.raw
        for dm in _ASSIGN_DEFAULT.finditer(raw):  # `: ${X:=0}` assigns when unset
            ctx.sink.env(EnvAssign(dm.group(1), w.start + dm.start(1), None, dm.group(0), -1,
                                   dm.group(2), in_cell=ctx.in_cell))
        if k in done:
            continue
        if (v is not None and _DASH_C.match(v) and k > i and k + 1 < len(words)
                and os.path.basename(words[k - 1].value or "") in _SHELLS):
            _scan_script_word(ctx, words[k + 1])
            done.add(k + 1)
            continue
        if raw.startswith("--export="):
            _emit_list(ctx, w, len("--export="))
            continue
        if v == "--export" and k + 1 < len(words):
            _emit_list(ctx, words[k + 1], 0)
            done.add(k + 1)
            continue
        if v in _ENV_FLAGS and k + 1 < len(words) and _ASSIGN.match(words[k + 1].raw):
            _emit_word_assign(ctx, words, k + 1, v)
            done.add(k + 1)
            continue
        if raw.startswith("--env=") and _ASSIGN.match(raw[len("--env="):]):
            _emit_word_assign(ctx, words, k, "--env=")
            continue
        if v is None:
            _backend_ref(ctx, words, k)
            continue
        if not mentions_backend(v):
            continue
        m = _FLAG_EQ.match(raw) or _OVERRIDE.match(raw)
        if m is not None:
            if _backend_in_word(ctx, w, m.end(), m.group(1), True):
                continue
        prev = words[k - 1] if k > 0 else None
        if prev is not None and prev.value is not None and _FLAG.match(prev.value):
            if _backend_in_word(ctx, w, 0, prev.value, True):
                continue
        tested = words[i].value in _TESTS or words[-1].value in ("]", "]]")  # `[[ a && b ]]`
        if ctx.stray and words[i].value not in _PRINTERS and not tested:
            _backend_in_word(ctx, w, 0, "an argument", is_strong_device_list(v), stray=True)


def _env_command(ctx: Ctx, words: list[Word], at: int, mode: str, done: set[int]) -> None:
    """``env [-i] [-u N] [-C DIR] X=v ... cmd``: ``words[at]`` is ``env``."""
    k = at + 1
    while k < len(words):
        opt = words[k].value or ""
        if _ASSIGN.match(words[k].raw):
            _emit_word_assign(ctx, words, k, mode)
            done.add(k)
        elif opt in _ENV_ARG:
            k += 1
        elif not opt.startswith("-"):
            break
        k += 1


def _sudo_command(words: list[Word], at: int) -> int:
    """The index of the first word after sudo's options (``words[at]`` is ``sudo``)."""
    k = at + 1
    while k < len(words):
        opt = words[k].value
        if opt is None or not opt.startswith("-") or opt == "-":
            return k
        if opt == "--":
            return k + 1
        if opt.startswith("--"):
            k += 2 if opt in _SUDO_LONG_ARG else 1
            continue
        letters = opt[1:]
        takes = next((n for n, ch in enumerate(letters) if ch in _SUDO_ARG), -1)
        k += 2 if takes == len(letters) - 1 else 1  # `-u root`, but `-uroot` is one word
    return k


def _eval(ctx: Ctx, words: list[Word], at: int) -> None:
    """``eval 'export X=v'`` / ``eval export X=v``: a literal string is run as shell code
    in this shell.  Its fixes stay unsafe (none of the safe add form)."""
    args = words[at + 1 :]
    defers, outer, ctx.defers = ctx.defers, ctx.outer, False
    if len(args) == 1 and args[0].raw[:1] in "'\"":
        one = len(lex(ctx.text, args[0].start + 1, args[0].end - 1)) == 1
        _scan_script_word(ctx, args[0], words[at:] if one else None)
    elif args and all(w.value is not None and w.value == w.raw for w in args):
        ctx.outer = words[at:]
        analyze_words(ctx, args)  # plain words: eval joins them and reads the same words
    ctx.defers, ctx.outer = defers, outer


def _backend_ref(ctx: Ctx, words: list[Word], k: int) -> None:
    """``--backend "$B"``, ``--dist-backend=$B``, ``trainer.backend=${B}``: B's value is
    a backend value (the assignment of B is where it is reported)."""
    raw = words[k].raw
    m = _FLAG_EQ.match(raw) or _OVERRIDE.match(raw)
    if m is not None:
        name = ctx.ref(raw[m.end() :])
        if name is not None:
            ctx.sink.backend_ref(name, m.group(1))
        return
    prev = words[k - 1].value if k > 0 else None
    name = ctx.ref(raw)
    if name is not None and prev is not None and _FLAG.match(prev):
        ctx.sink.backend_ref(name, prev)


def _scan_script_word(ctx: Ctx, w: Word, outer_cmd: list[Word] | None = None) -> None:
    """The script of ``bash -c '...'`` / ``sh -c "..."`` / ``eval '...'``: one quoted word
    holding commands; ``outer_cmd`` is the ``eval`` command when the script is one command."""
    raw = w.raw
    if len(raw) < 2 or raw[0] not in "'\"" or raw[-1] != raw[0]:
        return
    if raw[0] == "'":
        if raw.find("'", 1) != len(raw) - 1:
            return
    else:
        k = 1
        while k < len(raw) - 1:
            if raw[k] == "\\":
                k += 2
                continue
            if raw[k] == '"':
                return  # the word is several quoted pieces
            k += 1
    quotable, outer = ctx.quotable, ctx.outer
    ctx.quotable = quotable and raw[0] == "'"
    ctx.outer = outer_cmd  # None for `bash -c`: its commands are not an eval's
    scan_shell_range(ctx, w.start + 1, w.end - 1)
    ctx.quotable, ctx.outer = quotable, outer


def scan_shell_range(ctx: Ctx, start: int, end: int) -> None:
    read = read_commands(ctx.text, start, end)
    for cmd in read.commands:
        analyze_words(ctx, cmd.words, cmd.directive)
    for a, b in read.unreadable:
        unreadable(ctx.sink, ctx.index, a, b, "shell", "tree-sitter-bash")


def unreadable(sink: Collector, index: LineIndex, start: int, end: int, what: str, grammar: str) -> None:
    """A region the grammar could not read is skipped: one warning where it holds what a rule
    looks for (the rest of the file is checked, but not fixed: Collector.skipped); else it
    costs nothing."""
    chunk = sink.text[start:end]
    if mentions_backend(chunk) or "NCCL" in chunk:
        row, col = index.position(start)
        line = (f"{row}: cannot parse {what} from column {col} ({grammar}): lines {row}-"
                f"{index.position(max(start, end - 1))[0]} are skipped, and no fix is applied to the file; fix the syntax there")
        if line not in sink.skipped:
            sink.skipped.append(line)


def continued_lines(text: str, sink: Collector) -> None:
    """A command continued with a trailing backslash can hold a comment only on its last
    line, so an ignore there covers each of its lines (0-based, as ``extra_suppress``)."""
    lines = text.splitlines()
    n = 0
    while n < len(lines):
        last = n
        while last < len(lines) - 1 and (len(lines[last]) - len(lines[last].rstrip("\\"))) % 2 == 1:
            last += 1
        for k in range(n, last):
            sink.extra_suppress.setdefault(k, []).append(last)
        n = last + 1


_SOURCED = (" This file looks sourced (`. file`: no #! line, a comment that says so, or nothing in it but "
            "settings): a set of {old} that the sourcing shell makes afterwards would no longer reach torch "
            "once the new name is exported here, so an export of the new name is never safe in it.")
# First words of lines that only set up a shell: a script made of nothing else has no effect
# when run, so it is meant to be sourced.
_SETUP = re.compile(
    r"\s*(?:(?:export|declare|typeset|readonly|local|unset|set|shopt|umask|ulimit|echo|printf|true|false"
    r"|if|then|else|elif|fi|for|while|until|do|done|case|esac|return|test|source|alias|cd)(?![\w-])"
    r"|[:.](?=\s|$)|[{}]|\[\[?|;;|\))")
# Leading assignments; what follows them on the line is a command run with them (`X=1 cmd`).
_ASSIGNS = re.compile(r"""(?:[A-Za-z_][A-Za-z0-9_]*(?:\[[^\]]*\])?\+?=(?:"[^"]*"|'[^']*'|[^\s;&|"']+)*\s*)+""")
_SAYS_SOURCED = re.compile(r"(?im)^[ \t]*#.*\b(?:source[ds]?|sourcing)\b(?!:)")


def looks_sourced(text: str) -> bool:
    """Whether a shell script is probably sourced rather than run."""
    if not text.startswith("#!") or _SAYS_SOURCED.search(text):
        return True
    continued = False
    for line in text.splitlines()[1:]:
        stripped = line.strip()
        if continued or not stripped or stripped.startswith("#"):
            continued = continued and stripped.endswith("\\")
            continue
        m = _ASSIGNS.match(stripped)
        rest = stripped[m.end():] if m else stripped
        if rest and not rest.startswith(("#", ";")) and not _SETUP.match(rest):
            return False  # it runs a program: run, not sourced
        continued = stripped.endswith("\\")
    return True


def scan_shell(path: str, text: str, sink: Collector) -> None:
    continued_lines(text, sink)
    ctx = Ctx(text, sink)
    ctx.sourced = looks_sourced(text)
    scan_shell_range(ctx, 0, len(text))

