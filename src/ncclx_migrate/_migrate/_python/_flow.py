"""Simple in-file data flow: where does the string in a backend argument come from?

A string is "provable" when it is the literal itself, the only value ever assigned to a
name (module constant or local), the default of a dataclass field, or an argparse
default whose ``dest`` matches the attribute read.  Anything else is unresolved.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from ._ctx import Analyzer, on
from ._scope import Scope

__all__ = ["Flow", "flow", "resolve"]


@dataclass
class Flow:
    fields: dict[str, list[cst.BaseExpression]] = field(default_factory=dict)  # dataclass fields
    argparse: dict[str, list[cst.BaseExpression]] = field(default_factory=dict)  # dest -> defaults


def flow(a: Analyzer) -> Flow:
    f = a.facts.get("flow")
    if f is None:
        f = a.facts["flow"] = Flow()
    assert isinstance(f, Flow)
    return f


def _is_dataclass(cls: cst.ClassDef) -> bool:
    for d in cls.decorators:
        expr = d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator
        name = expr.attr.value if isinstance(expr, cst.Attribute) else getattr(expr, "value", "")
        if name in ("dataclass", "define", "frozen", "attrs", "s"):
            return True
    return False


@on(cst.AnnAssign)
def _annassign(a: Analyzer, node: cst.AnnAssign) -> None:
    if node.value is None or not isinstance(node.target, cst.Name):
        return
    f = flow(a)
    # A dataclass field: AnnAssign -> SimpleStatementLine -> IndentedBlock -> ClassDef
    cls = a.parent(3)
    if isinstance(cls, cst.ClassDef) and _is_dataclass(cls):
        value: cst.BaseExpression = node.value
        if isinstance(value, cst.Call):  # field(default="...")
            value = next((x.value for x in value.args if x.keyword and x.keyword.value == "default"), value)
        f.fields.setdefault(node.target.value, []).append(value)


@on(cst.Call)
def _add_argument(a: Analyzer, node: cst.Call) -> None:
    if not (isinstance(node.func, cst.Attribute) and node.func.attr.value == "add_argument"):
        return
    default = dest = None
    opts: list[str] = []
    for arg in node.args:
        if arg.keyword is None and isinstance(arg.value, cst.SimpleString):
            v = arg.value.evaluated_value
            if isinstance(v, str):
                opts.append(v)
        elif arg.keyword is not None and arg.keyword.value == "default":
            default = arg.value
        elif arg.keyword is not None and arg.keyword.value == "dest" and isinstance(arg.value, cst.SimpleString):
            d = arg.value.evaluated_value
            dest = d if isinstance(d, str) else None
    if default is None or not opts:
        return
    if dest is None:
        longs = [o for o in opts if o.startswith("--")]
        dest = (longs[0] if longs else opts[0]).lstrip("-").replace("-", "_")
    flow(a).argparse.setdefault(dest, []).append(default)


def resolve(a: Analyzer, expr: cst.BaseExpression, scope: Scope | None = None) -> cst.SimpleString | None:
    """The one string literal ``expr`` provably evaluates to, else None.

    Exact after the walk (every binding known); ``scope`` is where ``expr`` was met."""
    if isinstance(expr, cst.SimpleString):
        return expr
    f = flow(a)
    if isinstance(expr, cst.Name):
        value = a.scopes.single_value(expr.value, scope or a.scope())
        return value if isinstance(value, cst.SimpleString) else None
    if isinstance(expr, cst.Attribute):
        cands = [*f.fields.get(expr.attr.value, []), *f.argparse.get(expr.attr.value, [])]
        if len(cands) == 1 and isinstance(cands[0], cst.SimpleString):
            return cands[0]
        if len(cands) == 1 and isinstance(cands[0], cst.Name):  # default=DEFAULT_BACKEND
            value = a.scopes.single_value(cands[0].value, a.scopes.module_scope)
            return value if isinstance(value, cst.SimpleString) else None
    return None
