"""One run reaches the fixed point: fixes are applied and the result checked again until
nothing changes (as ruff does), within a bound.

A fix that becomes possible only after another (an ``isinstance`` whose body a fix rewrote, a
``device_id`` needed once ``"nccl-legacy"`` became ``"nccl"``, an edit that overlapped another
one's) is applied by the same ``--write``.  A report computes the same fixed point without
writing, so that its labels say what ``--write`` does: a finding only a later pass fixes is
labelled fixable at its position in the file as given, and its detail names the fix it follows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from ._cited import recite
from ._lines import Alignment
from ._model import FileResult, Finding, FixKind, Options

__all__ = ["MAX_PASSES", "Pass", "fixed_point"]

# Passes over one file before it counts as done (ruff stops at 100): a fix that makes another
# possible is rare, a chain of ten was never seen.
MAX_PASSES = 10

# One pass over ``text``: its findings at their positions in ``text`` (the applied ones marked),
# the fixed text, and the lines of ``text`` against it.  ``verify``: ``text`` is a fix's output.
Pass = Callable[[str, Options, bool], tuple[FileResult, Alignment | None]]


def fixed_point(source: str, options: Options, one_pass: Pass,
                again: Callable[[FileResult], bool] = lambda result: True) -> FileResult:
    """Apply ``one_pass`` until it changes nothing (or ``again`` says no later pass can add
    a fix).  Applied findings keep their position in ``source``; findings left point into the
    fixed text, which is what --write writes and --diff prints (in a report, or with
    ``options.positions_as_given``, into ``source``).

    A report labels what each command applies: ``[*]`` what ``--write`` fixes (its fixed point),
    unsafe what ``--write --unsafe-fixes`` fixes besides, a fix that only follows an unsafe one
    included (that fixed point, computed only where an unsafe fix is offered)."""
    if options.apply_safe or options.apply_unsafe:
        result, _, chain = _fixed_point(source, options, one_pass, again)
        if options.apply_unsafe or result.error is not None or not any(
                f.fix is FixKind.UNSAFE and not f.applied for f in result.findings):
            return result
        # --write or --diff without --unsafe-fixes: what is left is labelled as the report
        # labels it (a fix that follows an unsafe one is unsafe, with that pass's message).
        unsafe, after_unsafe, _ = _fixed_point(source, replace(options, apply_unsafe=True), one_pass, again,
                                               report=True)
        if unsafe.error is None:
            _relabel(result, after_unsafe, chain)
        return result
    report, _, _ = _fixed_point(source, replace(options, apply_safe=True), one_pass, again, report=True)
    if report.error is not None or not any(f.fix is FixKind.UNSAFE for f in report.findings):
        return report
    unsafe, after_unsafe, _ = _fixed_point(source, replace(options, apply_unsafe=True), one_pass, again, report=True)
    if unsafe.error is not None:
        return report
    # what only a later pass of --write --unsafe-fixes fixes is unsafe, as the fix it follows is
    later = {(f.line, f.column, f.code): f for f in after_unsafe}
    findings = []
    for f in report.findings:
        g = later.pop((f.line, f.column, f.code), None)
        if g is not None and f.fix is FixKind.NONE:
            g.fix = FixKind.UNSAFE
            f = g
        findings.append(f)
    for g in later.values():
        g.fix = FixKind.UNSAFE
        findings.append(g)
    report.findings = sorted(findings, key=lambda f: (f.line, f.column, f.code))
    return report


def _relabel(result: FileResult, after_unsafe: list[Finding], chain: list[Alignment]) -> None:
    """Label ``result``'s findings left as a report does: one that a later pass of ``--write
    --unsafe-fixes`` fixes is unsafe, with that pass's message and detail, at its place in
    the fixed text; one that only appears after an unsafe fix is added, moved into the fixed
    text (``chain``: the passes of ``result``, empty when its positions are as given)."""
    def back(line: int) -> int:
        for moved in reversed(chain):
            line = moved.back(line)
        return line

    def forward(line: int) -> int:
        for moved in chain:
            line = moved.forward(line)
        return line

    later = {(f.line, f.column, f.code): f for f in after_unsafe}
    for f in result.findings:
        g = later.pop((f.line if f.applied else back(f.line), f.column, f.code), None)
        if g is not None and f.fix is FixKind.NONE and not f.applied:
            f.fix, f.message, f.detail = FixKind.UNSAFE, g.message, g.detail
            recite(f, lambda n: f"line {forward(n)}")  # (g cites lines of the file as given)
    for g in later.values():
        g.fix = FixKind.UNSAFE
        g.line = forward(g.line)
        recite(g, lambda n: f"line {forward(n)}")
        result.findings.append(g)
    result.findings.sort(key=lambda f: (f.line, f.column, f.code))


def _fixed_point(source: str, options: Options, one_pass: Pass, again: Callable[[FileResult], bool],
                 report: bool = False) -> tuple[FileResult, list[Finding], list[Alignment]]:
    """The result, the findings a later pass than the first fixed, and the passes from the
    file as given to the text the findings left point into (empty: they point into the file)."""
    fixing = replace(options, positions_as_given=True)
    text = source
    chain: list[Alignment] = []  # the text of each pass against the next
    applied: list[Finding] = []
    later: list[Finding] = []
    before: list[Finding] = []  # the fixes of the pass before, at their lines in ``source``
    left: list[Finding] = []
    path = ""
    warnings: list[str] = []
    for n in range(MAX_PASSES):
        result, moved = one_pass(text, fixing, n > 0)
        path = result.path
        warnings = warnings if n else result.warnings  # (a later pass's lines would be off)
        if result.error is not None:
            if n:  # a fix made text that does not parse: a bug in a rule
                return FileResult(path, error="internal error: a fix produced code that does not parse; "
                                              "no fix applied"), [], []
            return result, [], []
        left = [f for f in result.findings if not f.applied]
        fixed = [f for f in result.findings if f.applied]
        if n:
            lines_back(chain, fixed)
            for f in fixed:
                _follows(f, before)
            later += fixed
        applied += fixed
        before = fixed
        if result.new_text is None or moved is None:
            break
        chain.append(moved)
        text = result.new_text
        if not again(result):  # what is left points into the text before this pass's fixes
            for f in left:
                f.line = moved.forward(f.line)
            break
    else:
        for f in left:
            f.line = chain[-1].forward(f.line)
    if report or options.positions_as_given:
        lines_back(chain, left)
    if report:
        for f in applied:
            f.applied = False
    findings = sorted(applied + left, key=lambda f: (f.line, f.column, f.code))
    moved_back = report or options.positions_as_given
    return (FileResult(path, findings=findings, new_text=None if report or text == source else text,
                       warnings=warnings), later,
            [] if moved_back else chain)


def lines_back(chain: list[Alignment], findings: list[Finding]) -> None:
    """Move findings that point into the text at the end of ``chain`` (and the lines their
    messages cite) to their lines in the text at its start."""
    if not chain:
        return

    def back(line: int) -> int:
        for moved in reversed(chain):
            line = moved.back(line)
        return line

    for f in findings:
        f.line = back(f.line)
        recite(f, lambda n: f"line {back(n)}")


def _follows(f: Finding, fixes: list[Finding]) -> None:
    """Say in ``f``'s detail which fix of the pass before made it possible (the nearest)."""
    if not fixes:
        return
    line = min(fixes, key=lambda g: (abs(g.line - f.line), g.line)).line
    note = f"Fixed by the same run once the fix at line {line} is applied."
    f.detail = f"{f.detail} {note}" if f.detail else note
