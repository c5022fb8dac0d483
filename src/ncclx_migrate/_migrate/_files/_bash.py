"""Shell text read with tree-sitter-bash: its simple commands as lists of words, each with
its offsets, its text and its literal value (None where the shell would expand something).

What the grammar reads as data stays out: here-document bodies, the patterns of a ``case``
item (values compared against), arithmetic, and what is inside ``$(..)``, backticks,
``${..}`` and quotes (a word holding them is one word with no literal value).  Words that
touch with no blank between them are one shell word (``$"x"``, ``a"b"c``).  Comments are
skipped, except batch directives (``#SBATCH --export=...``), whose rest is read as a command.

A region the grammar cannot read (an ERROR node holding no command it could read) is
skipped and returned, so that the scanner can say so when it holds what a rule looks for.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ._grammar import Node, Offsets, parse

__all__ = ["Command", "Word", "read_commands"]

_DIRECTIVES = ("#SBATCH", "#PBS", "#BSUB", "#FLUX:")
# Nodes that are one command's words in a row.
_SIMPLE = frozenset({"command", "declaration_command", "unset_command", "variable_assignment",
                     "variable_assignments", "test_command"})
# Nodes under a command that are not its words.
_NOT_WORDS = frozenset({"comment", "heredoc_redirect"})
# Nodes whose value is not a literal.
_DYNAMIC = frozenset({"simple_expansion", "expansion", "command_substitution", "process_substitution",
                      "arithmetic_expansion", "ansi_c_string", "translated_string", "array"})
# Test expressions, flattened into their operands and operators (as `[[ a == b ]]` is written).
_EXPRESSIONS = frozenset({"binary_expression", "unary_expression", "parenthesized_expression",
                          "negated_expression", "ternary_expression", "postfix_expression"})
_DQ_ESCAPES = '$`"\\'
_QUOTING = re.compile(r"[$`'\"\\(]")


@dataclass
class Word:
    start: int
    end: int
    raw: str
    value: str | None  # literal value; None when it contains an expansion


@dataclass
class Command:
    words: list[Word]
    directive: bool = False


@dataclass
class Read:
    commands: list[Command] = field(default_factory=list)
    unreadable: list[tuple[int, int]] = field(default_factory=list)  # (start, end) offsets


def _unescape(raw: str, quoted: bool) -> str | None:
    """The literal value of unquoted (or double-quoted) text without expansions; None if it
    has a ``$`` or a backtick."""
    out: list[str] = []
    k = 0
    while k < len(raw):
        c = raw[k]
        if c == "\\" and k + 1 < len(raw):
            nxt = raw[k + 1]
            if nxt == "\n":
                pass
            elif not quoted or nxt in _DQ_ESCAPES:
                out.append(nxt)
            else:
                out.append(raw[k : k + 2])
            k += 2
            continue
        if c in "$`":
            return None
        out.append(c)
        k += 1
    return "".join(out)


class _Reader:
    def __init__(self, text: str, offsets: Offsets, base: int) -> None:
        self.text = text  # the parsed part
        self.offsets = offsets
        self.base = base  # its offset in the whole text
        self.out = Read()

    def span(self, n: Node) -> tuple[int, int]:
        if self.offsets.ascii:
            return n.start_byte, n.end_byte
        return self.offsets.char(n.start_byte), self.offsets.char(n.end_byte)

    def raw(self, n: Node) -> str:
        a, b = self.span(n)
        return self.text[a:b]

    def value(self, n: Node) -> str | None:
        t = n.type
        if t in _DYNAMIC:
            return None
        raw = self.raw(n)
        if t == "raw_string":
            return raw[1:-1]
        if t == "string":
            if any(c.type not in ('"', "string_content") for c in n.children):
                return None
            return _unescape(raw[1:-1], quoted=True)
        if t == "concatenation":
            return self.joined(n.children)
        if t == "variable_assignment":
            op = next((c for c in n.children if c.type in ("=", "+=")), None)
            if op is None:
                return None
            rest = [c for c in n.children if c.start_byte >= op.end_byte]
            tail = self.joined(rest) if rest else ""
            a, _ = self.span(n)
            return None if tail is None else self.text[a : self.offsets.char(op.end_byte)] + tail
        return _unescape(raw, quoted=False)

    def joined(self, parts: list[Node]) -> str | None:
        values = [self.value(c) for c in parts]
        return None if any(v is None for v in values) else "".join(v for v in values if v is not None)

    def words(self, parts: list[Node]) -> list[Word]:
        """Touching nodes are one word."""
        groups: list[list[Node]] = []
        for p in parts:
            if groups and groups[-1][-1].end_byte == p.start_byte:
                groups[-1].append(p)
            else:
                groups.append([p])
        out = []
        for g in groups:
            a, _ = self.span(g[0])
            _, b = self.span(g[-1])
            raw = self.text[a:b]
            # (most words hold no quote, expansion or escape: their text is their value)
            value = self.joined(g) if _QUOTING.search(raw) else raw
            out.append(Word(self.base + a, self.base + b, raw, value))
        return out

    def parts(self, n: Node) -> list[Node]:
        """The nodes that make the words of the simple command ``n``, in order."""
        if n.type in ("variable_assignment",):
            return [n]
        if n.type == "test_command":
            return self.flat(n)
        out: list[Node] = []
        for c in n.children:
            if c.type in _NOT_WORDS:
                continue
            if c.type == "command_name" or c.type.endswith("_redirect"):
                out.extend(x for x in c.children if x.type not in _NOT_WORDS)
            else:
                out.append(c)
        return out

    def flat(self, n: Node) -> list[Node]:
        out: list[Node] = []
        for c in n.children:
            out.extend(self.flat(c) if c.type in _EXPRESSIONS else [c])
        return out

    def emit(self, parts: list[Node], directive: bool = False) -> None:
        words = self.words(parts)
        if words:
            self.out.commands.append(Command(words, directive))

    def skip(self, n: Node) -> None:
        a, b = self.span(n)
        self.out.unreadable.append((self.base + a, self.base + b))

    def walk(self, n: Node) -> None:
        t = n.type
        if n.has_error and (t in _SIMPLE or (t == "redirected_statement" and n.children
                            and n.children[0].type in _SIMPLE)):
            self.skip(n)  # a command the grammar read only in part: its words are not sure
        elif t in _SIMPLE:
            self.emit(self.parts(n))
        elif t == "redirected_statement":
            body = n.children[0] if n.children else None
            redirects = n.children[1:]
            if body is not None and body.type in _SIMPLE:
                self.emit(self.parts(body) + [x for r in redirects if r.type != "heredoc_redirect"
                                              for x in r.children if x.type not in _NOT_WORDS])
            elif body is not None:
                self.walk(body)
            for r in redirects:
                if r.type == "heredoc_redirect":  # `cat <<EOF | cmd`: cmd is in the redirect
                    for c in r.named_children:
                        if not c.type.startswith("heredoc_"):
                            self.walk(c)
        elif t == "comment":
            self.directive(n)
        elif t in ("for_statement", "select_statement"):
            loop = [c for c in n.children if c.type in ("do_group", "compound_statement")]
            self.emit([c for c in n.children if c not in loop and c.type != ";"])  # `for x in a b`
            for c in loop:
                self.walk(c)
        elif t == "c_style_for_statement":
            for c in n.children:
                if c.type in ("do_group", "compound_statement"):
                    self.walk(c)
        elif t == "case_statement":
            for c in n.children:
                if c.type == "case_item":
                    self.case_item(c)
        elif t == "ERROR" and not any(c.type in _SIMPLE or c.type.endswith("statement") for c in n.children):
            self.skip(n)
        elif t in _DYNAMIC or t in _EXPRESSIONS or t.startswith("heredoc_"):
            return
        else:
            for c in n.named_children:
                self.walk(c)

    def case_item(self, n: Node) -> None:
        seen = False
        for c in n.children:
            if seen:
                self.walk(c)
            seen = seen or c.type == ")"

    def directive(self, n: Node) -> None:
        a, b = self.span(n)
        for d in _DIRECTIVES:
            if self.text.startswith(d, a):
                line = self.text.rfind("\n", 0, a) + 1
                if self.text[line:a].strip(" \t;") == "":
                    inner = read_commands(self.text, a + len(d), b)
                    for cmd in inner.commands:
                        for w in cmd.words:
                            w.start += self.base
                            w.end += self.base
                        self.out.commands.append(Command(cmd.words, directive=True))
                return


def read_commands(text: str, start: int = 0, end: int | None = None) -> Read:
    """The simple commands in ``text[start:end]`` (offsets into ``text``), and the regions
    the grammar could not read."""
    end = len(text) if end is None else end
    part = text[start:end]
    root, offsets = parse("tree_sitter_bash", part)
    reader = _Reader(part, offsets, start)
    reader.walk(root)
    return reader.out
