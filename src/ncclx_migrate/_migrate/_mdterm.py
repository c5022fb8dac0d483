"""A rule's markdown documentation laid out for a terminal (``ncclx explain`` on a tty).

markdown-it-py parses (CommonMark plus tables); this module only lays the parsed blocks out:
paragraphs and list items wrapped to the width, headings in bold, code blocks indented and
kept whole (a code line longer than the width runs past it, as ``less`` and ``man`` show it,
so that pasted code still works), tables aligned (or one item per row when they do not fit). No markdown marker
(``#``, backticks, ``**``, link brackets) reaches the terminal.
"""

from __future__ import annotations

import re

from markdown_it import MarkdownIt
from markdown_it.tree import SyntaxTreeNode

__all__ = ["render_markdown"]

_BOLD, _ITALIC, _UNDERLINE, _CODE, _DIM = "1", "3", "4", "36", "2"
_SPACES = re.compile(r"( +)")

# A word is the runs of (text, SGR codes) between two spaces: "`x`," is one word in two styles.
_Word = list[tuple[str, str]]


class _Layout:
    def __init__(self, width: int, color: bool) -> None:
        self.width = width
        self.color = color

    def style(self, text: str, sgr: str) -> str:
        return f"\x1b[{sgr}m{text}\x1b[0m" if self.color and sgr and text else text

    # --- inline ---------------------------------------------------------------
    def runs(self, node: SyntaxTreeNode, sgr: str = "") -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        for child in node.children:
            kind = child.type
            if kind == "text":
                out.append((child.content, sgr))
            elif kind == "code_inline":
                out.append((child.content, ";".join(filter(None, (sgr, _CODE)))))
            elif kind in ("softbreak", "hardbreak"):
                out.append((" ", sgr))
            elif kind == "strong":
                out += self.runs(child, ";".join(filter(None, (sgr, _BOLD))))
            elif kind == "em":
                out += self.runs(child, ";".join(filter(None, (sgr, _ITALIC))))
            elif kind == "link":
                out += self.runs(child, ";".join(filter(None, (sgr, _UNDERLINE))))
                href = str(child.attrs.get("href", ""))
                if href and href != "".join(t for t, _ in self.runs(child)):
                    out.append((f" ({href})", sgr))
            elif kind == "image":
                out.append((str(child.attrs.get("alt", "")) or child.content, sgr))
            else:  # html_inline and the like: their text as written
                out.append((child.content, sgr))
        return out

    @staticmethod
    def words(runs: list[tuple[str, str]]) -> list[_Word]:
        words: list[_Word] = []
        cur: _Word = []
        for text, sgr in runs:
            for part in _SPACES.split(text):
                if not part:
                    continue
                if part.isspace():
                    if cur:
                        words.append(cur)
                    cur = []
                else:
                    cur.append((part, sgr))
        if cur:
            words.append(cur)
        return words

    def wrap(self, runs: list[tuple[str, str]], width: int, first: str = "", rest: str = "") -> list[str]:
        """Greedy wrap on the visible width; a word longer than a line (a header path in code)
        is folded over lines of its own, after a ``/`` where one falls in the line."""
        lines: list[str] = []
        line: _Word = []
        used, lead = 0, first
        for word in self.words(runs):
            size = sum(len(t) for t, _ in word)
            room = width - len(rest)
            if size > room > 10:
                if used:
                    lines.append(lead + self.styled(line))
                    line, used, lead = [], 0, rest
                while size > width - len(lead):
                    head, word = _cut(word, width - len(lead))
                    lines.append(lead + self.styled(head))
                    lead = rest
                    size = sum(len(t) for t, _ in word)
            if used and len(lead) + used + 1 + size > width:
                lines.append(lead + self.styled(line))
                line, used, lead = [], 0, rest
            if used:  # the space takes the style around it only inside one styled span
                line.append((" ", word[0][1] if word[0][1] == line[-1][1] else ""))
                used += 1
            line += word
            used += size
        if used or not lines:
            lines.append(lead + self.styled(line))
        return lines

    def styled(self, runs: _Word) -> str:
        """One escape sequence per span of one style, not one per word."""
        out: _Word = []
        for text, sgr in runs:
            if out and out[-1][1] == sgr:
                out[-1] = (out[-1][0] + text, sgr)
            else:
                out.append((text, sgr))
        return "".join(self.style(t, s) for t, s in out)

    # --- blocks -----------------------------------------------------------------
    def blocks(self, node: SyntaxTreeNode, width: int) -> list[str]:
        out: list[str] = []
        for child in node.children:
            lines = self.block(child, width)
            if out and lines and not (child.type == "paragraph" and child.hidden):
                out.append("")
            out += lines
        return out

    def block(self, node: SyntaxTreeNode, width: int) -> list[str]:
        kind = node.type
        if kind == "heading":
            inline = node.children[0] if node.children else node
            text = "".join(t for t, _ in self.runs(inline))
            lines = self.wrap(self.runs(inline, _BOLD), width)
            if node.tag == "h1":  # a rule under the title, so that it reads as one without colour
                lines.append(self.style("─" * min(len(text), width), _DIM))
            return lines
        if kind == "paragraph":
            return self.wrap(self.runs(node.children[0]), width) if node.children else []
        if kind in ("bullet_list", "ordered_list"):
            return self.items(node, width)
        if kind in ("fence", "code_block"):
            code = node.content.rstrip("\n").split("\n")
            # Never folded: a line cut in two no longer runs when pasted (issue 28).
            return [self.style("    " + line.rstrip(), _CODE) for line in code]
        if kind == "blockquote":
            return [self.style("│ ", _DIM) + line for line in self.blocks(node, width - 2)]
        if kind == "table":
            return self.table(node, width)
        if kind == "hr":
            return [self.style("─" * min(width, 40), _DIM)]
        return [line for line in node.content.rstrip("\n").split("\n")]  # html_block: as written

    def items(self, node: SyntaxTreeNode, width: int) -> list[str]:
        out: list[str] = []
        start = int(str(node.attrs.get("start", 1)))
        for n, item in enumerate(node.children, start):
            mark = f"{n}. " if node.type == "ordered_list" else "• "
            pad = " " * len(mark)
            inner = self.blocks(item, width - len(mark)) or [""]
            out.append(mark + inner[0])
            out += [(pad + line).rstrip() for line in inner[1:]]
        return out

    def table(self, node: SyntaxTreeNode, width: int) -> list[str]:
        rows = [[cell.children[0] if cell.children else cell for cell in tr.children]
                for section in node.children for tr in section.children]
        plain = [["".join(t for t, _ in self.runs(c)) for c in row] for row in rows]
        widths = [max(len(r[i]) for r in plain if i < len(r)) for i in range(len(plain[0]))]
        if sum(widths) + 2 * (len(widths) - 1) <= width:
            out = []
            for i, row in enumerate(rows):
                cells = ["".join(self.style(t, s) for t, s in self.runs(c, _BOLD if i == 0 else ""))
                         + " " * (widths[j] - len(plain[i][j])) for j, c in enumerate(row)]
                out.append("  ".join(cells).rstrip())
                if i == 0:
                    out.append(self.style("  ".join("─" * w for w in widths), _DIM))
            return out
        # Too wide to align: each row becomes an item of "header: value" pairs.
        head = plain[0]
        out = []
        for row in rows[1:]:
            runs: list[tuple[str, str]] = []
            for j, cell in enumerate(row):
                runs += [(("; " if j else "") + f"{head[j]}: ", _BOLD), *self.runs(cell)]
            out += self.wrap(runs, width, "• ", "  ")
        return out



_PARSER = MarkdownIt("commonmark").enable("table")


def render_markdown(text: str, width: int, color: bool) -> str:
    """``text`` laid out for a terminal ``width`` columns wide."""
    layout = _Layout(max(width, 20), color)
    return "\n".join(layout.blocks(SyntaxTreeNode(_PARSER.parse(text)), layout.width)) + "\n"


def _cut(word: _Word, limit: int) -> tuple[_Word, _Word]:
    """``word`` split at most ``limit`` visible characters in, after the last ``/`` there if any."""
    text = "".join(t for t, _ in word)
    at = text.rfind("/", 0, limit) + 1 or limit
    head: _Word = []
    tail: _Word = []
    pos = 0
    for t, sgr in word:
        if pos + len(t) <= at:
            head.append((t, sgr))
        elif pos >= at:
            tail.append((t, sgr))
        else:
            head.append((t[: at - pos], sgr))
            tail.append((t[at - pos:], sgr))
        pos += len(t)
    return head, tail
