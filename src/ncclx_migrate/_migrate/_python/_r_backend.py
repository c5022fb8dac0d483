"""Backend names and process-group creation: NCX103, NCX104, NCX130, NCX131, NCX132.

A backend string is rewritten only when it provably reaches a torch.distributed backend
argument (``_flow.resolve``); every other exact backend-name string is flagged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import libcst as cst

from .._model import FixKind
from ._ctx import Analyzer, Edit, on
from ._edits import append_kwarg, string_like
from ._flow import resolve
from ._names import BACKEND_ARG_POS, backend_parts, is_backend_spec, replace_backend
from ._scope import Scope

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


@dataclass
class _SetDevice:
    call: cst.Call
    scope: cst.CSTNode | None
    order: int
    suites: tuple[int, ...]
    torch_name: str | None  # how the file spells the torch module at this call


def _facts(a: Analyzer) -> dict[str, list[object]]:
    f = a.facts.setdefault("backend", {"uses": [], "strings": [], "inits": [], "set_device": []})
    assert isinstance(f, dict)
    return f


def _backend_arg(call: cst.Call, member: str) -> cst.BaseExpression | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "backend":
            return arg.value
    pos = BACKEND_ARG_POS[member]
    plain = [arg for arg in call.args if arg.keyword is None and not arg.star]
    return plain[pos].value if len(plain) > pos else None


@on(cst.Module, "NCX103", "NCX104", "NCX130", "NCX131")
def _start(a: Analyzer, node: cst.Module) -> None:
    a.finishers.append(lambda: _finish(a))


@on(cst.Call, "NCX103", "NCX104", "NCX130", "NCX131", "NCX132")
def _call(a: Analyzer, node: cst.Call) -> None:
    m = a.dist(node.func)
    if m is None:
        if isinstance(node.func, cst.Attribute) and node.func.attr.value == "set_device":
            qn = a.qnames(node.func)
            if "torch.cuda.set_device" in qn:
                head: cst.BaseExpression = node.func
                while isinstance(head, cst.Attribute):
                    head = head.value
                torch_name = head.value if isinstance(head, cst.Name) and a.qnames(head) == {"torch"} else None
                _facts(a)["set_device"].append(
                    _SetDevice(node, a.enclosing_function(), a.order, a.suites(), torch_name)
                )
        elif isinstance(node.func, cst.Name) and "torch.cuda.set_device" in a.qnames(node.func):
            _facts(a)["set_device"].append(
                _SetDevice(node, a.enclosing_function(), a.order, a.suites(), None)
            )
        return
    if m in ("ProcessGroupNCCL", "ProcessGroupNCCL2") and m == "ProcessGroupNCCL":
        a.report(node, "NCX132", "ProcessGroupNCCL(...) stays legacy on every torch: use init_process_group or new_group",
                 detail="ProcessGroupNCCL(...) built directly bypasses the \"nccl\" switch and stays legacy on "
                 "every torch; create the group with init_process_group/new_group(backend=\"nccl\") "
                 "(or construct ProcessGroupNCCL2 on torch >= 2.14).")
        return
    if m not in BACKEND_ARG_POS:
        return
    use = _BackendUse(node, m, _backend_arg(node, m), a.scope())
    _facts(a)["uses"].append(use)
    if m == "init_process_group":
        _facts(a)["inits"].append(_Init(node, use, a.enclosing_function(), a.order, a.suites()))
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
        _facts(a)["strings"].append((node, True))
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
            short = '"nccl-legacy" selects legacy NCCL, a rollback name: use "nccl" (or record why not)'
            if fixable:
                new = replace_backend(text, "nccl-legacy", "nccl")
                a.report(node, "NCX103", short, FixKind.UNSAFE, _restring(node, new), detail=msg)
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


def _restring(node: cst.CSTNode, text: str) -> list[tuple[cst.CSTNode, Edit]]:
    assert isinstance(node, cst.SimpleString)

    def edit(u: cst.SimpleString) -> cst.SimpleString:
        return string_like(u, text)

    return [(node, edit)]


def _is_nccl_backend(a: Analyzer, use: _BackendUse) -> bool | None:
    """True: builds nccl/nccl2/nccl-lazy for CUDA; False: provably not; None: unknown."""
    if use.expr is None:
        return True  # torch picks "cpu:gloo,cuda:nccl" and this code drives a GPU
    lit = resolve(a, use.expr, use.scope)
    if lit is None:
        return None
    v = lit.evaluated_value
    parts = backend_parts(v) if isinstance(v, str) else None
    if parts is None:
        return None
    return any(n in ("nccl", "nccl2", "nccl-lazy") and d in (None, "cuda") for d, n in parts)


def _device_id(a: Analyzer, f: dict[str, list[object]]) -> None:
    if not f["set_device"]:
        return
    for init in f["inits"]:
        assert isinstance(init, _Init)
        call = init.call
        if any(arg.star == "**" for arg in call.args) or any(
            arg.keyword is not None and arg.keyword.value == "device_id" for arg in call.args
        ):
            continue
        nccl = _is_nccl_backend(a, init.use)
        if nccl is False:
            continue
        same = [s for s in f["set_device"] if isinstance(s, _SetDevice) and s.scope is init.scope]
        before = [s for s in same if s.order < init.order]
        dominating = [s for s in before if s.suites and s.suites[-1] in init.suites]
        base = ("init_process_group without device_id: under nccl2 (torch 2.15) the group binds "
                "cuda:(LOCAL_RANK % device_count) and ignores torch.cuda.set_device")
        if dominating and nccl:
            sd = dominating[-1]
            torch_name = sd.torch_name or "torch"
            value = cst.parse_expression(f'{torch_name}.device("cuda", {torch_name}.cuda.current_device())')
            imports: list[tuple[str, str | None]] = [] if sd.torch_name else [("torch", None)]
            a.report(call, "NCX130",
                     f"init_process_group ignores set_device (line {a.pos(sd.call).start.line}) under nccl2: pass device_id=",
                     FixKind.UNSAFE, append_kwarg(call, "device_id", value), imports,
                     detail=f"{base}; pass device_id= the device chosen by set_device on line {a.pos(sd.call).start.line}. "
                     "(On legacy this also makes init eager.)")
        elif dominating:
            a.report(call, "NCX130", f"init_process_group ignores set_device (line {a.pos(dominating[-1].call).start.line}) "
                     "under nccl2: if NCCL, pass device_id=",
                     detail=f"{base}; if this backend is NCCL, pass device_id= the device "
                     f"chosen by set_device on line {a.pos(dominating[-1].call).start.line}.")
        elif before:
            a.report(call, "NCX130", "init_process_group ignores set_device under nccl2 (it may not run first): pass device_id=",
                     detail=f"{base}; set_device on line {a.pos(before[-1].call).start.line} does not always run "
                     "first, so pass device_id= explicitly where the device is known.")
        elif same:
            a.report(call, "NCX130", "init_process_group ignores set_device under nccl2 (called after it): pass device_id=",
                     detail=f"{base}; set_device is called only after init (line "
                     f"{a.pos(same[0].call).start.line}), so pass device_id= the intended device to init_process_group.")
        else:
            a.report(call, "NCX130", "init_process_group ignores torch.cuda.set_device under nccl2: pass device_id=",
                     detail=f"{base}; this file picks its GPU with torch.cuda.set_device "
                     "elsewhere, so pass device_id= the intended device to init_process_group.")
