"""Parse once, run every selected rule in one walk, apply the wanted edits.

``transform_source`` never raises for bad input: a file that does not parse comes back
with ``error`` set.  Output that would not parse is never returned (the edits are
dropped and the file reported as an error, which would be a bug in a rule).
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Callable, Sequence
from typing import TypeVar

import libcst as cst
from libcst.metadata import MetadataWrapper

from .._lines import line_map
from .._model import FileResult, Finding, FixKind, Options, is_selected
from .._nesting import too_deep
from .._rules import RULES
from .._suppress import is_suppressed, suppressions
from .._syntax import parse_error
from . import _flow, _r_api, _r_backend, _r_env  # noqa: F401  (register the rules)
from ._ctx import Analyzer, Edit, Pending
from ._r_backend import picks_by_helper
from ._r_env import ENV_PRECHECK

__all__ = ["PRECHECKS", "python_codes", "transform_source"]


def _has(*words: str) -> Callable[[str], bool]:
    return lambda text: any(w in text for w in words)


def _re(pattern: str) -> Callable[[str], bool]:
    rx = re.compile(pattern)
    return lambda text: rx.search(text) is not None


def _all(*tests: Callable[[str], bool]) -> Callable[[str], bool]:
    return lambda text: all(t(text) for t in tests)


def _any(*tests: Callable[[str], bool]) -> Callable[[str], bool]:
    return lambda text: any(t(text) for t in tests)


def _env(text: str) -> bool:
    # every table name contains "NCCL" (or is the toggle, which contains it too)
    return "NCCL" in text and ENV_PRECHECK.search(text) is not None


def _isinstance_pgnccl(text: str) -> bool:
    """isinstance/issubclass/type( within 400 characters before a ProcessGroupNCCL name."""
    i = text.find("ProcessGroupNCCL")
    while i >= 0:
        window = text[max(0, i - 400):i]
        if "isinstance" in window or "issubclass" in window or "type(" in window:
            return True
        i = text.find("ProcessGroupNCCL", i + 16)
    return False


# Patterns start with a literal so that the regex engine can skip ahead to it.
# A literal may be laid out one item per line: up to its first closing bracket, newlines included.
_RHS = r"\s*(?:==|!=|not\s+in\b|in\b)\s*(?:[\[({][^)\]}]{0,400}?)?(?:[\"']nccl[\"']|Backend\.NCCL\b)"
def _called(names: str) -> Callable[[str], bool]:
    """``names(`` called, or imported under an alias (``from torch.distributed import
    init_process_group as ipg``), after which the text never shows ``names(``."""
    return _re(rf"(?:{names})(?:\s*\(|\s+as\s+\w)")


# Anything that picks a GPU (set_device, set_device_index, with torch.cuda.device(i)) and an init.
_NCX130 = _all(_has("set_device", "cuda.device"), _any(_called(r"set_device(?:_index|_idx)?"), _re(r"cuda\.device\s*\(")),
               _called("init_process_group"))
_BACKEND_FN = _called(r"init_process_group|new_group|new_subgroups\w*|is_backend_available|Backend")

# Cheap text tests: a rule cannot fire on a file where its test is False.  They follow each
# rule's trigger shapes (allowing for line breaks inside calls);
# benchmarks/bench_migrate.py checks on torch's own sources that skipping on them changes
# no finding.
PRECHECKS: dict[str, Callable[[str], bool]] = {
    "NCX101": _has("TORCH_DIST_USE_NCCL2"),
    "NCX102": _has("TORCH_DIST_USE_NCCL2"),
    "NCX103": _has("nccl-legacy"),
    "NCX104": _all(_has("nccl2"), _re(r"nccl2[\"']"), _BACKEND_FN),
    "NCX110": _any(
        _all(_has("ProcessGroupNCCL"), _isinstance_pgnccl),
        _all(_has("ProcessGroupNCCL"), _re(r"ProcessGroupNCCL\s+as\s+\w"), _has("isinstance", "issubclass", "type(")),
        _all(_has("get_backend"), _re(r"get_backend\s*\([\s\S]{0,200}?\)" + _RHS)),
        _all(_has("get_backend"), _re(r"get_backend\s+as\s+\w"), _re(r"\)" + _RHS)),
        _all(_has("name()"), _re(r"name\(\)" + _RHS)),
        _all(_has("nccl", "Backend.NCCL"),
             _re(r"(?:nccl[\"']|Backend\.NCCL)\s*(?:==|!=)\s*[\w.()]*(?:get_backend\s*\(|name\(\))")),
    ),
    "NCX111": _any(
        _all(_has("_group_", "_set_default_timeout", "comm_split_count", "_set_enable_nan_check", "nccl_version",
                  "NCCL_CTA_POLICY_"), _re(r"\.(?:_group_start|_group_end|_set_default_timeout|comm_split_count"
                                           r"|_set_enable_nan_check|get_runtime_nccl_version|get_build_nccl_version"
                                           r"|NCCL_CTA_POLICY_\w+)\b")),
        _all(_has("_get_backend("), _re(r"\.(?:uid|_is_initialized)\b")),
    ),
    "NCX112": _any(  # rarest words first ("except" and "ValueError" are in most files)
        _all(_has("init_process_group", "new_group"), _has("ValueError"), _re(r"except\b[^:]*ValueError"),
             _called("init_process_group|new_group")),
        _all(_has("ReduceOp"), _has("BAND", "BOR", "BXOR"), _re(r"except\b[^:]*(?:ValueError|RuntimeError)")),
    ),
    "NCX113": _has("SeqNum", "milliseconds before timing out", "Heartbeat monitor timed out", "watchdog got stuck",
                   "destroy_process_group() was not called", "NOT been destroyed"),
    "NCX120": _env,
    "NCX121": _has("_dump_nccl_trace", "_dump_fr_trace", "_reset_fr_trace"),
    "NCX122": _env,
    "NCX123": _env,
    "NCX130": _NCX130,
    "NCX131": _all(_has("use_local_synchronization"), _re(r"use_local_synchronization\s*=\s*True")),
    "NCX132": _all(_has("ProcessGroupNCCL"), _called("ProcessGroupNCCL")),
    "NCX133": _all(_has("lazy_init"), _re(r"\.lazy_init\s*=[^=]"), _has("ProcessGroupNCCL")),
    "NCX134": _NCX130,
}


# Also run where the GPU is picked by a helper of the run (``init_device()``: see _migrate/_xref).
_GPU_CODES = frozenset({"NCX130", "NCX134"})

# Rules whose every trigger spells NCCL or nccl (class names, backend names, env names): one
# scan for both spellings rules them all out on the many files that never mention NCCL.
_NEED_NCCL = frozenset({"NCX101", "NCX102", "NCX103", "NCX104", "NCX110", "NCX120", "NCX122", "NCX123",
                        "NCX132", "NCX133"})


def _prechecked(source: str, codes: set[str]) -> set[str]:
    """The codes in ``codes`` whose precheck passes (each distinct test run once)."""
    nccl = "NCCL" in source or "nccl" in source
    done: dict[int, bool] = {}
    out: set[str] = set()
    for c in codes:
        if not nccl and c in _NEED_NCCL:
            continue
        test = PRECHECKS[c]
        hit = done.get(id(test))
        if hit is None:
            hit = done[id(test)] = test(source)
        if hit:
            out.add(c)
    return out


def python_codes() -> list[str]:
    return [r.code for r in RULES if r.code in PRECHECKS]


_MAX_PASSES = 4


def transform_source(source: str, path: str, options: Options, *, precheck: bool = True) -> FileResult:
    """Run every selected NCX1xx rule over ``source``; never raises on bad input.

    When fixes are applied the result is re-checked (as ruff does) until nothing changes,
    so that one ``--write`` leaves a file on which a second one is a no-op.  Findings of
    later passes point into the fixed text, which is what --write writes and --diff prints
    (with ``options.positions_as_given``, into ``source``).
    """
    result = _one_pass(source, path, options, precheck)
    applied: list[Finding] = []
    for _ in range(_MAX_PASSES):
        if result.new_text is None or result.error is not None:
            break
        applied.extend(f for f in result.findings if f.applied)
        again = _one_pass(result.new_text, path, options, precheck)
        if again.error is not None:
            return FileResult(path=path, error=again.error)
        again_new = again.new_text if again.new_text is not None else result.new_text
        result = FileResult(path=path, findings=again.findings, new_text=again_new)
        if again.new_text is None:
            break
    if applied:
        left = [f for f in result.findings if not f.applied]
        if options.positions_as_given and result.new_text is not None:
            _lines_back(source, result.new_text, left)
        result.findings = sorted(applied + left, key=lambda f: (f.line, f.column, f.code))
        if result.new_text == source:
            result.new_text = None
    return result


def _lines_back(old: str, new: str, findings: list[Finding]) -> None:
    """Move findings that point into ``new`` to their lines in ``old``."""
    back = line_map(old, new, back=True)
    for f in findings:
        f.line = back.get(f.line, f.line)


def _comment_suppressions(source: str) -> dict[int, frozenset[str]]:
    """:func:`suppressions` from real comments only (not from text inside a string)."""
    table = suppressions(source)
    if not table:
        return table
    comment_lines: set[int] = set()
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.COMMENT and "ncclx:" in tok.string:
                comment_lines.add(tok.start[0])
    except (tokenize.TokenError, SyntaxError):
        return table  # syntax newer than this Python's tokenizer: keep the text table
    return {line: codes for line, codes in table.items() if line in comment_lines}


def _statement_spans(module: cst.Module, analyzer: Analyzer) -> list[tuple[int, int]]:
    """(first, last) line of every multi-line simple statement: an ignore comment on either
    counts for the findings inside it."""
    spans: list[tuple[int, int]] = []

    class _Lines(cst.CSTVisitor):
        def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> bool:
            rng = analyzer.pos(node)
            if rng.end.line > rng.start.line:
                spans.append((rng.start.line, rng.end.line))
            return False

    module.visit(_Lines())
    return spans


def _one_pass(source: str, path: str, options: Options, precheck: bool) -> FileResult:
    active = {c for c in python_codes() if is_selected(c, options)}
    if precheck:
        active = _prechecked(source, active) | (active & _GPU_CODES if picks_by_helper(source, options) else set())
    if not active:
        return FileResult(path=path)
    deep = too_deep(source)  # libcst's parser would overflow its stack (a segfault)
    if deep is not None:
        return FileResult(path=path, error=deep)
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError as exc:
        return FileResult(path=path, error=parse_error(source, exc))
    except (RecursionError, MemoryError):
        return FileResult(path=path, error="cannot parse: too deeply nested")
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    analyzer = Analyzer(path, wrapper, source, options, active)
    try:
        module.visit(analyzer)
    except RecursionError:
        return FileResult(path=path, error="cannot analyse: too deeply nested")
    table = _comment_suppressions(source)
    spans = _statement_spans(module, analyzer) if table and analyzer.pending else []
    kept: list[Pending] = []
    for p in analyzer.pending:
        f = p.finding
        lines = p.lines + tuple(x for a, b in spans if a <= min(p.lines) and max(p.lines) <= b for x in (a, b))
        if f.code not in active or is_suppressed(f.code, lines, table):
            continue
        kept.append(p)
    kept.sort(key=lambda p: (p.finding.line, p.finding.column, p.finding.code))
    result = FileResult(path=path, findings=[p.finding for p in kept])
    wanted = [p for p in kept if p.edits and options.wants_fix(p.finding.fix)]
    if wanted:
        new_text = _apply(module, wanted)
        if new_text is None:
            result.error = "internal error: a fix produced code that does not parse; no fix applied"
        elif new_text != source:
            result.new_text = new_text
            for p in wanted:
                p.finding.applied = True
    return result


def _blank_head(lines: Sequence[cst.EmptyLine]) -> list[cst.EmptyLine]:
    """The blank lines before the first comment line of a statement's leading lines."""
    head = []
    for el in lines:
        if el.comment is not None:
            break
        head.append(el)
    return head


class _Apply(cst.CSTTransformer):
    def __init__(self, edits: dict[int, list[Edit]]) -> None:
        super().__init__()
        self.edits = edits
        # Blank lines that separated a removed statement from the code above it; they go to
        # the next statement (the comment lines above a removed statement go with it).
        self.carry: list[cst.EmptyLine] = []
        self.carry_to: dict[int, list[cst.EmptyLine]] = {}

    def on_visit(self, node: cst.CSTNode) -> bool:
        if self.carry and isinstance(node, cst.BaseStatement):
            self.carry_to[id(node)], self.carry = self.carry, []
        return super().on_visit(node)

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode):  # type: ignore[no-untyped-def]
        result = super().on_leave(original_node, updated_node)
        for edit in self.edits.get(id(original_node), ()):
            if not isinstance(result, cst.CSTNode):
                break
            result = edit(result)
        if isinstance(original_node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            carried = self.carry_to.pop(id(original_node), [])
            if isinstance(result, cst.RemovalSentinel):
                self.carry = carried or _blank_head(original_node.leading_lines)
            elif (carried and isinstance(result, (cst.SimpleStatementLine, cst.BaseCompoundStatement))
                  and not _blank_head(result.leading_lines)):
                result = result.with_changes(leading_lines=[*carried, *result.leading_lines])
        return result

    def leave_Dict(self, original_node: cst.Dict, updated_node: cst.Dict) -> cst.Dict:
        if original_node.elements and not updated_node.elements:  # {} (keeping a comment after "{")
            return updated_node.with_changes(
                lbrace=cst.LeftCurlyBrace(whitespace_after=_closed(updated_node.lbrace.whitespace_after)),
                rbrace=cst.RightCurlyBrace(whitespace_before=cst.SimpleWhitespace("")),
            )
        elements, took_close = _last_comma(original_node.elements, updated_node.elements,
                                           updated_node.rbrace.whitespace_before)
        if took_close:
            # the new last entry's comma now ends its line (with its comment): the bracket's old
            # whitespace, holding the removed entry's comment, goes with that entry
            return updated_node.with_changes(elements=elements, rbrace=cst.RightCurlyBrace(cst.SimpleWhitespace("")))
        return updated_node.with_changes(elements=elements)

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.Call:
        if original_node.args and not updated_node.args:
            return updated_node.with_changes(whitespace_before_args=_closed(updated_node.whitespace_before_args))
        return updated_node.with_changes(args=_last_comma(original_node.args, updated_node.args)[0])

    def leave_Expr(self, original_node: cst.Expr, updated_node: cst.Expr) -> cst.Expr | cst.RemovalSentinel:
        # m.update({K: v}) / m.update(K=v) whose every item was removed: drop the no-op call.
        old, new = original_node.value, updated_node.value
        if (isinstance(old, cst.Call) and isinstance(new, cst.Call) and isinstance(new.func, cst.Attribute)
                and new.func.attr.value == "update" and old.args and _emptied(old.args, new.args)):
            return cst.RemoveFromParent()
        return updated_node

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock) -> cst.IndentedBlock:
        if not updated_node.body:
            return updated_node.with_changes(body=[cst.SimpleStatementLine([cst.Pass()])])
        return updated_node

    def leave_SimpleStatementSuite(
        self, original_node: cst.SimpleStatementSuite, updated_node: cst.SimpleStatementSuite
    ) -> cst.SimpleStatementSuite:
        if not updated_node.body:
            return updated_node.with_changes(body=[cst.Pass()])
        return updated_node

    def leave_SimpleStatementLine(
        self, original_node: cst.SimpleStatementLine, updated_node: cst.SimpleStatementLine
    ) -> cst.SimpleStatementLine | cst.RemovalSentinel:
        if not updated_node.body:
            return cst.RemoveFromParent()
        if len(updated_node.body) < len(original_node.body):  # no dangling "; " after the last one left
            last = updated_node.body[-1].with_changes(semicolon=original_node.body[-1].semicolon)
            return updated_node.with_changes(body=[*updated_node.body[:-1], last])
        return updated_node


_Item = TypeVar("_Item", cst.Arg, cst.BaseDictElement)


def _last_comma(
    old: Sequence[_Item], new: Sequence[_Item], close: cst.BaseParenthesizableWhitespace | None = None
) -> tuple[Sequence[_Item], bool]:
    """After items were removed, the last one left takes the comma (and so the layout up to
    the closing bracket) of the old last one: no dangling ``, `` is left behind.

    On a multi-line literal the last one left keeps its own comma and comment (comments stay
    on their lines; the removed entry's comment goes with it) and takes only the old closing
    layout.  ``close`` is the whitespace before a dict's closing brace; the flag says that
    the result took it over (the brace then needs none)."""
    if not new or len(new) >= len(old):
        return new, False
    items = list(new)
    mine, theirs = items[-1].comma, old[-1].comma
    if isinstance(mine, cst.Comma) and isinstance(mine.whitespace_after, cst.ParenthesizedWhitespace):
        took_close = isinstance(close, cst.ParenthesizedWhitespace)
        if took_close:
            closing: cst.BaseParenthesizableWhitespace | None = close
        elif isinstance(theirs, cst.Comma):
            closing = theirs.whitespace_after
        else:
            closing = old[-1].whitespace_after_arg if isinstance(old[-1], cst.Arg) else None
        if isinstance(closing, cst.ParenthesizedWhitespace):
            ws = mine.whitespace_after.with_changes(
                empty_lines=closing.empty_lines, indent=closing.indent, last_line=closing.last_line)
            items[-1] = items[-1].with_changes(comma=mine.with_changes(whitespace_after=ws))
            if isinstance(items[-1], cst.Arg):
                items[-1] = items[-1].with_changes(whitespace_after_arg=cst.SimpleWhitespace(""))
            return items, took_close
    items[-1] = items[-1].with_changes(comma=theirs)
    return items, False


def _closed(ws: cst.BaseParenthesizableWhitespace) -> cst.BaseParenthesizableWhitespace:
    """The whitespace after an opening bracket whose items are all gone: none, or only the
    comment that followed the bracket (then the closing bracket starts the next line)."""
    if isinstance(ws, cst.ParenthesizedWhitespace) and ws.first_line.comment is not None:
        return ws.with_changes(empty_lines=[], indent=False, last_line=cst.SimpleWhitespace(""))
    return cst.SimpleWhitespace("")


def _emptied(old: Sequence[cst.Arg], new: Sequence[cst.Arg]) -> bool:
    if not new:
        return True
    return (len(new) == 1 == len(old) and isinstance(new[0].value, cst.Dict) and not new[0].value.elements
            and isinstance(old[0].value, cst.Dict) and bool(old[0].value.elements))


def _apply(module: cst.Module, wanted: list[Pending]) -> str | None:
    edits: dict[int, list[Edit]] = {}
    imports: list[tuple[str, str | None]] = []
    unused: list[tuple[str, str | None, str | None]] = []
    for p in wanted:
        for node, edit in p.edits:
            edits.setdefault(id(node), []).append(edit)
        imports.extend(p.imports)
        unused.extend(p.unused)
    new = module.visit(_Apply(edits))
    if imports or unused:  # libcst.codemod costs ~0.2 s to import: only files with such fixes pay it
        from libcst.codemod import CodemodContext
        from libcst.codemod.visitors import AddImportsVisitor, RemoveImportsVisitor
    if unused:  # only imports a fix stopped using, and only when nothing else uses them
        ctx = CodemodContext()
        for mod, obj, asname in dict.fromkeys(unused):
            RemoveImportsVisitor.remove_unused_import(ctx, mod, obj, asname)
        new = RemoveImportsVisitor(ctx).transform_module(new)
    if imports:
        ctx = CodemodContext()
        for mod, obj in dict.fromkeys(imports):
            AddImportsVisitor.add_needed_import(ctx, mod, obj)
        new = AddImportsVisitor(ctx).transform_module(new)
    code = new.code
    try:
        cst.parse_module(code)
    except cst.ParserSyntaxError:
        return None
    return code


_ = (Finding, FixKind, re)  # re-exported types used by callers' annotations
