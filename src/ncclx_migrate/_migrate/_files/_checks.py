"""NCX201/NCX202/NCX203 on what the scanners found, and the per-file collector.

Scanners do not decide anything: they report *where* an environment variable is
assigned (:class:`EnvAssign`) and where ``nccl-legacy`` appears as a backend value
(:class:`BackendUse`), each with the edits that would add, rename or remove it.
This module applies the rules (env facts come only from ``ncclx_migrate._torch.envvars``),
suppression and selection, and turns the chosen edits into a :class:`FileResult`.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from ..._torch.envvars import (
    TOGGLE_VAR,
    EnvKind,
    EnvVar,
    Fix,
    drop_allowed,
    drop_blocked,
    legacy_note,
    lookup,
)
from ..._torch.releases import toggle_meaning
from .._model import FileResult, Finding, FixKind, Options, is_selected
from .._shared import shared_note
from .._suppress import HASH
from ._comments import with_comments
from ._text import Edit, LineIndex, apply_edits, suppressed

__all__ = [
    "BACKEND_WORD",
    "BackendUse",
    "Collector",
    "EnvAssign",
    "backend_value_spans",
    "is_backend_key",
    "is_device_list",
    "is_strong_device_list",
    "mentions_backend",
]

LEGACY = "nccl-legacy"
NCCL2 = "nccl2"
WATCHED = (LEGACY, NCCL2)  # backend names the file rules report (NCX202, NCX204)
BACKEND_WORD = re.compile(r"backend", re.IGNORECASE)
# A device:backend list such as "cpu:gloo,cuda:nccl-legacy", with torch's device types
# (an image reference such as "trainer:nccl2" is not one).
_DEVICES = "cpu|cuda|xpu|hpu|mps|mtia|meta|privateuseone"
_ENTRY = rf"(?:{_DEVICES}):[A-Za-z0-9_-]+"
_DEVICE_LIST = re.compile(rf"^{_ENTRY}(?:,{_ENTRY})*$")

AddFn = Callable[[str], "list[Edit] | None"]
# (new name, old name set at this one place only and never unset) -> edits or None
KeepFn = Callable[[str, bool], "list[Edit] | None"]
_UNSET = (r"(?:\bunset\b[^\n;&|]*?|(?:-u|--unset)[ =]|\bdel\b[^\n]*?|\.pop\(\s*)[\"']?({names})\b")  # unset X, env -u X, del os.environ[X], .pop(X)


def is_backend_key(key: str) -> bool:
    """A key, flag or variable name that names a backend (``--dist-backend``, ``DIST_BACKEND``,
    ``trainer.backend``)."""
    return bool(BACKEND_WORD.search(key))


def mentions_backend(value: str) -> bool:
    return any(name in value for name in WATCHED)


def is_device_list(value: str) -> bool:
    """``cuda:nccl-legacy`` or ``cpu:gloo,cuda:nccl-legacy``: torch's device:backend syntax."""
    return bool(_DEVICE_LIST.match(value))


def is_strong_device_list(value: str) -> bool:
    """A device list with several entries (``cpu:gloo,cuda:nccl2``): unmistakably a torch
    backend string wherever it appears, so it may be fixed even outside a backend key."""
    return "," in value and is_device_list(value)


def backend_value_spans(value: str) -> list[tuple[int, str]]:
    """(offset, name) of each watched backend name in ``value`` when the whole value is a
    backend value: exactly the name, or a device list with a ``<device>:<name>`` entry."""
    if value in WATCHED:
        return [(0, value)]
    if is_device_list(value):
        spans = []
        pos = 0
        for part in value.split(","):
            backend = part.split(":", 1)[1]
            if backend in WATCHED:
                spans.append((pos + part.index(":") + 1, backend))
            pos += len(part) + 1
        return spans
    return []


@dataclass
class EnvAssign:
    """One place that sets an environment variable."""

    name: str
    name_start: int  # absolute offset of the name
    value: str | None  # the literal value, None when computed (``$X``, ``$(..)``)
    raw_value: str = ""  # the value as written (quotes included)
    value_start: int = -1  # absolute offset of raw_value (-1: unknown)
    default: str | None = None  # literal default of ``${X:-d}``-style values
    add: AddFn | None = None  # edits adding ``NEW=<same value>`` next to this one
    remove: Callable[[], list[Edit] | None] | None = None
    also_lines: tuple[int, ...] = ()  # other 0-based lines whose suppression comment counts
    in_cell: str = ""  # message prefix for notebook cells
    # Edits adding NEW so that it takes OLD's value only where NEW is not inherited
    # (``NEW="${NEW-$OLD}"``): what torch reads (NEW, then OLD) stays the same whatever the
    # job inherits.  Only these make the add fix safe; ``add`` overwrites NEW (unsafe).
    keep_add: KeepFn | None = None
    # False for a Dockerfile ``ARG``: a build argument is in the environment of the build's
    # ``RUN`` commands only, never the container's, so only its backend value is checked.
    sets_env: bool = True
    # Why no safe add is offered here, beyond the form (added to the unsafe fix's detail).
    unsafe_why: str = ""


@dataclass
class BackendUse:
    """A watched backend name at ``start`` where a backend value is expected (or merely likely)."""

    start: int
    fixable: bool  # True only where it clearly is a torch.distributed backend value
    where: str  # the flag/key/name it belongs to, for the message
    name: str = LEGACY  # which backend name (WATCHED)
    also_lines: tuple[int, ...] = ()
    in_cell: str = ""


@dataclass
class _Via:
    """A variable whose value reaches a backend position (``--backend "$B"``)."""

    where: str  # the first flag or key it reaches, for the message
    fixable: bool  # every reference to it in the file is a backend position


@dataclass
class _Hit:
    offset: int
    code: str
    message: str
    fix: FixKind
    edits: list[Edit] | None
    also_lines: tuple[int, ...]
    detail: str = ""  # the why and evidence (Finding.detail); message stays one short sentence


@dataclass
class Collector:
    path: str
    text: str
    options: Options
    comments: tuple[str, ...] = (HASH,)  # the kind's comment markers, which an `ncclx: ignore` follows
    # Extra 0-based lines whose comment suppresses a finding on a given line (Dockerfile:
    # the comment line above an instruction).
    extra_suppress: dict[int, list[int]] = field(default_factory=dict)
    assigns: list[EnvAssign] = field(default_factory=list)
    backends: list[BackendUse] = field(default_factory=list)
    # Names set elsewhere in the same file that this collector does not see (notebooks:
    # other cells), so that a replacement added there counts as present here.
    also_assigned: frozenset[str] = frozenset()
    # Variables referenced (``$B``, ``${B}``) where a backend value is expected, with the
    # flag or key each reference is the value of.
    backend_refs: dict[str, list[str]] = field(default_factory=dict)
    # Where the text is read by something before the shell (a notebook's `!` line, which
    # IPython expands): given a fix's kind and edits, the kind and edits to use, and why.
    vet: Callable[[FixKind, list[Edit]], tuple[FixKind, list[Edit], str]] | None = None
    taken: list[Edit] = field(default_factory=list)  # the edits result() applied
    # "line: text" per region the kind's grammar could not read that may hold a finding,
    # shown on stderr as warnings.  The rest is checked, but no fix is applied: whether a
    # fix is safe depends on what else the file sets, which such a region may hold.
    skipped: list[str] = field(default_factory=list)

    def env(self, a: EnvAssign) -> None:
        self.assigns.append(a)

    def backend(self, b: BackendUse) -> None:
        self.backends.append(b)

    def backend_ref(self, name: str, where: str) -> None:
        self.backend_refs.setdefault(name, []).append(where)

    def _via(self, name: str, sites: int) -> _Via | None:
        """How the value assigned to ``name`` is followed to a backend position: fixable
        where it is assigned at one place and every reference to it anywhere in the text
        (comments included) is one of those positions, so changing the value changes
        nothing else that this file shows."""
        wheres = self.backend_refs.get(name)
        if not wheres or not name:
            return None
        refs = len(re.findall(rf"\$\{{?{re.escape(name)}\b|\$\({re.escape(name)}\)", self.text))
        return _Via(f"{name}, passed to {wheres[0]}", sites == 1 and refs == len(wheres))

    # ------------------------------------------------------------------ rules
    def _hits(self) -> list[_Hit]:
        hits: list[_Hit] = []
        assigned = {a.name for a in self.assigns if a.sets_env} | self.also_assigned
        sites = Counter(a.name for a in self.assigns)
        names = "|".join(sorted({re.escape(a.name) for a in self.assigns if a.name}))
        unset = {m.group(1) for m in re.finditer(_UNSET.format(names=names), self.text)} if names else set()
        seen: set[tuple[int, str]] = set()
        for a in self.assigns:
            alone = (sites[a.name] == 1 and a.name not in unset and a.name not in self.also_assigned
                     and a.name not in self.options.shared_names)  # another file may set it later
            for hit in _env_hits(a, assigned, self.options, alone, self._via(a.name, sites[a.name])):
                key = (hit.offset, hit.code)
                if key not in seen:
                    seen.add(key)
                    hits.append(hit)
        for b in self.backends:
            found = _backend_hit(b, self.options)
            if found is None or (found.offset, found.code) in seen:
                continue
            seen.add((found.offset, found.code))
            hits.append(found)
        return hits

    def result(self) -> FileResult:
        index = LineIndex(self.text)
        findings: list[Finding] = []
        taken: list[Edit] = []
        left: list[tuple[Finding, int]] = []  # findings not fixed, with their offset
        for hit in sorted(self._hits(), key=lambda h: (h.offset, h.code)):
            if not is_selected(hit.code, self.options):
                continue
            if self.vet is not None and hit.edits:
                fix, vetted, why = self.vet(hit.fix, hit.edits)
                hit = replace(hit, fix=fix, edits=vetted, detail=f"{hit.detail} {why}".strip())
            line = index.line_of(hit.offset)
            lines = [line, *hit.also_lines, *self.extra_suppress.get(line, ())]
            if any(suppressed(index.line_text(n), hit.code, m)
                   for n in lines if 0 <= n < len(index) for m in self.comments):
                continue
            row, col = index.position(hit.offset)
            applied = False
            if hit.edits is not None and self.options.wants_fix(hit.fix) and not self.skipped:
                edits = [with_comments(index, e) for e in hit.edits]
                if not any(_overlaps(e, t) for e in edits for t in taken):
                    taken.extend(edits)
                    applied = True
            findings.append(Finding(self.path, row, col, hit.code, hit.message, hit.fix, applied, hit.detail))
            if not applied:
                left.append((findings[-1], hit.offset))
        self.taken = taken  # (what the fixes changed: _lines.line_map_edits)
        new_text = apply_edits(self.text, taken) if taken else None
        if new_text == self.text:
            new_text = None
        if new_text is not None and not self.options.positions_as_given:
            # What is left points into the file as --write writes it and --diff prints it.
            new_index = LineIndex(new_text)
            for f, offset in left:
                f.line, f.column = new_index.position(_moved(offset, taken))
        return FileResult(self.path, findings, new_text, warnings=self.skipped)


def _moved(offset: int, edits: list[Edit]) -> int:
    """Where ``offset`` of the old text lands once ``edits`` are applied (an offset inside a
    replaced span goes to the start of its replacement)."""
    shift = 0
    for e in edits:
        if e.end <= offset:  # an insertion at ``offset`` goes before it
            shift += len(e.text) - (e.end - e.start)
        elif e.start < offset < e.end:
            return e.start + shift
    return offset + shift


def _overlaps(a: Edit, b: Edit) -> bool:
    """Two edits touch the same text (an insertion clashes only strictly inside a span)."""
    return a.start < b.end and b.start < a.end


def _show(a: EnvAssign) -> str:
    if a.value is not None:
        return f'{a.name}="{a.value}"'
    return f"{a.name}={a.raw_value}" if a.raw_value else a.name


def _fixed(kind: FixKind, edits: list[Edit] | None) -> tuple[FixKind, list[Edit] | None]:
    """A fix kind is only advertised when the scanner can express its edits here."""
    return (kind, edits) if edits is not None else (FixKind.NONE, None)


def _remove(a: EnvAssign) -> list[Edit] | None:
    return a.remove() if a.remove is not None else None


def _env_hits(a: EnvAssign, assigned: set[str], options: Options, alone: bool,
              via: _Via | None = None) -> list[_Hit]:
    hits: list[_Hit] = []
    if a.value is not None and mentions_backend(a.value) and a.value_start >= 0:
        # raw_value may carry quotes: find the literal in the raw text.
        base = a.value_start + a.raw_value.find(a.value) if a.value in a.raw_value else -1
        fixable = is_backend_key(a.name) or is_strong_device_list(a.value)
        where = a.name or "a value"
        if not fixable and via is not None:  # `B=nccl2 ... --backend "$B"`
            fixable, where = via.fixable, via.where
        for s, name in backend_value_spans(a.value) if base >= 0 else []:
            if name == NCCL2 and not (fixable or via or is_device_list(a.value)):
                continue  # a bare "nccl2" (a job or container name?) is not reported
            use = BackendUse(base + s, fixable, where, name=name,
                             also_lines=a.also_lines, in_cell=a.in_cell)
            hit = _backend_hit(use, options)
            if hit is not None:
                hits.append(hit)
    if not a.sets_env:
        return hits
    if a.name == TOGGLE_VAR:
        hit = _toggle_hit(a, options)
        if hit is not None:
            hits.append(hit)
        return hits
    row = lookup(a.name)
    if row is None or not row.file_code or row.kind in (EnvKind.CURRENT, EnvKind.TOGGLE):
        return hits
    if row.replacement is not None and row.replacement in assigned:
        return hits  # the current name is already set in this file: nothing left to do
    hits.append(_row_hit(a, row, alone, shared_note(a.name, options), options.target_torch))
    return hits


def _toggle_hit(a: EnvAssign, options: Options) -> _Hit | None:
    code = "NCX201"
    value = a.value
    if value is None:
        if a.default is None:
            short = f'{TOGGLE_VAR} is computed: only "0" rolls back, only "1" opts in'
            msg = (f"{TOGGLE_VAR} is set from {a.raw_value or 'the environment'}: only the literal "
                   '"0" rolls "nccl" back to legacy ProcessGroupNCCL (torch 2.15) and only "1" '
                   "opts in to nccl2 (2.14); the rollback was announced for 2.15 only")
        else:
            meaning = toggle_meaning(a.default)
            what = {"rollback": "rolls back to legacy ProcessGroupNCCL",
                    "opt-in": "opts in to nccl2 (redundant from 2.15 on)",
                    }.get(meaning, "has no effect (only the literal \"0\" rolls back)")
            short = f'{TOGGLE_VAR} defaults to "{a.default}": ' + {"rollback": "a rollback to legacy NCCL",
                                                                 "opt-in": "a redundant opt-in to nccl2"}.get(
                meaning, 'no effect (only "0" rolls back)')
            msg = (f'{TOGGLE_VAR} defaults to "{a.default}" here, which {what}; '
                   "the rollback was announced for torch 2.15 only")
        return _Hit(a.name_start, code, a.in_cell + short, FixKind.NONE, None, a.also_lines, msg)
    meaning = toggle_meaning(value)
    if meaning == "rollback":
        short = f"{TOGGLE_VAR}=0 rolls back to legacy: remove it once on nccl2"
        msg = (f'{TOGGLE_VAR}=0 makes "nccl" build the legacy ProcessGroupNCCL on torch 2.15; '
               "this rollback was announced for 2.15 only: remove it once the job runs on nccl2")
        kind, edits = _fixed(FixKind.UNSAFE, _remove(a))
    elif meaning == "opt-in":
        if options.target_torch < (2, 15):
            return None  # the opt-in is what makes 2.14 use nccl2; it is still needed
        short = f"{TOGGLE_VAR}=1 is redundant from torch 2.15 on: remove it"
        msg = (f"{TOGGLE_VAR}=1 is redundant from torch 2.15 on (nccl2 is the default); "
               "removing it is left to --unsafe-fixes because scripts may read it back")
        kind, edits = _fixed(FixKind.UNSAFE, _remove(a))
    else:
        short = f'{_show(a)} does not roll back: write "0" or remove it'
        msg = (f'{_show(a)} has no effect: only the literal "0" rolls back to legacy '
               'ProcessGroupNCCL (torch 2.15 still builds nccl2) and only "1" opts in on 2.14; '
               'write "0" if a rollback was meant, or remove it')
        kind, edits = _fixed(FixKind.UNSAFE, _remove(a))
    return _Hit(a.name_start, code, a.in_cell + short, kind, edits, a.also_lines, msg)


def _row_hit(a: EnvAssign, row: EnvVar, alone: bool, note: str = "", oldest: tuple[int, int] = (2, 15)) -> _Hit:
    """``note``: why the safe add is withheld, when another file of the run sets the name;
    ``oldest``: the oldest torch the project supports (a fix never drops a name it reads)."""
    code = row.file_code
    repl = row.replacement
    kind = FixKind.NONE
    edits: list[Edit] | None = None
    extra = ""
    drop = drop_allowed(row, oldest)
    if row.kind is EnvKind.DEPRECATED:
        assert repl is not None
        short = f"{a.name} is deprecated: add {repl}"
        if row.fix is Fix.ADD:
            # Safe only in a form that keeps torch's reading (NEW, then OLD) for every
            # inherited environment; setting NEW outright overrides an inherited NEW.
            kind, edits = _fixed(FixKind.SAFE, a.keep_add(repl, alone) if a.keep_add else None)
            if kind is FixKind.NONE:
                kind, edits = _fixed(FixKind.UNSAFE, a.add(repl) if a.add else None)
                if kind is FixKind.UNSAFE:
                    extra = (note + a.unsafe_why + f" The fix sets {repl} outright, which overrides a {repl} the job inherits "
                             f"(torch reads {repl} first, then {a.name})"
                             + ("." if note or a.unsafe_why else "; no form here keeps it, so it is unsafe."))
        if kind is FixKind.NONE and Fix.RENAME in (row.fix, row.unsafe_fix) and not drop:
            extra += drop_blocked(row, oldest)
        elif kind is FixKind.NONE and Fix.RENAME in (row.fix, row.unsafe_fix):
            # Renaming drops the old name: unsafe, and only offered where adding is not possible.
            kind, edits = FixKind.UNSAFE, [Edit(a.name_start, a.name_start + len(a.name), repl)]
            short = f"{a.name} is deprecated: use {repl}"
    elif row.kind is EnvKind.IGNORED:
        short = f"nccl2 ignores {a.name}" + (f": use {repl}" if repl else " (nothing replaces it)")
        if row.unsafe_fix is Fix.ADD and repl is not None:
            kind, edits = _fixed(FixKind.UNSAFE, a.add(repl) if a.add else None)
    elif drop:  # OBSOLETE
        short = f"{a.name} does nothing on torch 2.15: delete it"
        if row.unsafe_fix is Fix.RENAME and repl is None:
            kind, edits = _fixed(FixKind.UNSAFE, _remove(a))
    else:  # OBSOLETE, and an older release the project supports reads it
        short = f"{a.name} is still read by torch {oldest[0]}.{oldest[1]} (supported here): keep it"
        extra = drop_blocked(row, oldest)
    return _Hit(a.name_start, code, a.in_cell + short, kind, edits, a.also_lines,
                f"{row.why} Evidence: {row.evidence}.{legacy_note(row, oldest)}{extra}")


def _backend_hit(b: BackendUse, options: Options) -> _Hit | None:
    if b.name == NCCL2:
        return _nccl2_hit(b, options)
    if b.fixable:
        msg = (f'"{LEGACY}" ({b.where}) selects the legacy ProcessGroupNCCL, a rollback name '
               'with no announced future: use "nccl", which builds nccl2 on torch 2.15 and '
               "legacy on 2.14")
        short = f'"{LEGACY}" is a rollback backend name: use "nccl"'
        return _Hit(b.start, "NCX202", b.in_cell + short, FixKind.UNSAFE,
                    [Edit(b.start, b.start + len(LEGACY), "nccl")], b.also_lines, msg)
    msg = (f'"{LEGACY}" looks like a torch.distributed backend value ({b.where}); it selects the '
           'legacy ProcessGroupNCCL, a rollback name with no announced future: use "nccl" '
           "if it reaches init_process_group/new_group")
    short = f'"{LEGACY}" looks like the rollback backend name: use "nccl" if it is'
    return _Hit(b.start, "NCX202", b.in_cell + short, FixKind.NONE, None, b.also_lines, msg)


def _nccl2_hit(b: BackendUse, options: Options) -> _Hit | None:
    """NCX204, with NCX104's reading of the target: 2.14 is where "nccl2" is the way to get
    nccl2 (no finding), 2.13 lacks it, and from 2.15 "nccl" builds the same thing."""
    if options.target_torch < (2, 14):
        msg = (f'"{NCCL2}" ({b.where}) is not a backend on torch 2.13 ("AssertionError: Unknown '
               'backend type nccl2"); use "nccl" there, or raise --target-torch')
        short = f'"{NCCL2}" does not exist on torch 2.13: use "nccl" or raise --target-torch'
        return _Hit(b.start, "NCX204", b.in_cell + short, FixKind.NONE, None, b.also_lines, msg)
    if options.target_torch < (2, 15):
        return None
    msg = (f'"{NCCL2}" ({b.where}) spelled out: from torch 2.15 "nccl" builds the same '
           'ProcessGroupNCCL2, while the explicit name makes get_backend() return "nccl2" and '
           'pg.name() "custom", so == "nccl" checks (torch\'s own included) take their fallback '
           'paths: use "nccl"')
    short = f'"{NCCL2}" is what "nccl" builds from torch 2.15 on: spell it "nccl"'
    if b.fixable:
        return _Hit(b.start, "NCX204", b.in_cell + short, FixKind.UNSAFE,
                    [Edit(b.start, b.start + len(NCCL2), "nccl")], b.also_lines, msg)
    return _Hit(b.start, "NCX204", b.in_cell + short, FixKind.NONE, None, b.also_lines, msg)
