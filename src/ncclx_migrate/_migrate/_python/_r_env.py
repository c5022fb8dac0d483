"""NCX101/102 (the rollback toggle) and NCX120/122/123 (deprecated or ignored env names).

Every fact about a variable comes from ``ncclx_migrate._torch.envvars``.  A "set site" is a
place that gives a variable a value: ``os.environ[K] = v``, ``os.environ.setdefault``,
``os.environ.update``, ``os.putenv``, ``monkeypatch.setenv``, a ``set*``/``put*`` helper
called with the name, a dict literal keyed by the name (env dicts handed to subprocess or
launchers), and ``K=v`` inside a string (shell commands).  Reads are never findings.
Removing a variable is never a safe fix: code may read it back as its own setting.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

import libcst as cst

from ..._torch.envvars import (
    ENV_VARS,
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
from .._model import FixKind
from .._shared import shared_note
from ._ctx import Analyzer, Edit, on
from ._edits import insert_after, remove, remove_statement, split_call, string_like
from ._flow import resolve
from ._scope import Scope
from ._wrap import wrap_assigned

__all__ = ["ENV_PRECHECK"]

_CODES = ("NCX101", "NCX102", "NCX120", "NCX122", "NCX123")
_NAMES = sorted((v.name for v in ENV_VARS if v.kind is not EnvKind.CURRENT), key=len, reverse=True)
ENV_PRECHECK = re.compile("|".join(re.escape(n) for n in _NAMES))
_IN_TEXT = re.compile(r"(?<![A-Za-z0-9_])(" + "|".join(re.escape(n) for n in _NAMES) + r")=([^\s;&|'\"]*)")
# Spellings, only for the wording: what a value does comes from _torch.envvars.toggle_meaning.
_FALSEY = {"false", "no", "off", "n", "f", ""}
_TRUTHY = {"true", "yes", "on", "y", "t"}
_SETTER_ATTRS = {"setdefault", "putenv", "setenv"}
# The new names of deprecated variables: where code gives one a value, the pair is handled.
_NEW_NAMES = sorted({v.replacement for v in ENV_VARS if v.replacement}, key=len, reverse=True)
_NEW_IN_TEXT = re.compile(r"(?<![A-Za-z0-9_$])(" + "|".join(re.escape(n) for n in _NEW_NAMES) + r")=")
_SIMPLE = (cst.SimpleString, cst.Integer, cst.Name, cst.Attribute)


@dataclass
class _Site:
    node: cst.CSTNode  # where the finding points
    name: str
    key: cst.SimpleString | None  # the literal holding the name (None for keywords/text)
    value: cst.BaseExpression | None
    text_value: str | None  # the value when it is known text
    removal: list[tuple[cst.CSTNode, Edit]] = field(default_factory=list)
    add: list[tuple[cst.CSTNode, Edit]] | None = None  # builder result filled lazily
    add_builder: object = None  # sets the new name outright: overrides an inherited one (unsafe)
    keep_builder: object = None  # NEW takes OLD's value only where not inherited (safe)
    scope: cst.CSTNode | None = None
    order: int = 0
    where: Scope | None = None
    suites: tuple[int, ...] = ()


def _sites(a: Analyzer) -> list[_Site]:
    s = a.facts.setdefault("env_sites", [])
    assert isinstance(s, list)
    return s


def _str(node: cst.BaseExpression | None) -> str | None:
    if isinstance(node, cst.SimpleString):
        v = node.evaluated_value
        return v if isinstance(v, str) else None
    if isinstance(node, cst.Integer):
        return node.value
    return None


def _is_environ(a: Analyzer, node: cst.BaseExpression) -> bool:
    return isinstance(node, (cst.Name, cst.Attribute)) and "os.environ" in a.qnames(node)


def _keep_after(a: Analyzer, line: cst.CSTNode | None, mapping: cst.BaseExpression, key: cst.SimpleString,
                ) -> object:
    """A builder adding ``mapping.setdefault(NEW, mapping[OLD])`` on the line after ``line``.

    torch reads NEW, then OLD: NEW keeps an inherited value and otherwise takes OLD's,
    so what torch reads (here and in children given ``mapping``) does not change."""
    if not (isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1):
        return None
    if not isinstance(mapping, (cst.Name, cst.Attribute)):
        return None  # evaluated twice: only plain names

    def add(new_name: str) -> list[tuple[cst.CSTNode, Edit]]:
        old = cst.Subscript(value=mapping, slice=[cst.SubscriptElement(cst.Index(key))])
        call = cst.Call(func=cst.Attribute(value=mapping, attr=cst.Name("setdefault")),
                        args=[cst.Arg(string_like(key, new_name)), cst.Arg(old)])
        text = a.line(a.pos(line).start.line)
        call = split_call(call, text[: len(text) - len(text.lstrip())], a.line_length())
        new_line = line.with_changes(body=[cst.Expr(call)], leading_lines=[],
                                     trailing_whitespace=cst.TrailingWhitespace())
        return [(line, lambda u: cst.FlattenSentinel([u, new_line]))]

    return add


def _note_set(a: Analyzer, name: str) -> None:
    """Record that code here gives ``name`` a value (in the set-site shapes, not compared)."""
    if name in _NEW_NAMES and not any(isinstance(n, cst.Comparison) for n in a.stack):
        sets = a.facts.setdefault("new_names_set", set())
        assert isinstance(sets, set)
        sets.add(name)


def _new_site(a: Analyzer, node: cst.CSTNode, name: str, key: cst.SimpleString | None,
              value: cst.BaseExpression | None) -> _Site | None:
    row = lookup(name)
    if row is None or row.kind is EnvKind.CURRENT:
        return None
    if any(isinstance(n, cst.Comparison) for n in a.stack):
        return None  # `assert env == {...}`, `x in (...)`: compared, not set
    site = _Site(node, name, key, value, _str(value))
    site.scope = a.enclosing_function()
    site.order = a.order
    site.where = a.scope()
    site.suites = a.suites()
    _sites(a).append(site)
    return site


# --- set-site shapes ---
@on(cst.Assign, *_CODES)
def _subscript_assign(a: Analyzer, node: cst.Assign) -> None:
    if len(node.targets) != 1:
        return
    t = node.targets[0].target
    if not (isinstance(t, cst.Subscript) and len(t.slice) == 1):
        return
    idx = t.slice[0].slice
    if not (isinstance(idx, cst.Index) and isinstance(idx.value, cst.SimpleString)):
        return
    name = _str(idx.value)
    if name is not None:
        _note_set(a, name)
    # os.environ[K] = v, or any mapping keyed by a table name: env = os.environ.copy();
    # env["TORCH_DIST_USE_NCCL2"] = "0" for a child process, a launcher's env_vars dict.
    if name is None or (lookup(name) is None and not _is_environ(a, t.value)):
        return
    site = _new_site(a, node, name, idx.value, node.value)
    if site is None:
        return
    line = a.parent()
    site.removal = remove_statement(node, line)
    if isinstance(node.value, (cst.SimpleString, cst.Integer)):  # same value on every run
        site.keep_builder = _keep_after(a, line, t.value, idx.value)

    def add(new_name: str, key: cst.SimpleString = idx.value, sub: cst.Subscript = t) -> list[tuple[cst.CSTNode, Edit]]:
        new_target = cst.AssignTarget(
            target=sub.with_changes(slice=[cst.SubscriptElement(cst.Index(string_like(key, new_name)))])
        )
        return [(node, lambda u: wrap_assigned(a, node, u.with_changes(targets=[*u.targets, new_target])))]

    site.add_builder = add


@on(cst.Call, *_CODES)
def _call(a: Analyzer, node: cst.Call) -> None:
    func = node.func
    attr = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
    if not node.args:
        return
    first = node.args[0]
    # os.environ.update({...}) / os.environ.update(K=v) / dict(K=v)
    if attr in ("update", "dict"):
        for arg in node.args:
            if arg.keyword is not None:
                _note_set(a, arg.keyword.value)
            if arg.keyword is not None and lookup(arg.keyword.value) is not None:
                site = _new_site(a, arg, arg.keyword.value, None, arg.value)
                if site is not None:
                    site.removal = remove(arg)
                    site.add_builder = _kw_adder(a, node, arg)
                    small, line = a.statement()
                    if (attr == "update" and isinstance(func, cst.Attribute) and isinstance(small, cst.Expr)
                            and isinstance(arg.value, (cst.SimpleString, cst.Integer))):
                        key = cst.SimpleString(f'"{arg.keyword.value}"')
                        site.keep_builder = _keep_after(a, line, func.value, key)
        return
    if first.keyword is not None or not isinstance(first.value, cst.SimpleString) or len(node.args) < 2:
        return
    name = _str(first.value)
    lowered = attr.lower()
    if name is None or not (attr in _SETTER_ATTRS or "set" in lowered or "put" in lowered or "export" in lowered):
        return
    if lowered.startswith("get") or "unset" in lowered:
        return
    _note_set(a, name)
    if lookup(name) is None:
        return
    site = _new_site(a, node, name, first.value, node.args[1].value)
    if site is None:
        return
    small, line = a.statement()
    if isinstance(small, cst.Expr):
        site.removal = remove_statement(small, line)
        if isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1 and isinstance(node.args[1].value, _SIMPLE):
            def add(new_name: str, line: cst.SimpleStatementLine = line, key: cst.SimpleString = first.value) -> list[tuple[cst.CSTNode, Edit]]:
                new_call = node.with_changes(args=[node.args[0].with_changes(value=string_like(key, new_name)), *node.args[1:]])
                new_line = line.with_changes(body=[cst.Expr(new_call)], leading_lines=[])
                return [(line, lambda u: cst.FlattenSentinel([u, new_line]))]
            site.add_builder = add
            if attr == "setdefault" and isinstance(func, cst.Attribute):
                site.keep_builder = _keep_after(a, line, func.value, first.value)


def _kw_adder(a: Analyzer, call: cst.Call, arg: cst.Arg) -> object:
    if not isinstance(arg.value, _SIMPLE):
        return None

    def add(new_name: str) -> list[tuple[cst.CSTNode, Edit]]:
        return insert_after(a, call, arg, arg.with_changes(keyword=cst.Name(new_name)))

    return add


@on(cst.DictElement, *_CODES)
def _dict_elem(a: Analyzer, node: cst.DictElement) -> None:
    if not isinstance(node.key, cst.SimpleString):
        return
    name = _str(node.key)
    if name is not None:
        _note_set(a, name)
    if name is None or lookup(name) is None:
        return
    site = _new_site(a, node, name, node.key, node.value)
    if site is None:
        return
    site.removal = remove(node)
    container, arg, call = a.parent(), a.parent(2), a.parent(3)
    if isinstance(node.value, _SIMPLE) and isinstance(container, cst.Dict):
        key = node.key
        outer = call if isinstance(arg, cst.Arg) and isinstance(call, cst.Call) else None

        def add(new_name: str, d: cst.Dict = container) -> list[tuple[cst.CSTNode, Edit]]:
            return insert_after(a, d, node, node.with_changes(key=string_like(key, new_name)), outer)

        site.add_builder = add


@on(cst.SimpleString, *_CODES)
def _in_text(a: Analyzer, node: cst.SimpleString) -> None:
    if "=" not in node.value or isinstance(a.parent(), cst.Expr):  # docstrings describe, not set
        return
    v = _str(node)
    if v is None:
        return
    for m in _NEW_IN_TEXT.finditer(v):  # a shell command in a string setting the new name
        _note_set(a, m.group(1))
    for m in _IN_TEXT.finditer(v):
        site = _new_site(a, node, m.group(1), None, None)
        if site is not None:
            site.text_value = m.group(2)
            site.value = None


@on(cst.Module, *_CODES)
def _start(a: Analyzer, node: cst.Module) -> None:
    a.finishers.append(lambda: _finish(a))


def _pg_creations(a: Analyzer) -> list[tuple[cst.CSTNode | None, int, str, cst.CSTNode]]:
    c = a.facts.setdefault("pg_creations", [])
    assert isinstance(c, list)
    return c


@on(cst.Call, "NCX101", "NCX102")
def _pg_creation(a: Analyzer, node: cst.Call) -> None:
    m = a.dist(node.func)
    # is_backend_available("nccl") does not register "nccl" (it returns is_nccl_available()
    # first: distributed_c10d.py:2079-2088, 2.15.0), so it does not consume the toggle.
    if m in ("init_process_group", "new_group", "new_subgroups"):
        _pg_creations(a).append((a.enclosing_function(), a.order, m, node))


# --- findings ---
def _finish(a: Analyzer) -> None:
    sites = _sites(a)
    # A replacement name that code of this file gives a value (the set-site shapes, the
    # setdefault a fix adds included, so a second --write never adds it twice) means the pair
    # is handled here already.  A mention in a comment, a docstring or a Python variable of
    # that name is not a set.  One only read back (`NEW in os.environ`) does not count either:
    # the old name is still reported, its fix unsafe (any other mention counts as a read).
    named = {v.replacement for v in ENV_VARS if v.replacement and v.replacement in a.source}
    noted = a.facts.get("new_names_set", set())
    set_names = {n for n in named if n in noted}
    read_names = named - set_names
    reads_toggle = _reads(a, TOGGLE_VAR)
    counts = Counter(site.name for site in sites)
    for site in sites:
        row = lookup(site.name)
        assert row is not None
        if row.kind is EnvKind.TOGGLE:
            _toggle(a, site, reads_toggle)
        else:
            # Set once and never removed: a later set or unset of the old name would not
            # reach a new name that an earlier fix already gave a value.
            # Nor would one in another file of the run (see _migrate/_shared.py).
            alone = (counts[site.name] == 1 and not _unsets(a, site.name)
                     and site.name not in a.options.shared_names)
            _other(a, site, row, set_names, alone, read_names)


def _reads(a: Analyzer, name: str) -> bool:
    """Does the file read ``name`` back (anything but a set)?  Textual, conservative."""
    pat = re.compile(r"(?:getenv\(|environ\.get\(|environ\.pop\(|environ\[)\s*['\"]" + re.escape(name)
                     + r"['\"]\s*(\]\s*(=(?!=))?)?")
    return any(m.group(2) is None for m in pat.finditer(a.source))


def _unsets(a: Analyzer, name: str) -> bool:
    pat = (r"(?:\bdel\b[^\n]*|\.pop\(\s*|unsetenv\(\s*|delenv\(\s*|\bunset\b[^\n;&|]*?)['\"]?"
           + re.escape(name) + r"\b")
    return re.search(pat, a.source) is not None


def _toggle(a: Analyzer, site: _Site, reads_back: bool) -> None:
    v = site.text_value
    if v is None and isinstance(site.value, cst.Name):  # a module constant or a local set once
        lit = resolve(a, site.value, site.where)
        v = _str(lit)
    target = a.options.target_torch
    late = [
        (call, what)
        for scope, order, what, call in _pg_creations(a)
        if scope is site.scope and order < site.order
    ]
    tail = ""
    late_msg = ""  # the message when the set comes too late to matter (the long text is the detail)
    if late:
        call, what = late[0]
        line = a.pos(call).start.line
        tail = (
            f" This set comes after {what}() on line {line}; torch reads the variable once, "
            'when "nccl" is first registered, so it has no effect here.'
        )
        late_msg = f"{TOGGLE_VAR} set after {what}() (line {line}) has no effect: move it up"
    removal = site.removal
    meaning = toggle_meaning(v) if v is not None else None  # the table's reading: only "0"/"1" count
    if meaning == "rollback":
        a.report(site.node, "NCX101",
                 late_msg or f"{TOGGLE_VAR}=0 rolls back to legacy: remove it once on nccl2",
                 FixKind.UNSAFE, removal,
                 detail=f'{TOGGLE_VAR}=0 rolls "nccl" back to legacy ProcessGroupNCCL on torch 2.15 '
                 "(a rollback announced for 2.15 only); remove it once the job runs on nccl2." + tail)
    elif v is not None and v.strip().lower() in _FALSEY:
        a.report(site.node, "NCX101",
                 late_msg or f'{TOGGLE_VAR}={v!r} does not roll back: write "0" or remove it',
                 FixKind.UNSAFE, removal,
                 detail=f'{TOGGLE_VAR}={v!r} does NOT roll back: only the literal "0" does, so torch 2.15 '
                 'still builds nccl2 (and 2.14 stays on legacy, as if unset). Use "0" to roll back, '
                 "or remove it." + tail)
    elif meaning == "opt-in" or (v is not None and v.strip().lower() in _TRUTHY):
        if target < (2, 15):
            if v != "1":
                a.report(site.node, "NCX102",
                         late_msg or f'{TOGGLE_VAR}={v!r} does not opt in on torch 2.14: write "1"',
                         detail=f'{TOGGLE_VAR}={v!r} does not opt in on torch 2.14: only the literal "1" does.' + tail)
            return
        spelled = "" if v == "1" else f' ({v!r} never opted in on 2.14: only "1" does)'
        a.report(site.node, "NCX102",
                 late_msg or f"{TOGGLE_VAR}={v} is redundant from torch 2.15 on: remove it",
                 FixKind.UNSAFE, removal,  # never safe: an inherited "0" would then roll back
                 detail=f"{TOGGLE_VAR}={v} is redundant: nccl2 is the default from torch 2.15{spelled}." + tail
                 + (" The file reads the variable back, so removing it is not safe." if reads_back else "")
                 + f' Removing it is unsafe: a {TOGGLE_VAR}="0" the job inherits would then roll back.')
    else:
        shown = "an unresolved value" if v is None else repr(v)
        a.report(site.node, "NCX101",
                 late_msg or f'{TOGGLE_VAR} is {shown}: only "0" rolls back, only "1" opts in',
                 FixKind.UNSAFE, removal,
                 detail=f'{TOGGLE_VAR} is set to {shown}: only the literal "0" rolls "nccl" back to legacy '
                 '(2.15) and only "1" opts in (2.14); any other value behaves as unset.' + tail)


def _other(a: Analyzer, site: _Site, row: EnvVar, set_names: set[str], alone: bool,
           read_names: set[str]) -> None:
    code = row.py_code
    rep = row.replacement
    o = a.options
    msg = f"{row.name} changes meaning under nccl2: see `ncclx explain {code}`"
    detail = f"{row.why} Evidence: {row.evidence}.{legacy_note(row, o.target_torch)}"
    if row.kind is EnvKind.DEPRECATED:
        msg = f"{row.name} is deprecated: add {rep}"
    elif row.kind is EnvKind.IGNORED:
        msg = f"nccl2 ignores {row.name}" + (f": use {rep}" if rep else " (nothing replaces it)")
    elif row.kind is EnvKind.OBSOLETE:
        msg = f"{row.name} does nothing on torch 2.15: delete it"
    builder = site.add_builder if callable(site.add_builder) else None
    keep = site.keep_builder if callable(site.keep_builder) and alone else None
    drop = drop_allowed(row, o.target_torch)  # an older supported release may still read it
    if not drop and row.unsafe_fix is Fix.RENAME:
        detail += drop_blocked(row, o.target_torch)
        if row.kind is EnvKind.OBSOLETE:
            msg = f"{row.name} is still read by torch {o.target_torch[0]}.{o.target_torch[1]} (supported here): keep it"
    if rep is not None and rep in set_names:
        # The new name is already set in this file: the safe part is done.
        if row.unsafe_fix is Fix.RENAME and site.removal and drop:
            a.report(site.node, code, f"{row.name} is deprecated and redundant here: remove it",
                     FixKind.UNSAFE, site.removal, detail=detail)
        return
    # (only these two report otherwise under --unsafe-fixes; every other row, the same)
    if row.unsafe_fix is Fix.RENAME and drop and (rep is None or site.key is not None) and a.unsafe_fixes_on():
        if rep is None:
            a.report(site.node, code, msg, FixKind.UNSAFE, site.removal, detail=detail)
            return
        if site.key is not None:
            key = site.key
            a.report(site.node, code, f"{row.name} is deprecated: use {rep}", FixKind.UNSAFE,
                     [(key, lambda u: string_like(key, rep))], detail=detail)
            return
    if row.fix is Fix.ADD and rep is not None and keep is not None:
        if rep in read_names:  # code here looks at the new name: giving it a value changes that
            a.report(site.node, code, msg, FixKind.UNSAFE, keep(rep),
                     detail=detail + f" The file reads {rep} back (e.g. `{rep} in os.environ`), so adding it "
                     "changes what that code sees: unsafe.")
            return
        a.report(site.node, code, msg, FixKind.SAFE, keep(rep), detail=detail)
        return
    if row.fix is Fix.ADD and rep is not None and builder is not None:
        # Setting the new name outright overrides a value the job inherits: unsafe.
        a.report(site.node, code, msg,
                 FixKind.UNSAFE, builder(rep),
                 detail=detail + shared_note(row.name, a.options)
                 + f" The fix sets {rep} outright, which overrides a {rep} the job inherits "
                 f"(torch reads {rep} first, then {row.name}); only `X[OLD] = ...` / `X.setdefault(OLD, ...)` / "
                 "`X.update(OLD=...)` alone on a line, OLD set once and never removed, and no other file of the "
                 "run setting OLD, get the safe form.")
        return
    if row.unsafe_fix is Fix.ADD and rep is not None and builder is not None:
        a.report(site.node, code, msg, FixKind.UNSAFE, builder(rep), detail=detail)
        return
    if row.unsafe_fix is Fix.RENAME and rep is None and drop:
        a.report(site.node, code, msg, FixKind.UNSAFE, site.removal, detail=detail)
        return
    if row.unsafe_fix is Fix.RENAME and site.key is not None and rep is not None and drop:
        key2 = site.key
        a.report(site.node, code, f"{row.name} is deprecated: use {rep}", FixKind.UNSAFE,
                 [(key2, lambda u: string_like(key2, rep))], detail=detail)
        return
    a.report(site.node, code, msg, detail=detail)
