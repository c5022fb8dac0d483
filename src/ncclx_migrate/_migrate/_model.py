"""The data every part of ``ncclx migrate`` shares: findings, fix kinds, options.

The Python codemod (``_python``) and the scanners for other files (``_files``) both
return a :class:`FileResult`; the runner, reporters and CLI only see these types.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ._crossfile import SharedNames
from ._fixkind import FixKind
from ._xref import Helpers

__all__ = ["CellPosition", "FileResult", "Finding", "FixKind", "Options", "is_selected"]


@dataclass(frozen=True)
class CellPosition:
    """Where a notebook finding is in its cell, as a notebook user counts: ``number`` counts
    every cell from 1 (markdown included), ``line`` and ``column`` count within the cell."""

    number: int
    line: int
    column: int

    def as_json(self) -> dict[str, int]:
        return {"number": self.number, "line": self.line, "column": self.column}


@dataclass
class Finding:
    path: str
    # Position in the file's text (for a notebook: in the .ipynb JSON), which editors, SARIF
    # and annotations use; a notebook's text report and code frame show `cell` instead.
    line: int  # 1-based
    column: int  # 1-based
    code: str  # stable rule code, e.g. "NCX101"
    message: str  # one short sentence (<= 88 chars, aim 75): what is wrong, what to do
    fix: FixKind = FixKind.NONE
    applied: bool = False
    # The why, the evidence and per-version details for this site (JSON "detail", SARIF
    # properties); the rule's full text is `ncclx explain CODE`.
    detail: str = ""
    cell: CellPosition | None = None  # only for a finding in a notebook cell
    # Set by the report for SARIF, GitLab and --baseline (see _baseline): a stable identity
    # across line moves, and "new" / "unchanged" against the baseline.
    fingerprint: str | None = None
    baseline_state: str | None = None
    # A "could not judge" note (NCX130: an init behind an accelerator layer the rule cannot
    # follow): shown as a warning on stderr, never a finding that fails the run (_runner.notes_of).
    note: bool = False

    def as_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "path": self.path,
            "line": self.line,
            "column": self.column,
            "code": self.code,
            "message": self.message,
            "detail": self.detail,
            "fix": self.fix.value,
            "applied": self.applied,
            "cell": None if self.cell is None else self.cell.as_json(),
        }
        if self.fingerprint is not None:
            out["fingerprint"] = self.fingerprint
        if self.baseline_state is not None:
            out["baseline_state"] = self.baseline_state
        return out


@dataclass
class FileResult:
    """What one file produced. ``new_text`` is None when nothing is to be written."""

    path: str
    findings: list[Finding] = field(default_factory=list)
    new_text: str | None = None
    error: str | None = None  # one-line reason the file could not be processed
    warnings: list[str] = field(default_factory=list)  # "line: text" (a region a grammar skipped)


@dataclass(frozen=True)
class Options:
    """What the user asked for; every scanner gets the same object."""

    target_torch: tuple[int, int] = (2, 15)
    apply_safe: bool = False  # --write / --diff
    apply_unsafe: bool = False  # --unsafe-fixes (with --write or --diff)
    # Positions of findings left point into the text as given, not into the fixed text (only for
    # notebook cells, whose positions are moved into the written notebook at the end).
    positions_as_given: bool = False
    use_shim: bool = False  # rewrite legacy calls to ncclx_migrate.backend helpers
    select: tuple[str, ...] = ()  # rule-code prefixes; empty = all
    ignore: tuple[str, ...] = ()
    # Deprecated names another file of the run also sets: their add is never safe (_shared).
    shared_names: frozenset[str] = field(default_factory=SharedNames)
    # The run's own helpers across its modules (what they return, which GPU they pick: _xref).
    helpers: Helpers = field(default_factory=Helpers)
    line_length: int | None = None  # for lines a fix adds; None: the project's (see _python._layout)
    # C++ functions the run binds to Python (pybind11, TORCH_LIBRARY) in any of its files:
    # (name, "path:line" of the binding), from the pre-pass (_files/_cpp/_bindings.py).
    cpp_bound: tuple[tuple[str, str], ...] = ()
    # --use-shim: (setup.py, C++ source) pairs of the extensions whose sources the shim fix
    # rewrites, so that setup.py gets the shim's include folder (_files/_cpp/_setup.py).
    cpp_shim_builds: tuple[tuple[str, str], ...] = ()
    # What the run's C++ functions return, from every declaration and definition of the
    # project (the pre-pass, _files/_cpp/_values.py): ("pg:KEY" or "own:KEY", yes) where KEY
    # is ``f`` or ``Class::f``; "pg": declared to return a c10d::ProcessGroup, "own": every
    # definition returns an object the code built as the legacy class.
    cpp_returns: tuple[tuple[str, bool], ...] = ()

    def wants_fix(self, kind: FixKind) -> bool:
        if kind is FixKind.SAFE:
            return self.apply_safe or self.apply_unsafe
        if kind is FixKind.UNSAFE:
            return self.apply_unsafe
        return False


def is_selected(code: str, options: Options) -> bool:
    """ruff's prefix semantics: the longest matching prefix decides; ignore wins a tie."""
    sel = max((len(p) for p in options.select if code.startswith(p)), default=-1)
    if not options.select:
        sel = 0
    ign = max((len(p) for p in options.ignore if code.startswith(p)), default=-1)
    return sel >= 0 and sel > ign
