"""Which assignments of a name (or a dotted attribute such as ``args.gpu``) can reach a use:
reaching definitions over one function's statements, after the walk.

Exact in straight-line code: the nearest assignment before the use in its block, or in a
block around it, is the only one that reaches it.  Across branches it joins: the assignments
at the end of each branch of an ``if`` that falls through (a branch that ends in ``return``,
``raise``, ``break`` or ``continue`` adds none), every assignment in a loop or ``try`` that may
have run, and the value on entry to the function when some path assigns nothing.  Bindings
other than ``x = value`` (loop targets, ``x += 1``, ``with ... as x``, a ``def``) are kept as
values not known.  Not seen: assignments through ``setattr``, ``globals()``, another
function, or a walrus in a condition.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from ._scope import dotted

__all__ = ["Def", "Path", "dotted", "every", "reaching", "returns"]

Path = tuple[cst.CSTNode, ...]  # the enclosing nodes, outermost (the module) first

_BLOCKS = (cst.Module, cst.IndentedBlock, cst.SimpleStatementSuite, cst.SimpleStatementLine)
_SCOPES = (cst.FunctionDef, cst.ClassDef, cst.Lambda)
_EXITS = (cst.Return, cst.Raise, cst.Continue, cst.Break)
_CONTAINERS = (cst.BaseStatement, cst.BaseSmallStatement, cst.BaseSuite, cst.Else, cst.ExceptHandler,
               cst.ExceptStarHandler, cst.Finally, cst.MatchCase)


@dataclass(frozen=True)
class Def:
    value: cst.BaseExpression | None  # None: bound in another way (loop target, +=, with ... as, def)
    index: int | None  # the element of ``value`` a tuple target takes
    path: Path  # down to the statement that binds (a small statement, or the compound one)
    whole: bool = True  # False: a prefix is rebound (``args = ...`` for ``args.gpu``)
    loop: bool = False  # a ``for`` target: ``value`` is what it iterates over


def _bind(node: cst.BaseExpression, value: cst.BaseExpression, target: str, path: Path,
          index: int | None = None) -> Def | None:
    code = dotted(node)
    if code == target:
        return Def(value, index, path)
    if code is not None and target.startswith(code + "."):
        return Def(None, None, path, whole=False)
    if isinstance(node, (cst.Tuple, cst.List)):
        for k, el in enumerate(node.elements):
            if isinstance(el, cst.StarredElement) or index is not None:
                if _hits(el.value, target):
                    return Def(None, None, path)
                continue
            d = _bind(el.value, value, target, path, k)
            if d is not None:
                return d
    return None


def _hits(node: cst.BaseExpression, target: str) -> bool:
    code = dotted(node)
    if code is not None:
        return code == target or target.startswith(code + ".")
    if isinstance(node, (cst.Tuple, cst.List)):
        return any(_hits(el.value, target) for el in node.elements)
    if isinstance(node, cst.StarredElement):
        return _hits(node.value, target)
    return False


def _small(node: cst.BaseSmallStatement, target: str, path: Path) -> Def | None:
    """The binding of ``target`` a small statement makes, if any."""
    if isinstance(node, cst.Assign):
        for t in node.targets:
            d = _bind(t.target, node.value, target, path)
            if d is not None:
                return d
    elif isinstance(node, cst.AnnAssign) and node.value is not None:
        return _bind(node.target, node.value, target, path)
    elif isinstance(node, cst.AugAssign) and _hits(node.target, target):
        return Def(None, None, path)
    elif isinstance(node, (cst.Import, cst.ImportFrom)) and not isinstance(node.names, cst.ImportStar):
        for alias in node.names:
            bound = alias.asname.name if alias.asname is not None else alias.name
            if dotted(bound) == target or (isinstance(node, cst.Import) and dotted(bound) == target.split(".")[0]):
                return Def(None, None, path)
    return None


def _exits(block: cst.BaseSuite) -> bool:
    """The block never falls through (it ends in return, raise, break or continue)."""
    last: cst.CSTNode | None = block.body[-1] if block.body else None
    if isinstance(last, cst.SimpleStatementLine):
        last = last.body[-1] if last.body else None
    return isinstance(last, _EXITS)


def _scan_block(block: cst.BaseSuite, target: str, path: Path) -> tuple[list[Def], bool]:
    """Bindings that reach the end of ``block`` (``path`` ends with it), and whether one of
    them is on every path through it."""
    out: list[Def] = []
    for item in reversed(block.body):
        found, definite = _scan(item, target, path)
        out += found
        if definite:
            return out, True
    return out, False


def _scan(item: cst.CSTNode, target: str, prefix: Path) -> tuple[list[Def], bool]:
    """Bindings that reach the end of ``item`` run to completion, and whether certainly one."""
    path = (*prefix, item)
    if isinstance(item, cst.SimpleStatementLine):
        for small in reversed(item.body):
            d = _small(small, target, (*path, small))
            if d is not None:
                return [d], True
        return [], False
    if isinstance(item, cst.BaseSmallStatement):
        d = _small(item, target, path)
        return ([d], True) if d is not None else ([], False)
    if isinstance(item, cst.If):
        return _scan_if(item, target, prefix)
    if isinstance(item, cst.With):
        found, definite = _scan_block(item.body, target, (*path, item.body))
        if not definite and any(w.asname is not None and _hits(w.asname.name, target) for w in item.items):
            return [*found, Def(None, None, path)], True
        return found, definite
    if isinstance(item, (cst.FunctionDef, cst.ClassDef)):
        return ([Def(None, None, path)], True) if item.name.value == target else ([], False)
    if isinstance(item, cst.BaseCompoundStatement):  # loops, try, match: any of it may have run
        return every(item, target, prefix), False
    return [], False


def _scan_if(node: cst.If, target: str, prefix: Path) -> tuple[list[Def], bool]:
    out: list[Def] = []
    definite = True
    branch, path = node, prefix
    while True:
        if not _exits(branch.body):
            found, full = _scan_block(branch.body, target, (*path, branch, branch.body))
            out += found
            definite = definite and full
        orelse = branch.orelse
        if isinstance(orelse, cst.If):  # elif
            branch, path = orelse, (*path, branch)
            continue
        if orelse is None:
            return out, False  # no else: a path that assigns nothing
        if not _exits(orelse.body):
            found, full = _scan_block(orelse.body, target, (*path, branch, orelse, orelse.body))
            out += found
            definite = definite and full
        return out, definite


def every(node: cst.CSTNode, target: str, prefix: Path = ()) -> list[Def]:
    """Every binding of ``target`` in ``node``, a statement or block (not in nested functions)."""
    path = (*prefix, node)
    if isinstance(node, cst.BaseSmallStatement):
        d = _small(node, target, path)
        return [d] if d is not None else []
    if isinstance(node, (cst.FunctionDef, cst.ClassDef)) and prefix:
        return [Def(None, None, path)] if node.name.value == target else []
    out: list[Def] = []
    if isinstance(node, cst.For) and _hits(node.target, target):
        out.append(Def(node.iter, None, path, loop=True) if dotted(node.target) == target else Def(None, None, path))
    if isinstance(node, cst.With) and any(w.asname is not None and _hits(w.asname.name, target) for w in node.items):
        out.append(Def(None, None, path))
    for child in node.children:
        if isinstance(child, _CONTAINERS):
            out += every(child, target, path)
    return out


def reaching(target: str, path: Path) -> tuple[list[Def], bool]:
    """The bindings of ``target`` that can reach the node ``path`` ends with, and whether its
    value on entry to the enclosing function (or the module) can reach it too."""
    out: list[Def] = []
    for i in range(len(path) - 1, 0, -1):
        node, parent = path[i], path[i - 1]
        if isinstance(node, _SCOPES) and i < len(path) - 1:
            return out, True
        if isinstance(parent, _BLOCKS):
            items = list(parent.body)
            at = next((j for j, it in enumerate(items) if it is node), 0)
            for item in reversed(items[:at]):
                found, definite = _scan(item, target, path[:i])
                out += found
                if definite:
                    return out, False
        elif isinstance(parent, (cst.For, cst.While)):  # a later iteration sees every binding in the loop
            out += every(parent, target, path[: i - 1])
        elif isinstance(parent, (cst.Try, cst.TryStar)) and node is not parent.body:
            out += every(parent.body, target, path[:i])  # the try body may have run in part
            if node is parent.finalbody:
                out += [d for h in parent.handlers for d in every(h, target, path[:i])]
        elif isinstance(parent, cst.With) and node is parent.body:
            if any(w.asname is not None and _hits(w.asname.name, target) for w in parent.items):
                return [*out, Def(None, None, path[:i])], False
    return out, True


def returns(node: cst.CSTNode, prefix: Path) -> list[tuple[cst.Return, Path]]:
    """The ``return`` statements of a function (``prefix`` ends with it), not of nested ones."""
    out: list[tuple[cst.Return, Path]] = []
    for child in node.children:
        if isinstance(child, cst.Return):
            out.append((child, (*prefix, child)))
        elif isinstance(child, _CONTAINERS) and not isinstance(child, (cst.FunctionDef, cst.ClassDef)):
            out += returns(child, (*prefix, child))
    return out
