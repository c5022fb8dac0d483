"""The second precheck: which rules can still fire, read from Python's own tree of the file.

The text tests (_engine.PRECHECKS) let through a file whose words match a rule's trigger:
``init_process_group`` in a docstring, ``cuda.device(`` in a comment, ``SeqNum`` as a type
name.  Such a file would cost a libcst parse and walk (several times an ``ast`` parse) to
find nothing.  Here the tree that the depth check already built (_nesting.checked_ast) is
walked once, and a rule is dropped only where the shapes it reports cannot occur: each test
is a superset of what its handler reports (it ignores values, order and flow, and follows
every alias an import or an assignment can make; a rule without a test is kept).  An
implicitly concatenated string is one ``Constant`` here but several strings to libcst, so a
string is treated as one literal only where its source shows a single token.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ..._torch.envvars import ENV_VARS, EnvKind
from .._model import Options
from ._names import backend_parts

__all__ = ["ast_active"]

_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_LEAVES = frozenset({ast.Name, ast.Load, ast.Store, ast.Del})  # not pushed: nothing in them is looked at
_PICKERS = frozenset({"set_device", "set_device_index", "set_device_idx"})  # (_r_backend._PICKER_NAMES)
_CAUGHT = frozenset({"ValueError", "RuntimeError"})  # what an NCX112 handler names
_BITWISE = frozenset({"BAND", "BOR", "BXOR"})
_NCX111_ANY = frozenset({"_group_start", "_group_end", "_set_default_timeout", "comm_split_count",
                         "_set_enable_nan_check", "get_runtime_nccl_version", "get_build_nccl_version"})
_NCX111_BACKEND = frozenset({"_is_initialized", "uid"})  # only on a ``pg._get_backend(...)`` value
_NCX113_TEXTS = ("WorkNCCL(SeqNum", r"WorkNCCL\(SeqNum", "milliseconds before timing out",
                 "Heartbeat monitor timed out", "watchdog got stuck", "destroy_process_group() was not called",
                 "process group has NOT been destroyed")
_NCX113_BYTES = tuple(t.encode() for t in _NCX113_TEXTS)
_DUMPS = ("_dump_nccl_trace", "_dump_nccl_trace_json", "_dump_nccl_trace_pickle", "_dump_fr_trace",
          "_dump_fr_trace_json", "_reset_fr_trace")
_NCCL4 = frozenset({"nccl", "nccl2", "nccl-legacy", "nccl-lazy"})
# The environment names the env rules report (a key equal to one, or ``NAME=`` in a string;
# no look-behind here: a literal joined to the text before it may end in a letter).
_ENV_NAMES = frozenset(v.name for v in ENV_VARS if v.kind is not EnvKind.CURRENT)
_ENV_IN_TEXT = re.compile("|".join(re.escape(n) + "=" for n in sorted(_ENV_NAMES, key=len, reverse=True)))
_ENV_CODES = ("NCX101", "NCX102", "NCX120", "NCX122", "NCX123")


def _last(func: ast.expr) -> str | None:
    """The name a call or reference ends in: ``f`` for ``f``, ``g`` for ``x.y.g``."""
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def _dotted_last(node: ast.expr) -> str | None:
    """The last name of a plain dotted path (``a.b.c`` -> ``c``), None for anything else."""
    head: ast.expr = node
    while isinstance(head, ast.Attribute):
        head = head.value
    return _last(node) if isinstance(head, ast.Name) else None


@dataclass
class _Call:
    node: ast.Call
    fn: ast.AST | None  # the enclosing function or lambda (None: module level), as _ctx.enclosing_function
    in_try: bool  # in the body of a ``try`` with a ValueError or RuntimeError handler
    in_with: bool  # the context expression of a ``with`` item


@dataclass
class _Facts:
    """What one walk of the tree shows."""

    source: str
    calls: list[_Call] = field(default_factory=list)
    compares: list[ast.Compare] = field(default_factory=list)
    aliases: dict[str, set[str]] = field(default_factory=dict)  # local name -> last names it may be bound to
    imported: set[str] = field(default_factory=set)  # names an import binds
    values: dict[str, list[ast.expr]] = field(default_factory=dict)  # name -> what ``name = value`` gives it
    defs: set[str] = field(default_factory=set)  # module-level functions
    strings: list[str] = field(default_factory=list)  # str constants, f-string text and keyword names
    # Strings libcst's handlers may skip where they are one literal (NCX103/104, NCX113, env):
    docs: list[ast.Constant] = field(default_factory=list)  # a str statement (a docstring)
    elems: list[ast.Constant] = field(default_factory=list)  # a str element of a tuple/list/set of several
    nccl113: bool = False
    doc113: list[ast.Constant] = field(default_factory=list)  # string statements holding NCX113's text
    ncx111: bool = False
    backend_attr: bool = False  # some ``._get_backend`` (NCX111's _GENERIC members need one)
    generic_111: bool = False
    bitwise_in_try: bool = False
    lazy_init: bool = False
    _lines: list[str] | None = None

    def bound(self, *names: str) -> set[str]:
        """``names`` and every local name an import or assignment may bind to one of them."""
        out = set(names)
        todo = list(names)
        back: dict[str, list[str]] = {}
        for local, targets in self.aliases.items():
            for t in targets:
                back.setdefault(t, []).append(local)
        while todo:
            for local in back.get(todo.pop(), ()):
                if local not in out:
                    out.add(local)
                    todo.append(local)
        return out

    def one_token(self, node: ast.Constant) -> bool:
        """The constant is spelt as one string literal (libcst: a SimpleString)."""
        if self._lines is None:
            # ast numbers lines as the tokenizer does; str.splitlines also splits at \f, \x1c...
            self._lines = re.split(r"(?<=\n)|(?<=\r)(?!\n)", self.source)
        end_line, end_col = node.end_lineno, node.end_col_offset
        if end_line is None or end_col is None:
            return False
        rows = [r.encode() for r in self._lines[node.lineno - 1:end_line]]
        if not rows:
            return False
        if len(rows) == 1:
            text = rows[0][node.col_offset:end_col]
        else:
            text = rows[0][node.col_offset:] + b"".join(rows[1:-1]) + rows[-1][:end_col]
        try:
            toks = tokenize.generate_tokens(io.StringIO("(" + text.decode() + ")").readline)
            return sum(t.type == tokenize.STRING for t in toks) == 1
        except (tokenize.TokenError, SyntaxError, UnicodeDecodeError):
            return False


def _walk(tree: ast.Module, source: str) -> _Facts:
    f = _Facts(source)
    f.defs = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    docs: set[int] = set()  # ids of the values of expression statements
    elems: set[int] = set()  # ids of the elements of tuples, lists and sets of several
    slices: set[int] = set()  # ids of subscript slices (a tuple there is no libcst Tuple)
    withs: set[int] = set()
    todo: list[tuple[ast.AST, ast.AST | None, bool]] = [(tree, None, False)]
    while todo:
        node, fn, in_try = todo.pop()
        t = type(node)
        if t is ast.Call:
            assert isinstance(node, ast.Call)
            f.calls.append(_Call(node, fn, in_try, id(node) in withs))
            for kw in node.keywords:
                if kw.arg is not None:
                    f.strings.append(kw.arg)
        elif t is ast.Constant:
            assert isinstance(node, ast.Constant)
            v = node.value
            doc = id(node) in docs
            if isinstance(v, str):
                if doc:
                    f.docs.append(node)
                elif id(node) in elems:
                    f.elems.append(node)
                else:
                    f.strings.append(v)
            if (any(x in v for x in _NCX113_TEXTS) if isinstance(v, str)
                    else isinstance(v, bytes) and any(x in v for x in _NCX113_BYTES)):
                if doc:
                    f.doc113.append(node)
                else:
                    f.nccl113 = True
        elif t is ast.Attribute:
            assert isinstance(node, ast.Attribute)
            a = node.attr
            if a in _BITWISE and in_try:
                f.bitwise_in_try = True
            elif a in _NCX111_ANY:
                f.ncx111 = True
            elif a in _NCX111_BACKEND:
                f.generic_111 = True
            elif a == "_get_backend":
                f.backend_attr = True
            elif (a.startswith("NCCL_CTA_POLICY") and isinstance(node.value, ast.Call)
                  and isinstance(node.value.func, ast.Name) and node.value.func.id == "type"):
                f.ncx111 = True
        elif t is ast.Compare:
            assert isinstance(node, ast.Compare)
            if len(node.ops) == 1:
                f.compares.append(node)
        elif t is ast.Expr:
            assert isinstance(node, ast.Expr)
            docs.add(id(node.value))
        elif t in (ast.Tuple, ast.List, ast.Set):
            assert isinstance(node, (ast.Tuple, ast.List, ast.Set))
            if len(node.elts) > 1 and id(node) not in slices:
                elems.update(id(e) for e in node.elts)
        elif t is ast.Subscript:
            assert isinstance(node, ast.Subscript)
            slices.add(id(node.slice))
        elif t in (ast.With, ast.AsyncWith):
            assert isinstance(node, (ast.With, ast.AsyncWith))
            withs.update(id(item.context_expr) for item in node.items)
        elif t in (ast.Import, ast.ImportFrom):
            assert isinstance(node, (ast.Import, ast.ImportFrom))
            for alias in node.names:
                if alias.asname is not None:
                    f.aliases.setdefault(alias.asname, set()).add(alias.name.rpartition(".")[2])
                f.imported.add(alias.asname or alias.name.partition(".")[0])
        elif t in (ast.Assign, ast.AnnAssign):
            assert isinstance(node, (ast.Assign, ast.AnnAssign))
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            value = _dotted_last(node.value) if node.value is not None else None
            for target in targets:
                if isinstance(target, ast.Name) and node.value is not None:
                    f.values.setdefault(target.id, []).append(node.value)
                    if value is not None:
                        f.aliases.setdefault(target.id, set()).add(value)
            if (isinstance(node, ast.Assign) and len(targets) == 1 and isinstance(targets[0], ast.Attribute)
                    and targets[0].attr == "lazy_init"):
                f.lazy_init = True
        elif t is ast.Try:
            assert isinstance(node, ast.Try)
            catches = any(_caught(h) & _CAUGHT for h in node.handlers)
            todo.extend((child, fn, in_try) for child in (*node.handlers, *node.orelse, *node.finalbody))
            todo.extend((child, fn, in_try or catches) for child in node.body)
            continue
        inner = node if t in _FUNCS else fn
        todo.extend((child, inner, in_try) for child in ast.iter_child_nodes(node) if type(child) not in _LEAVES)
    return f


def _caught(h: ast.ExceptHandler) -> set[str]:
    t = h.type
    elems = t.elts if isinstance(t, ast.Tuple) else [t] if t is not None else []
    return {e.id for e in elems if isinstance(e, ast.Name)}


# --- one test per rule (or group of rules); True: the rule may report something ---
def _gpu(f: _Facts, options: Options) -> bool:
    """NCX130/NCX134 (_r_backend._device_id): an init without ``device_id=`` and a GPU pick
    in its function, or in a function that a chain of this file's calls (``f()``,
    ``self.f()``) links to it (order not considered)."""
    init_names = f.bound("init_process_group")
    setters = options.helpers.setters
    inits: list[ast.AST | None] = []
    picks: list[ast.AST | None] = []
    callers: dict[str, list[ast.AST | None]] = {}  # called name -> the functions calling it
    for c in f.calls:
        func = c.node.func
        last = _last(func)
        if last is None:
            continue
        if _called(c.node, init_names, "init_process_group") and _may_bind(f, c.node):
            inits.append(c.fn)
        if _picks(f, c, last) or last in setters or last in _PICKERS or last == "setup_device":
            # (any set_device, and an accelerator's setup_device: a note where not followed)
            picks.append(c.fn)
        if isinstance(func, ast.Name) or (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
                                          and func.value.id in ("self", "cls")):
            callers.setdefault(last, []).append(c.fn)
    if not inits or not picks:
        return False
    # The rule's test (_runs_before, _runs_after, a pick in the init's own function), order
    # aside: some function (or the module) leads both to a pick's function and to an init's,
    # where "leads to" follows calls by name upwards from a function, and a function leads to
    # itself.  ``near``: the functions that lead to an init; ``good``: the names whose upward
    # chain of callers meets one of them.
    near = {id(fn) for fn in inits}
    todo = [fn.name for fn in inits if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            for caller in callers.get(name, ()):
                near.add(id(caller))
                if isinstance(caller, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    todo.append(caller.name)
    calls_of: dict[str, list[str]] = {}  # a function's name -> the names it calls
    for called, fns in callers.items():
        for fn in fns:
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                calls_of.setdefault(fn.name, []).append(called)
    good = {called for called, fns in callers.items() if any(id(fn) in near for fn in fns)}
    todo = list(good)
    while todo:
        for called in calls_of.get(todo.pop(), ()):
            if called not in good:
                good.add(called)
                todo.append(called)
    return any(id(p) in near or (isinstance(p, (ast.FunctionDef, ast.AsyncFunctionDef)) and p.name in good)
               for p in picks)


def _picks(f: _Facts, c: _Call, last: str) -> bool:
    """A call _r_backend._picker may take for a GPU pick: torch's own (``set_device`` and the
    others through an import, ``with torch.cuda.device(i)``), or ``m.set_device(i)`` on a
    device module (``m``: a call or a name assigned one; _r_backend._device_module)."""
    if not (last in _PICKERS or (last == "device" and c.in_with)):
        return False
    func = c.node.func
    if isinstance(func, ast.Name):  # only an import (or an alias of torch's) makes it torch's
        return func.id in f.imported or func.id in f.aliases
    assert isinstance(func, ast.Attribute)
    recv = func.value
    if not isinstance(recv, ast.Name) or recv.id in f.imported or recv.id in f.aliases:
        return True
    return any(_device_module(f, v) for v in f.values.get(recv.id, ()))


def _device_module(f: _Facts, value: ast.expr) -> bool:
    """``value`` may be a device module: anything but a call of a function that is neither
    imported, nor a module-level function of this file (a helper of the run), nor named
    like torch's device-module getters (and not ``getattr``)."""
    if isinstance(value, ast.Name):
        return True  # followed in turn there: not here
    if not isinstance(value, ast.Call):
        return False
    func = value.func
    if not isinstance(func, ast.Name):
        return True
    name = func.id
    return (name in f.imported or name in f.defs or name == "getattr"
            or name.lstrip("_") in ("get_device_module", "device_module"))


def _may_bind(f: _Facts, call: ast.Call) -> bool:
    """An init that may get a device finding: no ``device_id=``, and no backend literal that
    names no CUDA NCCL backend (``"gloo"``, ``"fake"``: _r_backend._is_nccl_backend)."""
    if any(kw.arg == "device_id" for kw in call.keywords):
        return False
    if any(kw.arg is None for kw in call.keywords):
        return True  # **kwargs: followed there
    backend = next((kw.value for kw in call.keywords if kw.arg == "backend"), None)
    if backend is None:
        backend = next((a for a in call.args if not isinstance(a, ast.Starred)), None)
    if not (isinstance(backend, ast.Constant) and isinstance(backend.value, str) and f.one_token(backend)):
        return True
    parts = backend_parts(backend.value)
    return parts is None or any(n in ("nccl", "nccl2", "nccl-lazy") and d in (None, "cuda") for d, n in parts)


def _ncx112(f: _Facts, options: Options) -> bool:
    """A ``try`` whose handler names ValueError or RuntimeError around an init, a new_group or
    a bitwise ReduceOp (_r_api._try)."""
    if f.bitwise_in_try:
        return True
    names = f.bound("init_process_group", "new_group")
    return any(c.in_try and _called(c.node, names, "init_process_group", "new_group") for c in f.calls)


def _called(call: ast.Call, names: set[str], *members: str) -> bool:
    func = call.func
    return (isinstance(func, ast.Name) and func.id in names) or (isinstance(func, ast.Attribute) and func.attr in members)


def _calls_to(*members: str) -> Callable[[_Facts, Options], bool]:
    def test(f: _Facts, options: Options) -> bool:
        names = f.bound(*members)
        return any(_called(c.node, names, *members) for c in f.calls)

    return test


def _ncx131(f: _Facts, options: Options) -> bool:
    names = f.bound("new_group")
    return any(_called(c.node, names, "new_group") and any(
        kw.arg == "use_local_synchronization" and isinstance(kw.value, ast.Constant) and kw.value.value is True
        for kw in c.node.keywords) for c in f.calls)


def _ncx111(f: _Facts, options: Options) -> bool:
    return f.ncx111 or (f.generic_111 and f.backend_attr)


def _ncx113(f: _Facts, options: Options) -> bool:
    return f.nccl113 or any(not f.one_token(c) for c in f.doc113)


def _ncx133(f: _Facts, options: Options) -> bool:
    return f.lazy_init


def _env(f: _Facts, options: Options) -> bool:
    """A string or keyword that is a table name, or a string holding ``NAME=`` (_r_env's sites;
    not a docstring)."""
    def hit(s: str) -> bool:
        return s in _ENV_NAMES or ("=" in s and _ENV_IN_TEXT.search(s) is not None)

    return (any(hit(s) for s in f.strings) or any(hit(str(c.value)) for c in f.elems)
            or any(hit(str(c.value)) and not f.one_token(c) for c in f.docs))


def _spelt(word: str) -> Callable[[_Facts, Options], bool]:
    """NCX103/NCX104: a string holding ``word`` that libcst's handler does not skip (a
    docstring, an element of a literal tuple/list/set of several: one literal each).  f-string
    text is read raw there (``\\nccl2`` holds it), so ``word`` is looked for without its first letter."""
    part = word[1:]

    def test(f: _Facts, options: Options) -> bool:
        return any(part in s for s in f.strings) or any(
            part in str(c.value) and not f.one_token(c) for c in (*f.docs, *f.elems))

    return test


def _ncx110(f: _Facts, options: Options) -> bool:
    """isinstance/issubclass against ProcessGroupNCCL, ``type(x) is ProcessGroupNCCL``, or
    ``get_backend(...)``/``.name()`` compared with "nccl" or Backend.NCCL (_r_api)."""
    cls = f.bound("ProcessGroupNCCL")
    nccl = f.bound("NCCL")
    getters = f.bound("get_backend")

    def is_cls(e: ast.expr) -> bool:
        e = e.value if isinstance(e, ast.Starred) else e
        return _dotted_last(e) in cls

    def is_nccl(e: ast.expr) -> bool:
        return (isinstance(e, ast.Constant) and e.value == "nccl") or _dotted_last(e) in nccl

    for c in f.calls:
        func, args = c.node.func, [*c.node.args, *(kw.value for kw in c.node.keywords)]
        if isinstance(func, ast.Name) and func.id in ("isinstance", "issubclass") and len(args) == 2:
            if any(is_cls(a) or (isinstance(a, ast.Tuple) and any(is_cls(e) for e in a.elts)) for a in args):
                return True
    def is_getter(call: ast.expr) -> bool:
        return isinstance(call, ast.Call) and (_dotted_last(call.func) in getters or (
            isinstance(call.func, ast.Attribute) and call.func.attr in ("name", "_get_backend_name")
            and not call.args and not call.keywords))

    # locals that may hold such a call's answer (``b = backend`` passes it on), in any function
    held = {n for n, vs in f.values.items() if any(is_getter(v) for v in vs)}
    grown = True
    while grown:
        more = {n for n, vs in f.values.items() if n not in held
                and any(isinstance(v, ast.Name) and v.id in held for v in vs)}
        held |= more
        grown = bool(more)
    for cmp in f.compares:
        op, sides = cmp.ops[0], (cmp.left, cmp.comparators[0])
        left, right = sides
        for name, other in ((left, right), (right, left)):
            if isinstance(name, ast.Name) and name.id in held and (is_nccl(other) or (
                    isinstance(other, (ast.Tuple, ast.List, ast.Set)) and any(is_nccl(e) for e in other.elts))):
                return True
        if (isinstance(op, (ast.Is, ast.IsNot, ast.Eq, ast.NotEq)) and isinstance(left, ast.Call)
                and isinstance(left.func, ast.Name) and left.func.id == "type" and is_cls(right)):
            return True
        for call, other in ((left, right), (right, left)) if isinstance(op, (ast.Eq, ast.NotEq)) else ((left, right),):
            if not isinstance(call, ast.Call):
                continue
            by_name = (isinstance(call.func, ast.Attribute) and call.func.attr in ("name", "_get_backend_name")
                       and not call.args and not call.keywords)
            if not (by_name or _dotted_last(call.func) in getters):
                continue
            if isinstance(op, (ast.Eq, ast.NotEq)) and is_nccl(other):
                return True
            if isinstance(op, (ast.In, ast.NotIn)) and isinstance(other, (ast.Tuple, ast.List, ast.Set)) and any(
                    is_nccl(e) for e in other.elts):
                # get_backend() in a set that already names two NCCL backends: the author chose
                have = {e.value for e in other.elts if isinstance(e, ast.Constant) and f.one_token(e)}
                if by_name or len(have & _NCCL4) <= 1:
                    return True
    return False


_TESTS: dict[str, Callable[[_Facts, Options], bool]] = {
    **dict.fromkeys(_ENV_CODES, _env),
    "NCX103": _spelt("nccl-legacy"),
    "NCX104": _spelt("nccl2"),
    "NCX110": _ncx110,
    "NCX111": _ncx111,
    "NCX112": _ncx112,
    "NCX113": _ncx113,
    "NCX121": _calls_to(*_DUMPS),
    "NCX130": _gpu,
    "NCX131": _ncx131,
    "NCX132": _calls_to("ProcessGroupNCCL"),
    "NCX133": _ncx133,
    "NCX134": _gpu,
}


def ast_active(tree: ast.Module, source: str, codes: Iterable[str], options: Options) -> set[str]:
    """The codes of ``codes`` whose rule may report something on ``source`` (``tree``: its
    ``ast``); each distinct test runs once, the tree is walked once."""
    f = _walk(tree, source)
    done: dict[int, bool] = {}
    out: set[str] = set()
    for code in codes:
        test = _TESTS.get(code)
        if test is None:
            out.add(code)
            continue
        hit = done.get(id(test))
        if hit is None:
            hit = done[id(test)] = test(f, options)
        if hit:
            out.add(code)
    return out
