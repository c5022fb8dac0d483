"""Jupyter notebooks: the Python rules on code cells, the env rules on ``%env`` and
``!`` lines and on ``%%bash``/``%%sh`` cells, written back without re-serialising the
notebook (only the ``source`` value of a changed cell is replaced, in the layout it had).

Positions: a finding's line and column point into the ``.ipynb`` file itself (the JSON
line that holds that line of the cell, when ``source`` is the usual list of lines), so
editors and code-scanning annotations land on it; its ``cell`` is the position a notebook
user looks for (cell N counting every cell from 1, markdown included; line and column
within the cell), which the text report shows as ruff does (``path:cell N:L:C:``).

Other ``%%`` cell magics are skipped. IPython-only lines (``!cmd``, ``%magic``,
``x = !cmd``, ``obj?``) are replaced by a placeholder while the Python rules run and
restored byte for byte. A cell that still does not parse as Python is left alone.
"""

from __future__ import annotations

import ast
import bisect
import builtins
import json
import re
import symtable
from array import array
from dataclasses import dataclass, field, replace
from functools import partial

from ..._torch.envvars import ENV_VARS
from .._cited import recite
from .._lines import Alignment, align, line_map_edits, lines_of
from .._model import CellPosition, FileResult, Finding, FixKind, Options
from .._progress import step
from ._checks import Collector, EnvAssign
from ._json_spans import ALL, JsonError, Node, parse
from ._shell import Ctx, scan_shell_range
from ._text import Edit, LineIndex, apply_edits

__all__ = ["scan_notebook"]

# IPython-only lines. `% b` / `!= 3` continuation lines of a Python expression are not.
_MAGIC = re.compile(
    r"^([ \t]*)(?:!(?!=)|%(?=[A-Za-z])|[A-Za-z_][\w.]*[ \t]*=[ \t]*(?:!(?!=)|%(?=[A-Za-z]))"
    r"|[\w.]+\?{1,2}[ \t]*$)"
)
_SHELL_ASSIGN = re.compile(r"^[ \t]*(?:[A-Za-z_][\w.]*[ \t]*=[ \t]*)?!")
_ENV_MAGIC = re.compile(r"^([ \t]*%(?:set_)?env[ \t]+)([A-Za-z_][A-Za-z0-9_]*)([ \t]*=[ \t]*|[ \t]+)(\S.*?)[ \t]*$")
_PLACEHOLDER = re.compile(r"^[ \t]*pass  # ncclx-magic-(\d+)[ \t]*$")
_IPY_EXPR = re.compile(r"(?<![$\\{])\{[^{}\n]+\}")
_SHELL_CELL = re.compile(r"^%%(?:bash|sh|script[ \t]+(?:ba)?sh)\b")


def _lines(text: str) -> list[str]:
    return re.findall(r"[^\n]*\n|[^\n]+$", text)


def _magic_line(path: str, body: str, options: Options, known: frozenset[str],
                ) -> tuple[list[Finding], str | None]:
    """Findings (line 1 = this line) and the new text of one IPython line."""
    sink = Collector(path, body, options, also_assigned=known)
    m = _ENV_MAGIC.match(body)
    if m is not None:
        lead, name, sep, raw = m.groups()
        value = None if "$" in raw or "{" in raw else raw.strip("\"'")

        def add(new: str) -> list[Edit] | None:
            return [Edit(len(body), len(body), f"\n{lead}{new}{sep}{raw}")]

        def remove() -> list[Edit] | None:
            return [Edit(0, len(body), "")]

        sink.env(EnvAssign(name, m.start(2), value, raw, m.start(4), None, add, remove))
    elif _SHELL_ASSIGN.match(body):
        bang = body.index("!")
        # IPython expands {expr} in a `!` line before the shell runs it: such a value is
        # computed (masked as a $reference of the same length), and the line gets no fix.
        masked = _IPY_EXPR.sub(lambda m: "$" + "X" * (len(m.group(0)) - 1), body)
        sink = Collector(path, masked, options, also_assigned=known) if masked != body else sink
        sink.vet = partial(_vet_bang, body, bang)
        scan_shell_range(Ctx(masked, sink, lines_ok=False, env_fixes=masked == body), bang + 1, len(body))
    result = sink.result()
    new = result.new_text
    if new is not None and re.fullmatch(r"[ \t]*![ \t]*:?[ \t]*", new):
        new = ""  # the command was only the removed assignment: the line goes, not a `!:`
    return result.findings, new


_EXPANDS = re.compile(r"[${}]")
_EXPANDS_WHY = ("Unsafe here: IPython expands $name and {{expr}} in a `!` line before the shell sees it, and "
                "leaves the whole line as written when one fails; this line already holds such syntax, so "
                "whether it expands depends on the kernel's names, and the {how} would change that.")


def _escape_for_ipython(new: str, rest: str) -> str:
    """``new``, to be inserted before ``rest`` in a `!` line, written so that IPython's
    ``DollarFormatter`` gives it back: braces doubled (``str.format``), and ``$NAME`` as
    ``$$NAME`` where IPython would expand it (outside single quotes: an even number of ``'``
    follow, the formatter's own test); a ``$`` before ``{`` is not a field."""
    out = []
    for i, ch in enumerate(new):
        if ch == "$" and re.match(r"[\w.]", new[i + 1:i + 2]) and (new[i:] + rest).count("'") % 2 == 0:
            out.append("$$")
        elif ch in "{}":
            out.append(ch * 2)
        else:
            out.append(ch)
    return "".join(out)


def _vet_bang(body: str, bang: int, fix: FixKind, edits: list[Edit]) -> tuple[FixKind, list[Edit], str]:
    """A fix on a `!` line must not change what IPython expands (``InteractiveShell.var_expand``).

    In a line without ``$``, ``{`` or ``}`` expansion always succeeds, so what the fix adds is
    written escaped (``$$`` and ``{{ }}`` reach the shell as ``$`` and ``{ }``).  In a line with
    them, expansion depends on the kernel's names: a fix that adds or removes them is unsafe."""
    added = any(_EXPANDS.search(e.text) for e in edits)
    removed = any(_EXPANDS.search(body[e.start:e.end]) for e in edits)
    if not _EXPANDS.search(body, bang + 1):
        if not added:
            return fix, edits, ""
        esc = [replace(e, text=_escape_for_ipython(e.text, body[e.end:])) for e in edits]
        return fix, esc, ("Written for IPython, which expands the `!` line first: `{{ }}` and `$$NAME` reach the "
                          "shell as `{ }` and `$NAME`.")
    if not (added or removed):
        return fix, edits, ""
    why = _EXPANDS_WHY.format(how="$ or braces the fix adds" if added else "$ or braces the fix removes")
    return (FixKind.UNSAFE if fix is FixKind.SAFE else fix), edits, why


@dataclass(slots=True)
class _Cell:
    n: int  # 1-based index among all cells
    node: Node  # the `source` value
    source: str
    item: int = -1  # its index in the `cells` list
    shell: bool = False  # a %%bash / %%sh cell
    skip: bool = False  # another %% cell magic: not Python, not ours
    py_text: str = ""  # the source with IPython lines replaced by placeholders
    magic: dict[int, tuple[list[Finding], str]] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)  # cell-relative positions
    new_source: str | None = None


def _prepare(cell: _Cell, path: str, options: Options, known: frozenset[str]) -> None:
    """Scan IPython lines and shell cells; leave the Python for the codemod."""
    source = cell.source
    if source.lstrip().startswith("%%"):
        if not _SHELL_CELL.match(source.lstrip()):
            cell.skip = True
            return
        cell.shell = True
        sink = Collector(path, source, options, also_assigned=known)
        start = source.find("\n") + 1 if "\n" in source else len(source)
        scan_shell_range(Ctx(source, sink), start, len(source))
        result = sink.result()
        cell.findings, cell.new_source = result.findings, result.new_text
        return
    py_lines: list[str] = []
    for k, line in enumerate(_lines(source)):
        body = line.rstrip("\r\n")
        m = _MAGIC.match(body)
        if m is None:
            py_lines.append(line)
            continue
        found, new = _magic_line(path, body, options, known)
        for f in found:
            f.line = k + 1
        cell.magic[k] = (found, body if new is None else new)
        cell.findings.extend(found)
        py_lines.append(f"{m.group(1)}pass  # ncclx-magic-{k}{line[len(body):]}")
    cell.py_text = "".join(py_lines) if cell.magic else source  # (no copy of a cell without IPython lines)


def _finish(cell: _Cell, new_py: str | None, py_findings: list[Finding]) -> None:
    """Put the IPython lines back into the (possibly rewritten) Python of the cell."""
    out: list[str] = []
    restored: set[int] = set()
    for line in _lines(new_py if new_py is not None else cell.py_text):
        body = line.rstrip("\r\n")
        m = _PLACEHOLDER.match(body)
        if m is None:
            out.append(line)
            continue
        k = int(m.group(1))
        restored.add(k)
        if cell.magic[k][1]:
            out.append(cell.magic[k][1] + line[len(body) :])
    if restored != set(cell.magic):
        # A Python fix moved a placeholder: keep the cell's Python as it was.
        for f in py_findings:
            f.applied = False
        cell.findings.extend(py_findings)
        if new_py is not None:
            _finish(cell, None, [])
        return
    cell.findings.extend(py_findings)
    new_source = "".join(out)
    cell.new_source = None if new_source == cell.source else new_source


_CELL_MARK = re.compile(r"^# ncclx-cell-(\d+|gap)$")
_GAP = "# ncclx-cell-gap\npass\n"

# A cell that holds none of these words cannot itself trigger a Python rule (they cover every
# rule's text test, _python/_engine.PRECHECKS, and what reads names beside the binding syntax).
_MATTERS = re.compile(
    r"nccl|NCCL|torch|dist|cuda|device|[Bb]ackend|ProcessGroup|process_group|new_group|subgroups|ReduceOp"
    r"|timeout|_group_|nan_check|split_count|CTA_POLICY|uid|initialized|lazy_init|synchronization|SeqNum"
    r"|timing out|[Hh]eartbeat|watchdog|destroy|_dump_|fr_trace|Error|except|environ|getenv|putenv|import"
    r"|globals|locals|vars|exec|eval|setattr|getattr|delattr|__dict__|builtins|ncclx"
)
_BUILTINS = frozenset(dir(builtins))
_ANY = "<any>"  # the names of a cell are not known: it is kept


def _names(table: symtable.SymbolTable, used: set[str], bound: set[str]) -> None:
    """Every name ``table`` and the scopes in it use, and those they bind, from the
    compiler's own symbol tables (no walk of a tree in Python)."""
    for sym in table.get_symbols():
        name = sym.get_name()
        used.add(name)
        if sym.is_assigned() or sym.is_imported() or sym.is_parameter() or sym.is_namespace():
            bound.add(name)
    for child in table.get_children():
        _names(child, used, bound)


class _Linked:
    """Which cells the codemod must see: those that hold a word a rule looks for
    (:data:`_MATTERS`), the first cell (the module's start: docstring, indentation, line
    endings), and every cell that shares a name with one of them, transitively.  Any other
    cell neither triggers a rule nor binds or reads a name that a cell which may is about, so
    the findings and fixes are the same without it; it is only left out of libcst's tree, which
    takes ~900x the text's size (docs/performance.md).

    Cells are added one by one and joined as they share names (union-find): a cell's names
    are not kept, so this costs a few bytes a cell and one entry a distinct name."""

    def __init__(self) -> None:
        self.parent: list[int] = []
        self.seed = bytearray()
        self.first: dict[str, int] = {}  # a name -> the first cell that used it
        self.builtin: dict[str, list[int]] = {}  # print, len: the cells using it, joined only if one rebinds it
        self.rebound: set[str] = set()

    def add(self, text: str, used: set[str], bound: set[str]) -> int:
        k = len(self.parent)
        self.parent.append(k)
        self.seed.append(k == 0 or _ANY in used or _MATTERS.search(text) is not None)
        self.rebound |= bound & _BUILTINS
        for name in used:
            if name in _BUILTINS:
                self.builtin.setdefault(name, []).append(k)
            else:
                self._join(k, self.first.setdefault(name, k))
        return k

    def _find(self, k: int) -> int:
        parent = self.parent
        while parent[k] != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k

    def _join(self, a: int, b: int) -> None:
        ra, rb = self._find(a), self._find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)

    def needed(self) -> set[int]:
        """The cells (by the number :meth:`add` gave) to keep."""
        for name in self.rebound:
            for k in self.builtin.get(name, ()):
                self._join(k, self.builtin[name][0])
        roots = {self._find(k) for k in range(len(self.parent)) if self.seed[k]}
        return {k for k in range(len(self.parent)) if self._find(k) in roots}


def _python_together(run: list[_Cell | None], path: str, options: Options) -> bool:
    """Run the codemod once over every code cell, as the kernel sees them: one namespace,
    so `import torch.distributed as dist` in one cell resolves `dist` in the next.  A None
    in ``run`` is a run of cells left out (:class:`_Linked`): it stands as one ``pass``."""
    from .._python import transform_source

    parts: list[str] = []
    starts: list[tuple[int, _Cell]] = []  # (first line of the cell in the module, cell)
    line = 1
    cells: list[_Cell] = []
    for cell in run:
        if cell is None:
            parts.append(_GAP)
            line += 2
            continue
        cells.append(cell)
        text = cell.py_text if cell.py_text.endswith("\n") else cell.py_text + "\n"
        parts.append(f"# ncclx-cell-{cell.n}\n{text}")
        starts.append((line + 1, cell))
        line += 1 + text.count("\n")
    module = "".join(parts)
    # Every finding comes back at its line in the module as given (the lines its message
    # cites too): the cell it is in is the cell it was found in.
    result = transform_source(module, path, replace(options, positions_as_given=True))
    if result.error is not None:
        return False
    new_parts: dict[int, list[str]] = {}
    current: list[str] | None = None
    gap: list[str] = []
    for row in _lines(result.new_text if result.new_text is not None else module):
        m = _CELL_MARK.match(row.rstrip("\r\n"))
        if m is not None:
            current = gap if m.group(1) == "gap" else new_parts.setdefault(int(m.group(1)), [])
        elif current is None:
            return False  # something was inserted above the first cell marker
        else:
            current.append(row)
    if sorted(new_parts) != sorted(c.n for c in cells) or any(r.strip() != "pass" for r in gap):
        return False  # (a fix changed a stand-in: the cells are run one by one instead)
    new_py = {c.n: _rejoin(c, new_parts[c.n]) for c in cells}
    by_cell: dict[int, list[Finding]] = {c.n: [] for c in cells}

    def to_cell(line: int) -> tuple[int, _Cell]:
        """Module line -> (line in its cell as given, cell)."""
        first, cell = _owner(starts, line)
        return max(1, line - first + 1), cell

    for f in result.findings:
        f.line, cell = to_cell(f.line)
        by_cell[cell.n].append(f)

        def in_cell(n: int, cell: _Cell = cell) -> str:
            line, other = to_cell(n)  # a line the message cites, in cell numbering
            return f"line {line}" if other is cell else f"cell {other.n}, line {line}"

        recite(f, in_cell)
    for cell in cells:
        _finish(cell, None if new_py[cell.n] == cell.py_text else new_py[cell.n], by_cell[cell.n])
    return True


def _rejoin(cell: _Cell, rows: list[str]) -> str:
    new_py = "".join(rows)
    if cell.py_text.strip() and not cell.py_text[:1].isspace():  # a removed first line leaves no blank start
        new_py = new_py.lstrip("\r\n")
    if not cell.py_text.endswith("\n") and new_py.endswith("\n"):
        new_py = new_py[:-1]
    return new_py


def _owner(starts: list[tuple[int, _Cell]], line: int) -> tuple[int, _Cell]:
    """The cell whose first line is the last at or before module line ``line``."""
    k = bisect.bisect_right([s for s, _ in starts], line) - 1
    return starts[max(k, 0)]


def _names_if_parses(source: str) -> tuple[set[str], set[str]] | None:
    """(the names ``source`` uses, those it binds); None when it is not Python.  A cell
    that parses but that the symbol table refuses (``global x`` after a use) uses every name."""
    used: set[str] = set()
    bound: set[str] = set()
    try:
        _names(symtable.symtable(source, "<cell>", "exec"), used, bound)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        try:
            ast.parse(source)
        except (SyntaxError, ValueError, MemoryError, RecursionError):
            return None
        return {_ANY}, set()
    return used, bound


def _python_each(cells: list[_Cell], path: str, options: Options) -> None:
    """Fallback when the cells do not parse together: one module per cell."""
    from .._python import transform_source

    for cell in cells:
        result = transform_source(cell.py_text, path, options)
        if result.error is None:
            _finish(cell, result.new_text, result.findings)
        else:
            _finish(cell, None, [])


def _position(index: LineIndex, node: Node, line: int, col: int) -> tuple[int, int]:
    """File position of cell ``line``:``col`` (1-based) inside the ``source`` node."""
    if node.items:
        current = 1
        for item in node.items:
            if current >= line:
                row, c = index.position(item.start)
                return row, c + col
            current += str(item.value).count("\n")
        return index.position(node.items[-1].start)
    return index.position(node.start)


def _serialize(text: str, node: Node, new_source: str) -> str:
    """``new_source`` in the layout of the original ``source`` value."""
    original = text[node.start : node.end]
    ascii_only = text.isascii() and "\\u" in text
    if not isinstance(node.value, str) and original.startswith("["):
        parts = [json.dumps(p, ensure_ascii=ascii_only) for p in _lines(new_source)]
        if "\n" not in original or not node.items:
            return "[" + ", ".join(parts) + "]"
        first = node.items[0].start
        line_start = text.rfind("\n", 0, first) + 1
        indent = text[line_start:first]
        close_start = text.rfind("\n", 0, node.end - 1) + 1
        close_indent = text[close_start : node.end - 1]
        nl = "\r\n" if text[line_start - 2 : line_start] == "\r\n" else "\n"
        if not parts:
            return "[]"
        return "[" + nl + ("," + nl).join(indent + p for p in parts) + nl + close_indent + "]"
    return json.dumps(new_source, ensure_ascii=ascii_only)


def _drop_cells(spans: array[int], gone: set[int]) -> list[Edit]:
    """Edits that take the ``gone`` cells out of the ``cells`` list with their separators
    (``spans``: the start and end offset of each cell, one after the other)."""
    count = len(spans) // 2
    if not gone:
        return []
    if len(gone) == count:
        return [Edit(spans[0], spans[-1], "")]
    first_kept = min(k for k in range(count) if k not in gone)
    # Before the first kept cell: from a cell to the next; after it: from the previous cell's end.
    return [Edit(spans[2 * k], spans[2 * k + 2], "") if k < first_kept else Edit(spans[2 * k - 1], spans[2 * k + 1], "")
            for k in sorted(gone)]


def _line_in(moved: Alignment, n: int) -> str:
    return f"line {moved.forward(n)}"


# What the scan reads of a notebook: outputs and metadata are stepped over, never built.
_SHAPE = {"cells": [{"cell_type": ALL, "source": ALL}]}


def scan_notebook(path: str, text: str, options: Options) -> FileResult:
    final = options
    # Every position is first taken in the notebook as it is; --write moves them at the end.
    options = replace(options, positions_as_given=True)
    try:
        root = parse(text, _SHAPE)
    except JsonError as exc:
        return FileResult(path, error=f"not a valid notebook: invalid JSON ({exc})")
    cells = root.members.get("cells")
    if cells is None or text[cells.start] != "[":
        return FileResult(path, error="not a notebook: no top-level 'cells' list")
    del root
    index = LineIndex(text)
    code: list[_Cell] = []
    # Where each cell is (for cells a fix empties): the cells' nodes go once each code cell's
    # source is taken.
    spans = array("q", (x for cell in cells.items for x in (cell.start, cell.end)))
    for n, cell in enumerate(cells.items, 1):
        kind = cell.members.get("cell_type")
        src = cell.members.get("source")
        if kind is None or kind.value != "code" or src is None:
            continue
        if isinstance(src.value, str):
            source = src.value
        elif src.items and all(isinstance(i.value, str) for i in src.items):
            source = "".join(str(i.value) for i in src.items)
        else:
            continue
        code.append(_Cell(n, src, source, item=n - 1))
    del cells
    # A current env name written in any code cell counts as set (the kernel shares one
    # environment), so a replacement added by a fix is seen by every later run.
    everything = "\n".join(c.source for c in code)
    known = frozenset(r.replacement for r in ENV_VARS
                      if r.replacement and re.search(rf"\b{r.replacement}\b", everything))
    for k, c in enumerate(code):
        _prepare(c, path, options, known)
        if k % 256 == 0:
            step(k, len(code), "code cells read")
    python: list[_Cell] = []
    linked = _Linked()
    for k, c in enumerate(code):
        if k % 256 == 0:
            step(k, len(code), "code cells: names linked")
        if c.shell or c.skip:
            continue
        found = _names_if_parses(c.py_text) if c.py_text.strip() else None
        if found is None:  # only IPython lines (their fixes go in place), or not Python: left alone
            _finish(c, None, [])
        else:
            python.append(c)
            linked.add(c.py_text, *found)
    keep = {python[k].n for k in linked.needed()}
    del linked, everything
    run: list[_Cell | None] = []  # the cells kept, None for each run of cells left out
    for c in python:
        if c.n in keep:
            run.append(c)
        else:
            _finish(c, None, [])  # (only its IPython lines can change)
            if not run or run[-1] is not None:
                run.append(None)
    kept = [c for c in run if c is not None]
    step(0, 0, f"the Python rules on {len(kept):,} of {len(python):,} Python cells (the others share no name with them)")
    # What is left of a cell with no finding and no change is its place (spans, below).
    code = [c for c in code if c.n in keep or c.findings or c.new_source is not None]
    del python
    if kept and not _python_together(run, path, options):
        for c in kept:
            c.findings = [f for found, _ in c.magic.values() for f in found]
        _python_each(kept, path, options)
    findings: list[Finding] = []
    edits: list[Edit] = []
    gone: set[int] = set()
    move = not final.positions_as_given  # findings left point into the fixed notebook
    for c in code:
        # (one cell's lines: a rewritten stretch from the first to the last line a fix changed)
        in_cell = align(lines_of(c.source), lines_of(c.new_source), []) if move and c.new_source is not None else None
        for f in c.findings:
            row, col = _position(index, c.node, f.line, f.column)
            shown = f.line if f.applied or in_cell is None else in_cell.forward(f.line)
            if not f.applied and in_cell is not None:  # the lines it cites move with it
                recite(f, partial(_line_in, in_cell))
            # a finding left points into the written notebook, where removed cells are gone
            number = c.n - sum(1 for g in gone if g < c.item) if move and not f.applied else c.n
            f.cell = CellPosition(number, shown, f.column)
            f.path = path
            f.line, f.column = row, col
        findings.extend(c.findings)
        if c.new_source is not None and not c.new_source.strip() and c.source.strip():
            gone.add(c.item)  # a fix removed all it held: no empty cell is left behind
        elif c.new_source is not None:
            edits.append(Edit(c.node.start, c.node.end, _serialize(text, c.node, c.new_source)))
    edits = sorted(edits + _drop_cells(spans, gone), key=lambda e: e.start)
    new_text = apply_edits(text, edits) if edits else None
    if new_text is not None and new_text != text and move:
        in_file = line_map_edits(text, [(e.start, e.end, e.text) for e in edits])
        for f in findings:
            if not f.applied:
                f.line = in_file.forward(f.line)
    findings.sort(key=lambda f: (f.line, f.column, f.code))
    return FileResult(path, findings, new_text if new_text != text else None)
