"""Backend names and process-group creation: NCX103, NCX104, NCX130, NCX131, NCX132.

A backend string is rewritten only when it provably reaches a torch.distributed backend
argument (``_flow.resolve``); every other exact backend-name string is flagged.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import libcst as cst

from .._explains import rollback_comment
from .._model import FixKind, Options
from ._ctx import Analyzer, Edit, EditResult, on
from ._edits import append_element, append_kwarg, string_like
from ._flow import resolve
from ._gpu import judge, lone
from ._names import BACKEND_ARG_POS, backend_parts, is_backend_spec, replace_backend
from ._reach import Def, Path, dotted, every, reaching
from ._scope import Scope
from ._xcall import helper, helpers_of

__all__: list[str] = []

_IN_CMD = re.compile(r"backend[\w-]*[\s=:]+['\"]?(nccl-legacy|nccl2)\b")


@dataclass
class _BackendUse:
    call: cst.Call
    member: str
    expr: cst.BaseExpression | None  # None: argument omitted
    scope: Scope


@dataclass
class _Init:
    call: cst.Call
    use: _BackendUse
    scope: cst.CSTNode | None
    order: int
    suites: tuple[int, ...]
    path: Path = ()  # the call and the nodes around it, the module first


@dataclass
class _SetDevice:
    call: cst.Call
    scope: cst.CSTNode | None
    order: int
    suites: tuple[int, ...]
    torch_name: str | None  # how the file spells the torch module at this call
    how: str = "torch.cuda.set_device"  # the API that picks the GPU
    device: cst.BaseExpression | None = None  # the device argument
    path: tuple[cst.CSTNode, ...] = ()  # the call and the nodes around it, the module first
    picks: bool = False  # a call of a helper of the run that picks the GPU itself (``device`` is the call)


def _facts(a: Analyzer) -> dict[str, list[object]]:
    f = a.facts.setdefault("backend", {"uses": [], "strings": [], "inits": [], "set_device": [], "calls": [],
                                       "unjudged": []})
    assert isinstance(f, dict)
    return f


def _backend_arg(call: cst.Call, member: str) -> cst.BaseExpression | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "backend":
            return arg.value
    pos = BACKEND_ARG_POS[member]
    plain = [arg for arg in call.args if arg.keyword is None and not arg.star]
    return plain[pos].value if len(plain) > pos else None


@on(cst.Module, "NCX103", "NCX104", "NCX130", "NCX131", "NCX134")
def _start(a: Analyzer, node: cst.Module) -> None:
    a.finishers.append(lambda: _finish(a))


# Every API that picks the current GPU (the device module helpers: flagged, never fixed).
_PICKERS = {
    "torch.cuda.set_device": "torch.cuda.set_device",
    "torch.accelerator.set_device_index": "torch.accelerator.set_device_index",
    "torch.accelerator.set_device_idx": "torch.accelerator.set_device_index",
    "torch.cuda.device": "torch.cuda.device(...)",
}


def _device_module(a: Analyzer, recv: cst.BaseExpression) -> bool:
    """``torch.get_device_module()`` / ``get_device_module(...)`` / a name assigned from it."""
    if isinstance(recv, cst.Name):
        value = a.scopes.single_value(recv.value, a.scope())
        return value is not None and value is not recv and _device_module(a, value)
    if not (isinstance(recv, cst.Call) and isinstance(recv.func, (cst.Name, cst.Attribute))):
        return False
    if (a.qnames(recv.func) == {"builtins.getattr"} and recv.args
            and a.qnames(recv.args[0].value) == {"torch"}):  # getattr(torch, "cuda")
        return True
    if (recv.func.value if isinstance(recv.func, cst.Name) else recv.func.attr.value).lstrip("_") in (
            "get_device_module", "device_module", "get_accelerator"):
        return True  # (DeepSpeed's and ColossalAI's get_accelerator(): torch.cuda's set_device on CUDA)
    found = helper(a, recv.func)  # the project's own get_torch_device() returning torch.cuda
    return found is not None and "devmod" in helpers_of(a).values(found[1].returns)


def picks_by_helper(source: str, options: Options) -> bool:
    """The precheck's part for NCX130/NCX134 that depends on the run: an init next to a call of a
    helper of the run that picks the GPU (the text of ``set_device`` is in another file)."""
    setters = options.helpers.setters
    return bool(setters) and "init_process_group" in source and any(
        n in source and re.search(rf"\b{re.escape(n)}\s*\(", source) for n in setters)


_PICKER_NAMES = frozenset(q.rpartition(".")[2] for q in _PICKERS) | {"set_device", "setup_device"}


def _unfollowed(a: Analyzer, func: cst.BaseExpression) -> bool:
    """``x.set_device(...)`` / ``x.set_device_index(...)`` / Lightning's accelerator
    ``x.setup_device(...)`` on an object the rule cannot resolve; not ``self.f()`` of a method
    the file defines (followed as a call of the file)."""
    if not (isinstance(func, cst.Attribute) and func.attr.value in ("set_device", "set_device_index", "setup_device")):
        return False
    if dotted(func.value) in ("self", "cls"):
        name = func.attr.value
        return not any(isinstance(n, cst.FunctionDef) and n.name.value == name
                       for n in _all_defs(a.module))
    return True


def _all_defs(module: cst.Module) -> list[cst.FunctionDef]:
    """The module's functions and the methods of its classes (one level)."""
    out: list[cst.FunctionDef] = []
    for n in module.body:
        if isinstance(n, cst.FunctionDef):
            out.append(n)
        elif isinstance(n, cst.ClassDef):
            out += [m for m in n.body.body if isinstance(m, cst.FunctionDef)]
    return out


def _picker(a: Analyzer, node: cst.Call) -> None:
    """Record a call that picks the current GPU (see _PICKERS), if it is one."""
    func = node.func
    called = (func.value if isinstance(func, cst.Name) else func.attr.value
              if isinstance(func, cst.Attribute) and dotted(func.value) in ("self", "cls") else None)
    if called is not None:  # which function calls which (f(), self.f()), for GPU picks made in another function
        _facts(a)["calls"].append((a.enclosing_function(), called, a.order, node))
    last = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else None
    if last not in _PICKER_NAMES:
        if last in a.options.helpers.setters and helper(a, func, own=False) is not None:  # init_device() of another module
            _facts(a)["set_device"].append(_SetDevice(node, a.enclosing_function(), a.order, a.suites(), None,
                                                      f"{a.code(func)}()", node, tuple(a.stack), picks=True))
        return  # most calls: no name resolution
    qn = a.qnames(node.func)
    how = next((_PICKERS[q] for q in qn if q in _PICKERS), None)
    suites = a.suites()
    if how == "torch.cuda.device(...)":
        item, stmt = a.parent(), a.parent(2)
        if not (isinstance(item, cst.WithItem) and isinstance(stmt, cst.With) and item.item is node):
            return
        suites = (*suites, id(stmt.body))  # it picks the GPU for the with body only
    elif how is None:
        if not (isinstance(node.func, cst.Attribute) and node.func.attr.value in ("set_device", "set_device_index")
                and _device_module(a, node.func.value)):
            if _unfollowed(a, node.func):
                # an object's own set_device (an accelerator layer the rule cannot follow)
                _facts(a)["unjudged"].append(_SetDevice(node, a.enclosing_function(), a.order, a.suites(), None,
                                                        f"{a.code(node.func)}()", None, tuple(a.stack)))
            return
        how = f"{a.code(node.func.value)}.{node.func.attr.value}"
    torch_name = None
    head: cst.BaseExpression = node.func
    while isinstance(head, cst.Attribute):
        head = head.value
    if isinstance(head, cst.Name) and a.qnames(head) == {"torch"}:
        torch_name = head.value
    device = next((arg.value for arg in node.args if arg.keyword is None and not arg.star), None)
    device = device or next((arg.value for arg in node.args if arg.keyword is not None
                             and arg.keyword.value in ("device", "device_index", "idx")), None)
    _facts(a)["set_device"].append(
        _SetDevice(node, a.enclosing_function(), a.order, suites, torch_name, how, device, tuple(a.stack)))


@on(cst.Call, "NCX103", "NCX104", "NCX130", "NCX131", "NCX132", "NCX134")
def _call(a: Analyzer, node: cst.Call) -> None:
    m = a.dist(node.func)
    if m is None:
        _picker(a, node)
        return
    if m in ("ProcessGroupNCCL", "ProcessGroupNCCL2") and m == "ProcessGroupNCCL":
        a.report(node, "NCX132", "ProcessGroupNCCL(...) is always legacy: use init_process_group or new_group",
                 detail="ProcessGroupNCCL(...) built directly bypasses the \"nccl\" switch and stays legacy on "
                 "every torch; create the group with init_process_group/new_group(backend=\"nccl\") "
                 "(or construct ProcessGroupNCCL2 on torch >= 2.14).")
        return
    if m not in BACKEND_ARG_POS:
        return
    use = _BackendUse(node, m, _backend_arg(node, m), a.scope())
    _facts(a)["uses"].append(use)
    if m == "init_process_group":
        _facts(a)["inits"].append(_Init(node, use, a.enclosing_function(), a.order, a.suites(), tuple(a.stack)))
    if m == "new_group":
        for arg in node.args:
            if (arg.keyword is not None and arg.keyword.value == "use_local_synchronization"
                    and isinstance(arg.value, cst.Name) and arg.value.value == "True"):
                lit = resolve(a, use.expr, use.scope) if use.expr is not None else None
                spec = lit.evaluated_value if lit is not None else None
                if isinstance(spec, str) and not any(n.startswith("nccl") for _, n in backend_parts(spec) or []):
                    return
                a.report(node, "NCX131", "new_group(use_local_synchronization=True) may hang under nccl2: use dist.split_group",
                         detail="new_group(..., use_local_synchronization=True) on an NCCL default group: under "
                         "nccl2 every new_group splits the parent communicator, but non-members return "
                         "early, so members may hang in ncclCommSplit. Use dist.split_group, or on torch "
                         "2.15 pass pg_options with lazy_init=True for this group.")


@on(cst.SimpleString, "NCX103", "NCX104")
def _string(a: Analyzer, node: cst.SimpleString) -> None:
    if "nccl" not in node.value:
        return
    if isinstance(a.parent(), cst.Expr):  # docstring or bare string statement
        return
    coll = a.parent(2)
    if isinstance(a.parent(), cst.Element) and isinstance(coll, (cst.Tuple, cst.List, cst.Set)) and len(coll.elements) > 1:
        return  # a set of names ("nccl", "nccl2", ...) selects no backend
    v = node.evaluated_value
    if not isinstance(v, str):
        return
    if is_backend_spec(v, "nccl-legacy") or is_backend_spec(v, "nccl2"):
        _facts(a)["strings"].append((node, True, _statement_of(a)))
    elif _IN_CMD.search(v):
        _facts(a)["strings"].append((node, False))


@on(cst.FormattedStringText, "NCX103", "NCX104")
def _fstring_text(a: Analyzer, node: cst.FormattedStringText) -> None:
    if ":nccl-legacy" in node.value or node.value.endswith("nccl-legacy") or _IN_CMD.search(node.value):
        _facts(a)["strings"].append((node, False))


def _finish(a: Analyzer) -> None:
    f = _facts(a)
    target = a.options.target_torch
    provable: dict[int, cst.SimpleString] = {}
    for use in f["uses"]:
        assert isinstance(use, _BackendUse)
        if use.expr is not None and use.member != "Backend":
            lit = resolve(a, use.expr, use.scope)
            if lit is not None:
                provable[id(lit)] = lit
    for item in f["strings"]:
        assert isinstance(item, tuple)
        node: cst.SimpleString | cst.FormattedStringText = item[0]
        exact: bool = item[1]
        ev = node.evaluated_value if isinstance(node, cst.SimpleString) else node.value
        text = ev if isinstance(ev, str) else ""
        legacy = "nccl-legacy" in text
        fixable = isinstance(node, cst.SimpleString) and id(node) in provable
        if legacy:
            msg = ('"nccl-legacy" selects the legacy ProcessGroupNCCL: a rollback name with no '
                   "deprecation warning and no announced future beyond 2.15. Record which legacy-only "
                   'feature needs it (several GPUs per process, deferred comm creation, legacy APIs) or use "nccl".')
            short = '"nccl-legacy" is a rollback backend name: use "nccl" (or record why not)'
            if fixable:
                new = replace_backend(text, "nccl-legacy", "nccl")
                stale = _rollback_comments(a, item[2]) if len(item) > 2 else []
                a.report(node, "NCX103", short, FixKind.UNSAFE, [*_restring(node, new), *stale], detail=msg)
            else:
                a.report(node, "NCX103", short if exact else '"nccl-legacy" in this string looks like a rollback backend: use "nccl"',
                         detail=msg if exact else msg + " (this string looks like a backend option)")
            continue
        # "nccl2": also a recorder / backend-object name, so only where it selects a backend
        if not (isinstance(node, cst.SimpleString) and id(node) in provable):
            continue
        if target >= (2, 15):
            msg = ('"nccl2" is what "nccl" builds from torch 2.15 on; spell it "nccl" (note: '
                   'get_backend() then returns "nccl", and TORCH_DIST_USE_NCCL2=0 would roll it back).')
            new = replace_backend(text, "nccl2", "nccl")
            a.report(node, "NCX104", '"nccl2" is what "nccl" builds from torch 2.15 on: spell it "nccl"', FixKind.UNSAFE,
                     _restring(node, new), detail=msg)
        elif target < (2, 14):
            a.report(node, "NCX104", f'"nccl2" does not exist on torch {target[0]}.{target[1]} (--target-torch): use "nccl"',
                     detail=f'"nccl2" does not exist on torch {target[0]}.{target[1]} (--target-torch): '
                     "init_process_group fails with \"Unknown backend type nccl2\". Use \"nccl\" there.")
    _device_id(a, f)


def _statement_of(a: Analyzer) -> tuple[cst.CSTNode, cst.CSTNode | None, bool] | None:
    """The statement around the current node, the one after it in its block (or None), and
    whether it opens the file (the comments above it are then about the file)."""
    for k in range(len(a.stack) - 1, 0, -1):
        stmt, block = a.stack[k], a.stack[k - 1]
        if isinstance(stmt, (cst.SimpleStatementLine, cst.BaseCompoundStatement)) and isinstance(
                block, (cst.IndentedBlock, cst.Module)):
            body = list(block.body)
            at = next((i for i, x in enumerate(body) if x is stmt), len(body))
            return stmt, body[at + 1] if at + 1 < len(body) else None, isinstance(block, cst.Module) and at == 0
    return None


def _rollback_comments(a: Analyzer, where: object) -> list[tuple[cst.CSTNode, Edit]]:
    """With a rewrite of the rollback name in a statement: the comments on it that speak of
    rolling back or pinning legacy NCCL (now untrue) go, those right above it when the statement
    after does not speak of that too (_explains.rollback_comment), and its trailing one."""
    if not isinstance(where, tuple):
        return []
    stmt, after, opens_file = where
    if not isinstance(stmt, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
        return []
    following = a.code(after).strip().split("\n", 1)[0] if after is not None else ""
    lines = list(stmt.leading_lines)
    head = len(lines)
    while head > 0 and lines[head - 1].comment is not None:
        head -= 1
    above = "\n".join(el.comment.value for el in lines[head:] if el.comment is not None)
    drop_above = bool(above) and not opens_file and rollback_comment(above, following)
    trailing = stmt.trailing_whitespace.comment if isinstance(stmt, cst.SimpleStatementLine) else None
    drop_trailing = trailing is not None and rollback_comment(trailing.value, "")
    if not (drop_above or drop_trailing):
        return []

    def edit(u: cst.CSTNode) -> cst.CSTNode:
        if drop_above and isinstance(u, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            u = u.with_changes(leading_lines=list(u.leading_lines)[:head])
        if drop_trailing and isinstance(u, cst.SimpleStatementLine):
            u = u.with_changes(trailing_whitespace=u.trailing_whitespace.with_changes(
                whitespace=cst.SimpleWhitespace(""), comment=None))
        return u

    return [(stmt, edit)]


def _restring(node: cst.CSTNode, text: str) -> list[tuple[cst.CSTNode, Edit]]:
    assert isinstance(node, cst.SimpleString)

    def edit(u: cst.SimpleString) -> cst.SimpleString:
        return string_like(u, text)

    return [(node, edit)]


def _is_nccl_backend(a: Analyzer, use: _BackendUse, path: Path = ()) -> bool | None:
    """True: builds nccl/nccl2/nccl-lazy for CUDA; False: provably not; None: unknown.
    ``path`` (the init call's) lets a name's value be followed to the assignments that reach it."""
    if use.expr is None:
        return True  # torch picks "cpu:gloo,cuda:nccl" and this code drives a GPU
    specs = _backend_strings(a, use.expr, use.scope, path)
    if specs is None:
        return None
    nccl = False
    for v in specs:
        parts = backend_parts(v)
        if parts is None:
            return None
        nccl = nccl or any(n in ("nccl", "nccl2", "nccl-lazy") and d in (None, "cuda") for d, n in parts)
    return nccl


def _backend_strings(a: Analyzer, expr: cst.BaseExpression, scope: Scope, path: Path,
                     depth: int = 0) -> list[str] | None:
    """Every backend string ``expr`` can be where it is used: a literal, a constant, the
    assignments of a name that reach ``path``, both sides of ``x if c else y``, what a helper
    of the run returns; None when one of them is not known."""
    lit = resolve(a, expr, scope)
    if lit is not None:
        v = lit.evaluated_value
        return [v] if isinstance(v, str) else None
    if depth > 4:
        return None
    if isinstance(expr, cst.IfExp):
        both = [_backend_strings(a, e, scope, path, depth + 1) for e in (expr.body, expr.orelse)]
        return None if None in both else [v for vs in both if vs is not None for v in vs]
    if _accelerator_backend(a, expr):
        return ["nccl"]  # what it is on CUDA, the one device where nccl2 binds a GPU
    if isinstance(expr, cst.Call):
        found = helper(a, expr.func)
        tokens = helpers_of(a).values(found[1].returns) if found is not None else ["?"]
        return [t[4:] for t in tokens] if all(t.startswith("str:") for t in tokens) else None
    target = dotted(expr)
    if target is None or not path:
        return None
    defs, entry = reaching(target, path)
    if entry or not defs or any(d.value is None or d.index is not None or d.loop for d in defs):
        return None
    out: list[str] = []
    for d in defs:
        assert d.value is not None
        got = _backend_strings(a, d.value, scope, d.path, depth + 1)
        if got is None:
            return None
        out += got
    return out


def _accelerator_backend(a: Analyzer, expr: cst.BaseExpression) -> bool:
    """The backend name an accelerator layer gives, whose CUDA answer is "nccl":
    ``get_accelerator().communication_backend_name()`` (DeepSpeed), ``.communication_backend``
    (ColossalAI), also on a name assigned from ``get_accelerator()``, and
    ``dist.get_default_backend_for_device("cuda")``."""
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
        if expr.func.attr.value == "communication_backend_name":
            return _device_module(a, expr.func.value)
        if a.dist(expr.func) == "get_default_backend_for_device" or (
                a.qnames(expr.func) & {"torch.distributed.get_default_backend_for_device"}):
            arg = expr.args[0].value if expr.args else None
            return isinstance(arg, cst.SimpleString) and arg.evaluated_value == "cuda"
    if isinstance(expr, cst.Attribute) and expr.attr.value == "communication_backend":
        return _device_module(a, expr.value)
    return False


@dataclass
class _Kwargs:
    """What the dict a call unpacks (``**kw``) can hold where the call runs."""

    dicts: list[cst.Dict | cst.Call]  # the literals (``{...}``, ``dict(...)``) assigned to it that reach the call
    opaque: bool = False  # part of it comes from elsewhere (a parameter, another call, an update not read)
    device_id: bool = False  # device_id reaches the call (a key of a literal, a set before it)
    backend_set: bool = False  # its backend is set after the literal (kw["backend"] = ...)


def _kwargs(a: Analyzer, init: _Init, star: cst.BaseExpression) -> _Kwargs:
    """Follow ``**star`` of an init to the dicts that reach it and the updates made to them
    before it in the init's function (or module)."""
    name = dotted(star)
    if name is None or not init.path:
        return _Kwargs([], opaque=True)
    out = _Kwargs([])
    defs, entry = reaching(name, init.path)
    values = [d.value if d.index is None and not d.loop else None for d in defs]
    if entry:
        values.append(a.scopes.single_value(name, a.scopes.module_scope) if init.scope is None or not _bound_in(
            init.scope, name) else None)
    for v in values:
        if _is_dict(a, v):
            assert isinstance(v, (cst.Dict, cst.Call))
            out.dicts.append(v)
            keys = _keys(v)
            out.device_id = out.device_id or "device_id" in keys
            out.opaque = out.opaque or None in keys
        else:
            out.opaque = True
    end = a.pos(init.call).start.line
    for node in _mutations(init.scope or a.module, name):
        if a.pos(node).start.line >= end:
            continue
        keys = _mutated_keys(node)
        out.device_id = out.device_id or "device_id" in keys
        out.backend_set = out.backend_set or "backend" in keys
        out.opaque = out.opaque or None in keys
    return out


def _bound_in(fn: cst.CSTNode, name: str) -> bool:
    return isinstance(fn, (cst.FunctionDef, cst.Lambda)) and (
        bool(every(fn, name)) or name in {p.name.value for p in (*fn.params.params, *fn.params.kwonly_params,
                                                                  *fn.params.posonly_params)})


def _is_dict(a: Analyzer, v: cst.BaseExpression | None) -> bool:
    return isinstance(v, cst.Dict) or (isinstance(v, cst.Call) and isinstance(v.func, cst.Name)
                                        and v.func.value == "dict" and a.qnames(v.func) == {"builtins.dict"})


def _keys(v: cst.CSTNode) -> set[str | None]:
    """The keys a dict literal, ``dict(...)`` or ``update(...)`` call gives (None: one not known)."""
    out: set[str | None] = set()
    if isinstance(v, cst.Dict):
        for el in v.elements:
            key = el.key.evaluated_value if isinstance(el, cst.DictElement) and isinstance(el.key, cst.SimpleString) else None
            out.add(key if isinstance(key, str) else None)
    elif isinstance(v, cst.Call):
        for arg in v.args:
            if arg.keyword is not None:
                out.add(arg.keyword.value)
            elif isinstance(arg.value, cst.Dict) and not arg.star:
                out |= _keys(arg.value)
            else:
                out.add(None)
    return out


def _mutations(root: cst.CSTNode, name: str) -> list[cst.CSTNode]:
    """The statements and calls in ``root`` (not in functions nested in it) that change the
    dict ``name``: ``name[k] = v``, ``name.update(...)``, ``name.setdefault(k, v)``, ``name |= {...}``."""
    out: list[cst.CSTNode] = []
    for child in root.children:
        if isinstance(child, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        if isinstance(child, cst.Assign) and any(
                isinstance(t.target, cst.Subscript) and dotted(t.target.value) == name for t in child.targets):
            out.append(child)
        elif isinstance(child, cst.AugAssign) and dotted(child.target) == name:
            out.append(child)
        elif (isinstance(child, cst.Call) and isinstance(child.func, cst.Attribute)
              and child.func.attr.value in ("update", "setdefault", "__setitem__") and dotted(child.func.value) == name):
            out.append(child)
        out += _mutations(child, name)
    return out


def _mutated_keys(node: cst.CSTNode) -> set[str | None]:
    if isinstance(node, cst.Assign):
        keys: set[str | None] = set()
        for t in node.targets:
            sub = t.target
            if isinstance(sub, cst.Subscript) and len(sub.slice) == 1 and isinstance(sub.slice[0].slice, cst.Index):
                k = sub.slice[0].slice.value
                v = k.evaluated_value if isinstance(k, cst.SimpleString) else None
                keys.add(v if isinstance(v, str) else None)
        return keys
    if isinstance(node, cst.AugAssign):
        return _keys(node.value) if isinstance(node.value, cst.Dict) else {None}
    assert isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)
    if node.func.attr.value == "update":
        return _keys(node)
    first = node.args[0].value if node.args else None
    v = first.evaluated_value if isinstance(first, cst.SimpleString) else None
    return {v if isinstance(v, str) else None}


def _backend_in(a: Analyzer, container: cst.Dict | cst.Call) -> cst.BaseExpression | None:
    if isinstance(container, cst.Dict):
        for el in container.elements:
            if (isinstance(el, cst.DictElement) and isinstance(el.key, cst.SimpleString)
                    and el.key.evaluated_value == "backend"):
                return el.value
        return None
    return next((arg.value for arg in container.args if arg.keyword is not None and arg.keyword.value == "backend"), None)


def _before(a: Analyzer, f: dict[str, list[object]], init: _Init, node: cst.CSTNode, fn: cst.CSTNode | None) -> bool:
    """Whether a statement in function ``fn`` runs before ``init``: an earlier line of the init's
    function, or a line of a function that calls the init's function later on."""
    line = a.pos(node).start.line
    if fn is init.scope:
        return line < a.pos(init.call).start.line
    name = init.scope.name.value if isinstance(init.scope, cst.FunctionDef) else None
    return name is not None and any(isinstance(c, tuple) and c[0] is fn and c[1] == name and a.pos(c[3]).start.line > line
                                    for c in f["calls"])


class _Calls:
    """The file's calls of its own functions by name (``f()``, ``self.f()``: (function the call
    is in, name, order, node)), indexed once: the GPU-pick questions are asked for every pair
    of a pick and an init, and a scan of every call per question made large files quadratic."""

    def __init__(self, calls: list[tuple[cst.CSTNode | None, str, int, cst.CSTNode]]) -> None:
        self.size = len(calls)
        self.by_callee: dict[str, list[tuple[cst.CSTNode | None, str, int, cst.CSTNode]]] = {}
        for c in calls:
            self.by_callee.setdefault(c[1], []).append(c)
        self._leading: dict[str, frozenset[str]] = {}

    @staticmethod
    def of(a: Analyzer, f: dict[str, list[object]]) -> _Calls:
        index = a.facts.get("backend_calls")
        if not isinstance(index, _Calls) or index.size != len(f["calls"]):
            index = a.facts["backend_calls"] = _Calls([c for c in f["calls"] if isinstance(c, tuple)])
        return index

    def leading_to(self, fn: object) -> frozenset[str]:
        """``fn``'s name and the names of the functions that lead to it (through any chain of
        calls of this file); empty for the module."""
        start = _fn_name(fn)
        if start is None:
            return frozenset()
        seen = self._leading.get(start)
        if seen is None:
            found: set[str] = set()
            todo = [start]
            while todo:
                n = todo.pop()
                if n not in found:
                    found.add(n)
                    todo += [m for c in self.by_callee.get(n, ()) if (m := _fn_name(c[0])) is not None]
            seen = self._leading[start] = frozenset(found)
        return seen

    def to(self, names: frozenset[str]) -> list[tuple[cst.CSTNode | None, str, int, cst.CSTNode]]:
        """The calls of any of ``names``."""
        return [c for n in names for c in self.by_callee.get(n, ())]


def _fn_name(fn: object) -> str | None:
    return fn.name.value if isinstance(fn, cst.FunctionDef) else None


def _runs_before(a: Analyzer, f: dict[str, list[object]], pick: _SetDevice, init: _Init) -> bool:
    """A pick in another function that runs before ``init`` on a path the file shows: some
    function (or the module) makes the pick, or calls what makes it, before it runs the init
    or calls what runs it (through any chain of calls of this file, ``f()`` or ``self.f()``).
    A pick in a function that neither leads to the init's function nor is called on its way is
    no evidence for it."""
    calls = _Calls.of(a, f)
    firsts: dict[int, int] = {id(pick.scope): pick.order}  # per function: when it first leads to the pick
    for c in calls.to(calls.leading_to(pick.scope)):
        firsts[id(c[0])] = min(firsts.get(id(c[0]), c[2]), c[2])
    lasts = [(id(init.scope), init.order)] + [(id(c[0]), c[2]) for c in calls.to(calls.leading_to(init.scope))]
    return any(fn in firsts and firsts[fn] < order for fn, order in lasts)


def _runs_after(a: Analyzer, f: dict[str, list[object]], pick: _SetDevice, init: _Init) -> bool:
    """A pick in a function that the init's function calls after the init (directly or through
    functions of this file): the GPU is picked only once the group exists."""
    calls = _Calls.of(a, f)
    return any(c[0] is init.scope and c[2] > init.order for c in calls.to(calls.leading_to(pick.scope)))


_BLOCK_NODES = (cst.IndentedBlock, cst.Module)


def _nccl_only_after(a: Analyzer, pick: _SetDevice, init: _Init) -> list[str] | None:
    """The NCCL backend strings of ``init`` when the GPU ``pick`` (before it, in a branch) runs on
    every path where the backend is NCCL, else None.  The backend is a name, and each of its
    assignments that reach the init with an NCCL value either sits in the pick's own straight-line
    block, before or after the pick (``if cuda: backend = "nccl"; set_device(...)`` / ``else:
    backend = "gloo"``: whichever comes first, both run before the init), or is ``"nccl" if c else
    "gloo"`` where the pick's block is the branch of an ``if`` on the same ``c`` that makes it NCCL
    (``if c: set_device(...)``; ``c`` the same expression, its names bound once: the same
    assignments reach both tests), and that ``if`` runs before the init at its level."""
    target = dotted(init.use.expr) if init.use.expr is not None else None
    if target is None or not init.path or not pick.path:
        return None
    defs, entry = reaching(target, init.path)
    if entry or not defs or any(d.value is None or d.index is not None or d.loop for d in defs):
        return None
    k = max((i for i, n in enumerate(pick.path[:-1]) if isinstance(n, _BLOCK_NODES)), default=None)
    if k is None:
        return None
    block, stmt = pick.path[k], pick.path[k + 1]
    assert isinstance(block, _BLOCK_NODES)
    body: list[cst.CSTNode] = list(block.body)
    nccl_values: list[str] = []
    for d in defs:
        assert d.value is not None
        values = _backend_strings(a, d.value, init.use.scope, d.path, 1)
        if values is None:
            return None
        nccl = [v for v in values if _names_nccl(v)]
        if not nccl:
            continue
        if len(nccl) != len(values):  # one assignment that may or may not be NCCL
            if not _same_branch(a, d, pick, k, init):
                return None
            nccl_values += nccl
            continue
        at = next((i for i, n in enumerate(d.path[:-1]) if n is block), None)
        own = next((i for i, x in enumerate(body) if at is not None and x is d.path[at + 1]), None)
        mine = next((i for i, x in enumerate(body) if x is stmt), None)
        if own is None or mine is None or any(_leaves(x) for x in body[min(own, mine) + 1:max(own, mine)]):
            return None  # an NCCL value set where the pick does not run too
        nccl_values += nccl
    return sorted(set(nccl_values)) or None


def _names_nccl(spec: str) -> bool:
    return any(n in ("nccl", "nccl2", "nccl-lazy") and dev in (None, "cuda")
               for dev, n in (backend_parts(spec) or [(None, "?")]))


def _leaves(item: cst.CSTNode) -> bool:
    """A statement after which the rest of its block may not run: it holds a ``return``,
    ``raise``, ``break`` or ``continue`` (not in a function it defines)."""
    found = False

    class _Exits(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            nonlocal found
            found = found or isinstance(node, (cst.Return, cst.Raise, cst.Break, cst.Continue))
            return not found and not isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda))

    item.visit(_Exits())
    return found


def _same_branch(a: Analyzer, d: Def, pick: _SetDevice, k: int, init: _Init) -> bool:
    """``d`` assigns ``x if c else y`` with exactly one side NCCL, and the pick's block ``pick.path[k]``
    is, from its start, the branch of an ``if c`` (or ``if not c``) that the NCCL side needs,
    where that ``if`` sits in a block around the init, before it."""
    value = d.value
    if not isinstance(value, cst.IfExp) or k < 2:
        return False
    sides = [_backend_strings(a, e, init.use.scope, d.path, 2) for e in (value.body, value.orelse)]
    known = [s for s in sides if s is not None]
    if len(known) != 2:
        return False
    on = [bool(s) and all(_names_nccl(v) for v in s) for s in known]
    off = [bool(s) and not any(_names_nccl(v) for v in s) for s in known]
    if not ((on[0] and off[1]) or (on[1] and off[0])):
        return False
    want = on[0]  # the test must be true on the NCCL side
    holder, branch, outer = pick.path[k - 1], pick.path[k], pick.path[k - 2]
    node: cst.If
    if isinstance(holder, cst.If) and branch is holder.body:
        node, truth = holder, True
    elif isinstance(holder, cst.Else) and isinstance(outer, cst.If):
        node, truth = outer, False
    else:
        return False
    if any(_leaves(x) for x in list(getattr(branch, "body", ()))[:_index_in(branch, pick.path[k + 1])]):
        return False  # the branch may leave before it picks
    test, cond = node.test, value.test
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        test, truth = test.expression, not truth
    if isinstance(cond, cst.UnaryOperation) and isinstance(cond.operator, cst.Not):
        cond, want = cond.expression, not want
    if truth != want or a.code(test).strip() != a.code(cond).strip() or not _stable(a, test, pick.path[:pick.path.index(node) + 1], d.path):
        return False
    # the if runs before the init at a level around it
    i = next((j for j, n in enumerate(init.path) if n is node), None)
    if i is not None:
        return False  # the init is inside that if
    j = pick.path.index(node) if node in pick.path else -1
    block = pick.path[j - 1] if j > 0 else None
    return block is not None and any(n is block for n in init.path)


def _index_in(block: cst.CSTNode, item: cst.CSTNode) -> int:
    body = list(getattr(block, "body", ()))
    return next((i for i, x in enumerate(body) if x is item), 0)


_PURE_TESTS = frozenset({"torch.cuda.is_available", "torch.cuda.device_count", "torch.cuda.is_initialized"})


def _stable(a: Analyzer, expr: cst.BaseExpression, at_if: Path, at_def: Path) -> bool:
    """Every name in the test has the same assignments reaching it at the ``if`` as at the
    assignment (bound once from it), and every call in it is torch's CUDA query."""
    ok = True

    class _Names(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> bool:
            nonlocal ok
            ok = ok and bool(a.qnames(node.func) & _PURE_TESTS)
            return False

        def visit_Attribute(self, node: cst.Attribute) -> bool:
            self._check(node)
            return False

        def visit_Name(self, node: cst.Name) -> None:
            self._check(node)

        def _check(self, node: cst.BaseExpression) -> None:
            nonlocal ok
            name = dotted(node)
            if name is None or name in ("True", "False", "None"):
                return
            here, there = reaching(name, (*at_if, node)), reaching(name, (*at_def, node))
            ok = ok and here[1] == there[1] and {id(x.path[-1]) for x in here[0]} == {
                id(x.path[-1]) for x in there[0]}

    expr.visit(_Names())
    return ok


def _could_not_judge(a: Analyzer, f: dict[str, list[object]], init: _Init, nccl: bool | None) -> None:
    """One note for an init that may be NCCL and gets no device finding, where the code calls a
    ``set_device`` the rule cannot follow (``self.accelerator.set_device(i)``) in the init's
    function or in one linked to it: a clean report then still says what was not checked."""
    if nccl is False:
        return
    seen = [s for s in f["unjudged"] if isinstance(s, _SetDevice) and (
        s.scope is init.scope or _runs_before(a, f, s, init) or _runs_after(a, f, s, init))]
    if not seen:
        return
    sd = seen[0]
    line = a.pos(sd.call).start.line
    short = f"cannot follow {sd.how} (line {line}): pass device_id= if it picks a GPU"
    if len(short) > 72:
        short = f"cannot follow the GPU pick on line {line}: pass device_id= if it picks one"
    p = a.report(init.call, "NCX130", short,
                 detail=f"init_process_group without device_id, and the GPU may be picked by {sd.how} "
                 f"(line {line}), an object whose set_device the rule cannot resolve (an accelerator layer "
                 "it does not know, an attribute): under nccl2 (torch 2.15) the group binds cuda:(LOCAL_RANK "
                 "% device_count), or cuda:(rank % device_count), whatever that call picks. If it can pick "
                 "another GPU, pass device_id= the device it picks.")
    p.finding.note = True


def _split_long_value(a: Analyzer, call: cst.Call, edits: list[tuple[cst.CSTNode, Edit]]
                      ) -> list[tuple[cst.CSTNode, Edit]]:
    """The argument ``edits`` add last to ``call``, its ``x if c else y`` value split as black
    splits it when the argument's own line outgrows the line length: between parentheses, one
    part per line, indented one level past the argument."""
    ((node, add),) = edits
    indent = re.match(r"[ \t]*", a.line(a.pos(call).start.line))
    block = indent.group(0) if indent else ""

    def edit(given: cst.CSTNode) -> EditResult:
        u = add(given)
        if not isinstance(u, cst.Call) or len(u.args) < 2 or not isinstance(u.args[-1].value, cst.IfExp):
            return u
        arg, ws = u.args[-1], u.args[-2].comma
        if not (isinstance(ws, cst.Comma) and isinstance(ws.whitespace_after, cst.ParenthesizedWhitespace)):
            return u  # the argument shares a line: the call's own split decides
        pw = ws.whitespace_after
        own = (block if pw.indent else "") + pw.last_line.value
        if len(own) + len(a.code(arg).strip()) + 1 <= a.line_length():
            return u

        def nl(extra: str) -> cst.ParenthesizedWhitespace:
            return cst.ParenthesizedWhitespace(indent=pw.indent, last_line=cst.SimpleWhitespace(pw.last_line.value + extra))

        value = arg.value
        assert isinstance(value, cst.IfExp)
        split = value.with_changes(
            whitespace_before_if=nl("    "), whitespace_before_else=nl("    "),
            lpar=[cst.LeftParen(whitespace_after=nl("    "))], rpar=[cst.RightParen(whitespace_before=nl(""))])
        return u.with_changes(args=[*u.args[:-1], arg.with_changes(value=split)])

    return [(node, edit)]


def _device_id(a: Analyzer, f: dict[str, list[object]]) -> None:
    if not f["set_device"] and not f["unjudged"]:
        return
    for init in f["inits"]:
        assert isinstance(init, _Init)
        call = init.call
        if any(arg.keyword is not None and arg.keyword.value == "device_id" for arg in call.args):
            continue
        star = next((arg.value for arg in call.args if arg.star == "**"), None)
        container: cst.Dict | cst.Call | None = None
        nccl: bool | None
        forwarded = ""  # **kwargs that come from the caller: it may hold device_id
        if star is not None:
            kw = _kwargs(a, init, star)
            if kw.device_id:
                continue  # device_id reaches the call through the dict
            if kw.opaque:
                forwarded = (f" This call passes **{a.code(star).strip()} from elsewhere: if that already "
                             "holds device_id, nothing is needed.")
            container = kw.dicts[0] if len(kw.dicts) == 1 and not kw.opaque else None
            if kw.backend_set:
                nccl = None
            elif kw.opaque or not kw.dicts:
                nccl = _is_nccl_backend(a, init.use, init.path)
            else:
                each = [_is_nccl_backend(a, _BackendUse(call, init.use.member, bexpr, init.use.scope), init.path)
                        if (bexpr := _backend_in(a, d) or init.use.expr) is not None else True for d in kw.dicts]
                nccl = True if True in each else False if all(e is False for e in each) else None
        else:
            nccl = _is_nccl_backend(a, init.use, init.path)
        if nccl is False:
            continue
        pickers = [s for s in f["set_device"] if isinstance(s, _SetDevice)]
        same = [s for s in pickers if s.scope is init.scope]
        before = [s for s in same if s.order < init.order]
        dominating = [s for s in before if s.suites and s.suites[-1] in init.suites]
        elsewhere = [s for s in pickers if s.scope is not init.scope and _runs_before(a, f, s, init)]
        # a pick in a function called after the init is evidence only for a group known to be NCCL
        # (accelerate's set_device() also runs after its CPU groups)
        later = same or [s for s in pickers if nccl and s.scope is not init.scope and _runs_after(a, f, s, init)]
        if not (later or elsewhere):
            _could_not_judge(a, f, init, nccl)
            continue  # the file's picks lead neither to this init nor from it: no evidence for it
        sd = (dominating or before or elsewhere or later)[-1 if (dominating or before or elsewhere) else 0]
        # The pick sits in the branch that makes the backend NCCL: on every NCCL path it runs first.
        guarded = (_nccl_only_after(a, sd, init) if not dominating and before and nccl and star is None
                   and sd.path else None)
        verdict = (judge(a, sd.device, sd.path, call if sd.scope is init.scope else None,
                         functools.partial(_before, a, f, init), picks=sd.picks)
                   if sd.device is not None else None)
        origin = verdict.severity if verdict is not None else None
        alone = verdict is not None and verdict.fixed0 and lone(call)
        if alone:
            origin = True  # rank 0 of one process: nccl2 binds cuda:0 too, but for an inherited LOCAL_RANK
        what = verdict.what if verdict is not None else "its argument"
        short = verdict.short if verdict is not None else "its argument"
        code = "NCX130" if origin is True else "NCX134"
        base = ("init_process_group without device_id: under nccl2 (torch 2.15) the group binds "
                "cuda:(LOCAL_RANK % device_count), or cuda:(rank % device_count) without LOCAL_RANK, and "
                f"ignores the GPU picked with {sd.how}")
        if alone:
            why = (f"the device is {what} and this is a lone process (world_size=1, rank=0): nccl2 binds "
                   "cuda:0 for it too, so device_id= is hardening, unless the process inherits a LOCAL_RANK "
                   "other than 0 (started from a torchrun worker, or a test run under torchrun), where nccl2 "
                   "binds cuda:(LOCAL_RANK % device_count) and device_id= keeps the group on cuda:0")
        elif origin is True:
            why = (f"the device is {what}, the GPU nccl2 picks under torchrun, so device_id= is hardening "
                   "(it keeps the group on that GPU under launchers that set LOCAL_RANK differently)")
        elif origin is False:
            assert verdict is not None
            why = f"the device comes from {what}: {verdict.why} (a break, not hardening)"
        elif verdict is not None:
            why = f"the device comes from {what}: {verdict.why}"
        else:
            why = ("where its argument comes from is not visible here: unless it is LOCAL_RANK % device_count "
                   "the group runs on another GPU than this process")
        line = a.pos(sd.call).start.line
        by_helper = sd.how not in _PICKERS.values()
        tag = {True: "(hardening)", False: "(a break)", None: "(maybe a break)"}[origin]
        # The message names where the device comes from when that fits in a short line.
        head = f"nccl2 ignores the GPU from {short} (line {line})"
        if len(head) > 70 - len(tag) - (0 if nccl and star is None else 9):  # messages stay within 88
            head = f"nccl2 ignores the GPU picked on line {line}"
        if dominating and nccl and not by_helper and not (star is not None and container is None):
            torch_name = sd.torch_name or "torch"
            value = cst.parse_expression(f'{torch_name}.device("cuda", {torch_name}.cuda.current_device())')
            imports: list[tuple[str, str | None]] = [] if sd.torch_name else [("torch", None)]
            if container is not None and a.pos(container).start.line > line:
                target = (append_element(a, container, "device_id", value) if isinstance(container, cst.Dict)
                          else append_kwarg(a, container, "device_id", value))
                where = f"; {why}. Adds device_id to the {a.code(star or call).strip()} dict, the device chosen on line {line}"
            else:
                target = append_kwarg(a, call, "device_id", value)
                where = f"; {why}. Pass device_id= the device chosen on line {line}"
            a.report(call, code, f"{head}: pass device_id= {tag}", FixKind.UNSAFE, target, imports,
                     detail=f"{base}{where} (on legacy this also makes init eager).")
        elif guarded and not by_helper:
            torch_name = sd.torch_name or "torch"
            assert init.use.expr is not None
            name = a.code(init.use.expr).strip()
            test = (f"{name} == {guarded[0]!r}" if len(guarded) == 1
                    else f"{name} in ({', '.join(map(repr, guarded))})").replace("'", '"')
            value = cst.parse_expression(
                f'{torch_name}.device("cuda", {torch_name}.cuda.current_device()) if {test} else None')
            imports = [] if sd.torch_name else [("torch", None)]
            a.report(call, code, f"{head}: pass device_id= {tag}", FixKind.UNSAFE,
                     _split_long_value(a, call, append_kwarg(a, call, "device_id", value)), imports,
                     detail=f"{base}; {why}. The GPU pick on line {line} runs on every path where the backend "
                     f"is NCCL (it runs in the block of each assignment of {name} to an NCCL backend, or under the "
                     f"condition that makes it NCCL): pass device_id= the "
                     f"device chosen there when {test}, None (the default) otherwise "
                     "(on legacy this also makes init eager).")
        elif dominating and by_helper:
            dev = a.code(sd.device) if sd.device is not None and not sd.picks else "the index"
            a.report(call, code, f"{head}: pass device_id= {tag}",
                     detail=f"{base}; {why}. Pass device_id=torch.device(<this device type>, {dev}) "
                     f"(the device picked on line {line}).")
        elif dominating:
            a.report(call, code, f"{head}: if NCCL, pass device_id= {tag}",
                     detail=f"{base}; {why}. If this backend is NCCL, pass device_id= the device "
                     f"chosen on line {line}.")
        elif before:
            a.report(call, code, f"the GPU pick on line {line} may not run before init: pass device_id= {tag}",
                     detail=f"{base}; {why}. The GPU pick on line {line} does not always run "
                     "first, so pass device_id= explicitly where the device is known.")
        elif later:
            a.report(call, code, f"init runs before the GPU pick on line {line}: pass device_id= {tag}",
                     detail=f"{base}; {why}. The GPU is picked only after init (line {line}), so pass "
                     "device_id= the intended device to init_process_group.")
        elif elsewhere:
            fn = sd.scope.name.value if isinstance(sd.scope, cst.FunctionDef) else "another function"
            a.report(call, code, f"nccl2 ignores the GPU picked on line {line}: pass device_id= {tag}",
                     detail=f"{base}; {why}. The GPU is picked in {fn}() (line {line}), which runs before this "
                     "init, so pass device_id= the intended device to init_process_group.")
        else:
            a.report(call, code, f"nccl2 ignores the GPU picked on line {line}: pass device_id= {tag}",
                     detail=f"{base}; {why}. This file picks its GPU elsewhere (line {line}), so pass "
                     "device_id= the intended device to init_process_group.")
        if forwarded:  # every branch above reported exactly once
            a.pending[-1].finding.detail += forwarded
