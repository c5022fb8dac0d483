"""The rules' walk (_python/_walk.py) calls a visitor's hooks in exactly the order libcst's own
``visit`` does, on every Python fixture and on code written to reach each kind of node whose
fields libcst visits conditionally (an f-string's format spec) or in an order other than the
class declares them (decorators before a def's name, a from-import's parts)."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from ncclx_migrate._migrate._python._walk import Kinds, walk

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SHAPES = '''
import a.b as c, d
from ..x import (y as z, w)
from q import *
@dec(1)
@other
async def f(a: int = 1, /, b: "str" = f"{x!r:>{width}}", *args, k=f"{y}", **kw) -> list[int]:
    global g
    async with m() as (p, q), n:
        async for i in aiter():
            yield (await i)
    lambda x, *, y=2: x if y else -x
    return [v for v in range(3) if v] + {k: v for k, v in {}.items()} + {s for s in ()}
class K(Base, metaclass=M):
    x: int = 1
    def __init__(self): self.a, *self.b = 1, 2; del self.a
try:
    pass
except* (ValueError, TypeError) as e:
    raise RuntimeError from e
else:
    assert x, "msg"
finally:
    pass
match cmd:
    case [1, *rest] | {"k": v, **kw} if v: pass
    case Point(x=0, y=yy) as pt: pass
while (n := n - 1) > 0:
    print(t"{n}" if False else f"{n:{n}.{n}}", end="")
x = a[1:2, ::3] @ b ** -c
type Alias[T] = list[T]
'''


class _Events(cst.CSTVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.events: list[int] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.events.append(id(node))
        return not isinstance(node, cst.Lambda)  # a visitor that skips a subtree is followed too

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self.events.append(-id(original_node))


def _same_order(module: cst.Module) -> int:
    theirs, ours = _Events(), _Events()
    module.visit(theirs)
    walk(module, ours)
    assert ours.events == theirs.events
    return len(ours.events)


def _parsed(text: str) -> cst.Module | None:
    try:
        return cst.parse_module(text)
    except cst.ParserSyntaxError:
        return None


def test_every_kind_of_node_in_libcsts_order() -> None:
    module = _parsed(SHAPES)
    if module is None:  # t-strings: a libcst that predates them
        module = cst.parse_module(SHAPES.replace('t"{n}"', 'f"{n}"'))
    assert _same_order(module) > 1000


@pytest.mark.parametrize("path", sorted(FIXTURES.rglob("*.py")), ids=lambda p: str(p.relative_to(FIXTURES)))
def test_fixture_in_libcsts_order(path: Path) -> None:
    module = _parsed(path.read_text(encoding="utf-8"))
    if module is None:
        pytest.skip("not Python that libcst parses (a fixture of a parse error)")
    _same_order(module)


def test_kinds_answers_as_isinstance() -> None:
    statements = Kinds(cst.SimpleStatementLine, cst.BaseCompoundStatement)
    module = cst.parse_module("if x:\n    y = 1\nz\n")
    nodes: list[cst.CSTNode] = []

    class _All(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            nodes.append(node)
            return True

    module.visit(_All())
    assert [statements(n) for n in nodes] == [isinstance(n, (cst.SimpleStatementLine, cst.BaseCompoundStatement))
                                             for n in nodes]
    assert sum(statements(n) for n in nodes) == 3
