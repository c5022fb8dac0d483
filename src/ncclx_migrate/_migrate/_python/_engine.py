"""Parse once, run every selected rule in one walk, apply the wanted edits.

``transform_source`` never raises for bad input: a file that does not parse comes back
with ``error`` set.  Output that would not parse is never returned (the edits are
dropped and the file reported as an error, which would be a bug in a rule).
"""

from __future__ import annotations

import dataclasses
import io
import os
import re
import tokenize
from collections.abc import Callable, Sequence
from typing import TypeVar

import libcst as cst
from libcst.metadata import MetadataWrapper

from .._explains import explains_only
from .._fixpoint import fixed_point
from .._lines import Alignment
from .._model import FileResult, FixKind, Options, is_selected
from .._nesting import checked_ast
from .._rule_table import RULES
from .._suppress import is_suppressed, suppressions
from .._syntax import parse_error
from . import _flow, _r_api, _r_backend, _r_env  # noqa: F401  (register the rules)
from ._astcheck import ast_active
from ._bounds import bound_fixes
from ._clashes import Edited, bound_name, drop_clashing_fixes, reads, unused_after
from ._ctx import Analyzer, Edit, EditResult, ImportSpec, Pending
from ._edits import blank_head
from ._noqa import drop_stale_e402
from ._r_backend import picks_by_helper
from ._r_env import ENV_PRECHECK
from ._trace import Lines, StatementLines, Trace, alignment, trace_of, traced
from ._walk import walk

__all__ = ["PRECHECKS", "active_codes", "python_codes", "transform_source"]


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
_RHS = r"\s*(?:==|!=|not\s+in\b|in\b)\s*(?:[\[({][^)\]}]{0,400}?)?(?:[\"']nccl[\"']|(?:\w+\.)*Backend\.NCCL\b)"
def _called(names: str) -> Callable[[str], bool]:
    """``names(`` called, or imported under an alias (``from torch.distributed import
    init_process_group as ipg``), after which the text never shows ``names(``."""
    return _re(rf"(?:{names})(?:\s*\(|\s+as\s+\w)")


# Anything that picks a GPU (set_device, set_device_index, with torch.cuda.device(i)) and an init.
_NCX130 = _all(_has("set_device", "cuda.device", "setup_device"),
               _any(_called(r"set(?:up)?_device(?:_index|_idx)?"), _re(r"cuda\.device\s*\(")),
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
        # one variable away: backend = dist.get_backend(g) ... backend == "nccl"
        _all(_has("get_backend", "name()"), _re(r"[\"']nccl[\"']|Backend\.NCCL\b"),
             _re(r"=\s*[\w.]*(?:get_backend\s*\(|name\(\))")),
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


def transform_source(source: str, path: str, options: Options, *, precheck: bool = True) -> FileResult:
    """Run every selected NCX1xx rule over ``source``; never raises on bad input.

    Fixes are applied and the result checked again until nothing changes (_fixpoint): a fix
    that becomes possible only after another is applied by the same run, and a report
    labels it fixable as ``--write`` would apply it.  Findings left point into the fixed
    text (in a report, or with ``options.positions_as_given``, into ``source``).
    """
    passes = _Passes(path, precheck, report=not (options.apply_safe or options.apply_unsafe))
    result = fixed_point(source, options, passes.one)
    if result.new_text is not None:  # an E402 noqa comment the fixes made unneeded (same lines)
        text = drop_stale_e402(source, result.new_text)
        result.new_text = None if text == source else text
    return result


# A tree a fix built, with the first and last line of each of its statements (_trace.Lines)
Built = tuple[cst.Module, Lines]


class _Passes:
    """The passes of one file's fixed point.  What a pass fixes is parsed from the tree the
    fix built (no second libcst parse of the fixed text: Python's own parser still checks it),
    and a report's two fixed points (what --write does, and with --unsafe-fixes) share the
    analysis of the text as given where no rule answered differently for the two."""

    def __init__(self, path: str, precheck: bool, report: bool) -> None:
        self.path = path
        self.precheck = precheck
        self.report = report
        self.built: tuple[str, Built] | None = None  # the last fix's code, its tree and lines
        self.first: tuple[str, _Analysis] | None = None  # the text as given, analysed

    def one(self, text: str, options: Options, verify: bool) -> tuple[FileResult, Alignment | None]:
        built = self.built[1] if self.built is not None and self.built[0] == text else None
        self.built = None
        done = self.first[1] if self.first is not None and self.first[0] == text and not verify else None
        if built is not None and _REPARSE_CHECK:
            _same_as_parsed(text, self.path, options, self.precheck, built)
        if done is None or (done.analyzer.depends_on_mode and done.options.apply_unsafe != options.apply_unsafe):
            analysed = _analyse(text, self.path, options, self.precheck, verify, built)
            if isinstance(analysed, FileResult):
                return analysed, None
            done = analysed
            # kept for the report's second fixed point (from --unsafe-fixes), which only a
            # report with an unsafe fix computes
            if not verify:
                keep = self.report and any(p.finding.fix is FixKind.UNSAFE for p in done.kept)
                self.first = (text, done) if keep else None
        result, moved, module = _outcome(done, options)
        if module is not None and result.new_text is not None:
            self.built = (result.new_text, module)
        return result, moved


class _Analysis:
    """The rules' findings on one text, before any fix is chosen."""

    def __init__(self, analyzer: Analyzer, kept: list[Pending], options: Options) -> None:
        self.analyzer = analyzer
        self.kept = kept
        self.options = options


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

    walk(module, _Lines())
    return spans


def active_codes(source: str, options: Options) -> set[str]:
    """The selected rules whose text test ``source`` passes (a GPU rule also where a helper of
    the project's picks the GPU): the codemod parses ``source`` only when this is not empty."""
    active = {c for c in python_codes() if is_selected(c, options)}
    return _prechecked(source, active) | (active & _GPU_CODES if picks_by_helper(source, options) else set())


def _analyse(source: str, path: str, options: Options, precheck: bool, verify: bool = False,
             built: Built | None = None) -> _Analysis | FileResult:
    """The rules over ``source`` (``built``: its tree, as a fix built it); a FileResult when
    there is nothing to fix (no rule can fire, or ``source`` does not parse).  ``verify``:
    ``source`` is a fix's output, parsed even when no rule's text test matches (it must
    parse)."""
    if precheck:
        active = active_codes(source, options)
    else:
        active = {c for c in python_codes() if is_selected(c, options)}
    if not active and not verify:
        return FileResult(path=path)
    deep, tree = checked_ast(source)  # libcst's parser would overflow its stack (a segfault)
    if deep is not None:
        return FileResult(path=path, error=deep)
    if precheck and active and tree is not None:  # the text tests' hits, checked on the tree (_astcheck)
        active = ast_active(tree, source, active, options)
        if not active and not verify:
            return FileResult(path=path)
    if built is not None:
        module = built[0]
    else:
        try:
            module = cst.parse_module(source)
        except cst.ParserSyntaxError as exc:
            return FileResult(path=path, error=parse_error(source, exc))
        except (RecursionError, MemoryError):
            return FileResult(path=path, error="cannot parse: too deeply nested")
    if not active:
        return FileResult(path=path)
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    analyzer = Analyzer(path, wrapper, source, options, active, tree)
    if built is not None:
        analyzer.lines = built[1]
    try:
        walk(module, analyzer)
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
    drop_clashing_fixes(analyzer, kept)  # in every mode: the label is what --write applies
    bound_fixes(kept, options)
    return _Analysis(analyzer, kept, options)


def _outcome(done: _Analysis, options: Options) -> tuple[FileResult, Alignment | None, Built | None]:
    """The findings of ``done`` with the fixes ``options`` wants applied: the result, the lines
    of the text against the fixed one, and the fixed tree.  Each call gets findings of its own
    (a fixed point moves and marks them)."""
    path = done.analyzer.path
    findings = [dataclasses.replace(p.finding) for p in done.kept]
    result = FileResult(path=path, findings=findings)
    wanted = [(p, f) for p, f in zip(done.kept, findings, strict=True) if p.edits and options.wants_fix(f.fix)]
    if not wanted:
        return result, None, None
    new_text, moved, module = _apply(done.analyzer, [p for p, _ in wanted])
    if new_text == done.analyzer.source:
        return result, moved, None
    result.new_text = new_text
    for _, f in wanted:
        f.applied = True
    return result, moved, module


def _one_pass(source: str, path: str, options: Options, precheck: bool,
              verify: bool = False) -> tuple[FileResult, Alignment | None]:
    """One pass of the rules over ``source``, parsed from its text, with the wanted fixes
    applied: the result, and the lines of ``source`` against its ``new_text``."""
    done = _analyse(source, path, options, precheck, verify)
    if isinstance(done, FileResult):
        return done, None
    result, moved, _ = _outcome(done, options)
    return result, moved


# NCCLX_CHECK_REPARSE=1 (the test suite sets it): every pass over a tree a fix built is checked
# against a pass over the same text parsed afresh, which must find and fix the same.
_REPARSE_CHECK = os.environ.get("NCCLX_CHECK_REPARSE") == "1"


def _same_as_parsed(source: str, path: str, options: Options, precheck: bool, built: Built) -> None:
    def seen(done: _Analysis | FileResult) -> tuple[object, ...]:
        if isinstance(done, FileResult):
            return (done.error, [])
        result, _, _ = _outcome(done, options)
        return (result.error, [(f.line, f.column, f.code, f.fix, f.message, f.detail) for f in result.findings],
                result.new_text)

    parsed = seen(_analyse(source, path, options, precheck, True))
    ours = seen(_analyse(source, path, options, precheck, True, built))
    if parsed != ours:
        raise AssertionError(f"{path}: a pass over the tree a fix built differs from one over its text parsed "
                             f"again:\n{ours}\n!=\n{parsed}")


# Comments that are instructions, not explanations: a notebook's cell marker, ncclx's own,
# formatters' and linters' (they stay when the statement below them goes).
_DIRECTIVE = re.compile(r"#\s*(?:ncclx|fmt:|type:|pylint:|noqa|isort:|mypy:|pyright:)")


def _kept_head(lines: Sequence[cst.EmptyLine]) -> list[cst.EmptyLine]:
    """The leading lines of a removed statement that stay: all up to its last blank line, and
    the directives after it.  The comment lines right above it explain it alone and go with it;
    a comment separated from it by a blank line (a section header) stays, as in the other file
    kinds (_files/_comments.py)."""
    last = max((i for i, el in enumerate(lines) if el.comment is None), default=-1)
    return [*lines[: last + 1],
            *(el for el in lines[last + 1:] if el.comment is not None and _DIRECTIVE.match(el.comment.value))]


def _joined(first: list[cst.EmptyLine], then: Sequence[cst.EmptyLine]) -> list[cst.EmptyLine]:
    """``first`` then ``then``, without doubling the blank lines where they meet."""
    rest = list(then)
    if first and first[-1].comment is None:
        while rest and rest[0].comment is None:
            rest.pop(0)
    return [*first, *rest]


class _Apply(cst.CSTTransformer):
    def __init__(self, edits: dict[int, list[Edit]], skip: set[int] | None = None) -> None:
        super().__init__()
        self.edits = edits
        self.skip = skip or set()  # statements with no edit inside: not gone into (kept as they are)
        # Leading lines of a removed statement that stay (blank lines, a comment a blank line
        # separates from it); they go to the next statement (_kept_head).
        self.carry: list[cst.EmptyLine] = []
        self.carry_to: dict[int, list[cst.EmptyLine]] = {}
        # The comment right above a removed statement, kept only if the next statement follows
        # it directly (then the comment heads what stays; _explains).
        self.orphans: list[cst.EmptyLine] = []
        self.removed = ""
        # The original nodes the fixes rewrote or removed, and what took their place: which
        # imports may have lost their last use (_apply).
        self.touched: list[cst.CSTNode] = []
        self.results: list[EditResult] = []
        self.changes = 0

    def on_visit(self, node: cst.CSTNode) -> bool:
        if self.orphans and isinstance(node, cst.BaseStatement):
            lines = getattr(node, "leading_lines", ())
            if not (lines and lines[0].comment is None):  # it follows the removed one directly
                following = cst.Module([]).code_for_node(node).strip().split("\n", 1)[0]
                comment = "\n".join(el.comment.value for el in self.orphans if el.comment)
                if not explains_only(comment, self.removed, following):
                    self.carry = [*self.carry, *self.orphans]
            self.orphans = []
        if self.carry and isinstance(node, cst.BaseStatement):
            self.carry_to[id(node)], self.carry = self.carry, []
        return super().on_visit(node) and id(node) not in self.skip

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode):  # type: ignore[no-untyped-def]
        result = super().on_leave(original_node, updated_node)
        mine = self.edits.get(id(original_node), ())
        self.changes += bool(mine)  # (_trace: which statements a fix changed)
        for edit in mine:
            if not isinstance(result, cst.CSTNode):
                break
            result = edit(result)
        if mine:
            self.touched.append(original_node)
            self.results.append(result)
        if isinstance(original_node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            carried = self.carry_to.pop(id(original_node), [])
            if isinstance(result, cst.RemovalSentinel):
                kept = _kept_head(original_node.leading_lines)
                self.carry = _joined(carried, kept)
                self.orphans = [el for el in original_node.leading_lines if el.comment is not None and el not in kept]
                self.removed = cst.Module([]).code_for_node(original_node.with_changes(leading_lines=[]))
            elif carried and isinstance(result, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
                self.changes += 1
                if any(el.comment is not None for el in carried):
                    result = result.with_changes(leading_lines=_joined(carried, result.leading_lines))
                elif not blank_head(result.leading_lines):
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
            self.touched.append(original_node)  # the call's own names go too
            return cst.RemoveFromParent()
        return updated_node

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock) -> cst.IndentedBlock:
        self.orphans = []  # the removed statement ended its block: its comment went with it
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
_T = TypeVar("_T")
_S = TypeVar("_S", cst.SimpleStatementLine, cst.BaseCompoundStatement)


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


def _keeping_lines(base: type[_T]) -> type[_T]:
    """``base`` (libcst's RemoveImportsVisitor) where a removed import line's leading lines go
    as a removed statement's do (_kept_head: blank lines, a comment a blank line separates and
    directives such as a notebook's cell marker stay, on the next statement)."""

    class Keeping(base):  # type: ignore[valid-type,misc]
        def __init__(self, *args: object) -> None:
            super().__init__(*args)
            self.carry: list[cst.EmptyLine] = []
            self.changes = 0

        def leave_SimpleStatementLine(self, original_node: cst.SimpleStatementLine,
                                      updated_node: cst.SimpleStatementLine) -> cst.CSTNode | cst.RemovalSentinel:
            if not updated_node.body:
                self.carry = _joined(self.carry, _kept_head(original_node.leading_lines))
                return cst.RemoveFromParent()
            return self._take(updated_node)

        def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
            out: cst.Module = super().leave_Module(original_node, updated_node)
            if self.carry:  # nothing followed: the lines close the module
                out = out.with_changes(footer=[*self.carry, *out.footer])
            return out

        def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode):  # type: ignore[no-untyped-def]
            result = super().on_leave(original_node, updated_node)
            if isinstance(result, cst.BaseCompoundStatement):
                result = self._take(result)
            return result

        def _take(self, node: _S) -> _S:
            if not self.carry:
                return node
            lines, self.carry = _joined(self.carry, node.leading_lines), []
            self.changes += 1
            return node.with_changes(leading_lines=lines)

    return Keeping


def _no_blank_start(module: cst.Module, trace: Trace) -> cst.Module:
    """A file whose first statements a fix removed neither starts with the blank lines that
    followed them nor doubles the blank line that ends its header.  The parser puts every line
    before the first statement in the header, so blank lines on the first statement itself are
    only ever carried there by a removal; after a header comment one blank line stays."""
    if not module.body or (module.header and module.header[-1].comment is not None):
        return module
    first = module.body[0]
    lines = list(first.leading_lines)
    while lines and lines[0].comment is None:
        lines.pop(0)
    if len(lines) == len(first.leading_lines):
        return module
    new = first.with_changes(leading_lines=lines)
    trace[id(new)] = (new, first, True)
    return module.with_changes(body=[new, *module.body[1:]])


def _apply(analyzer: Analyzer, wanted: list[Pending]) -> tuple[str, Alignment, Built]:
    """The fixed code, its lines against the source's (from what the transforms changed), and
    its tree with its statements' lines."""
    edits: dict[int, list[Edit]] = {}
    imports: list[ImportSpec] = []
    unused: list[ImportSpec] = []
    for p in wanted:
        for node, edit in p.edits:
            edits.setdefault(id(node), []).append(edit)
        imports.extend(p.imports)
        unused.extend(p.unused)
    apply = traced(_Apply)(edits, analyzer.units.untouched([node for p in wanted for node, _ in p.edits]))
    new = analyzer.module.visit(apply)
    traces: list[Trace] = [trace_of(apply)]
    # An import whose last use a fix removed goes too (only those: one the file never used
    # stays). That use was in a node the fix rewrote or removed, and the new code there does
    # not read it: RemoveImportsVisitor's scope analysis is most of a fix's cost, so it gets
    # only those imports, and none in most files.
    edited = Edited.of(apply.touched)
    kept = reads(apply.results)  # (a name the new code reads needs no scope analysis)
    unused.extend(unused_after(analyzer, edited, kept))
    unused = [u for u in unused if bound_name(u) in edited.names and bound_name(u) not in kept]
    # libcst.codemod costs ~0.2 s to import: only files with such fixes pay it
    from libcst.codemod import CodemodContext
    from libcst.codemod.visitors import AddImportsVisitor, RemoveImportsVisitor
    if unused:  # only imports a fix stopped using, and only when nothing else uses them
        ctx = CodemodContext()
        for mod, obj, asname in dict.fromkeys(unused):
            RemoveImportsVisitor.remove_unused_import(ctx, mod, obj, asname)
        remove = traced(_keeping_lines(RemoveImportsVisitor))(ctx)
        new = remove.transform_module(new)
        traces.append(trace_of(remove))
    if imports:
        ctx = CodemodContext()
        for mod, obj, asname in dict.fromkeys(imports):
            AddImportsVisitor.add_needed_import(ctx, mod, obj, asname)
        add = traced(AddImportsVisitor)(ctx)
        new = new.visit(add)  # (it reads no metadata: no deep copy for a wrapper)
        traces.append(trace_of(add))
    last: Trace = {}
    traces.append(last)
    new = _no_blank_start(new, last)
    code, lines = StatementLines.of(new)
    if analyzer.lines is None:  # (a tree a fix built has them from that fix's code generation)
        analyzer.lines = StatementLines.of(analyzer.module)[1]
    # (the next pass checks that ``code`` parses: a fix that does not is caught there)
    return code, alignment(analyzer.source, analyzer.lines, code, lines, traces), (new, lines)


_ = (FixKind, re)  # re-exported types used by callers' annotations
