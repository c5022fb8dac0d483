"""A read-only walk over a libcst tree, in the order libcst's own visit takes, without the
copies that visit makes.

``CSTNode.visit`` rebuilds every node it passes, even for a ``CSTVisitor`` that changes
nothing (``_visit_and_replace_children`` calls each node's constructor and its validation):
half the cost of the rules' walk over a large module.  :func:`walk` calls the same
``on_visit``/``on_leave`` in the same order and reads the children from the node's fields.

The order of a class's fields is libcst's own: learned once per class by letting the class's
``_visit_and_replace_children`` announce each field (``on_visit_attribute``) to a visitor that
goes no deeper.  A field that it visits only when set (``FormattedStringExpression``'s
``format_spec``) is learned again from the first node that has it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import libcst as cst

__all__ = ["Kinds", "walk"]

# class -> the fields its visit reads, in order
_ORDER: dict[type, tuple[str, ...]] = {}
# class -> fields its visit skipped in the node it was learned from (they were None): a node
# that sets one is learned from again
_UNSEEN: dict[type, tuple[str, ...]] = {}


class _Fields(cst.CSTVisitor):
    """Records the fields a node's visit announces, and visits no child."""

    def __init__(self) -> None:
        super().__init__()
        self.fields: dict[str, None] = {}

    def on_visit(self, node: cst.CSTNode) -> bool:
        return False

    def on_leave(self, original_node: cst.CSTNode) -> None:
        pass

    def on_visit_attribute(self, node: cst.CSTNode, attribute: str) -> None:
        self.fields[attribute] = None

    def on_leave_attribute(self, original_node: cst.CSTNode, attribute: str) -> None:
        pass


def _learn(node: cst.CSTNode) -> tuple[str, ...]:
    fields = _Fields()
    node._visit_and_replace_children(fields)
    order = tuple(fields.fields)
    _ORDER[type(node)] = order
    _UNSEEN[type(node)] = tuple(f.name for f in dataclasses.fields(node)
                                if f.name not in fields.fields and getattr(node, f.name) is None)
    return order


def _order(node: cst.CSTNode) -> tuple[str, ...]:
    cls = type(node)
    order = _ORDER.get(cls)
    if order is None:
        return _learn(node)
    unseen = _UNSEEN[cls]
    if unseen and any(getattr(node, name) is not None for name in unseen):
        return _learn(node)
    return order


def walk(node: cst.CSTNode, visitor: Any) -> None:
    """``node.visit(visitor)`` for a visitor that changes nothing (``on_visit(node) -> bool``,
    ``on_leave(node)``), without rebuilding the tree."""
    if visitor.on_visit(node):
        for name in _order(node):
            value = getattr(node, name)
            if value.__class__ is tuple or value.__class__ is list:
                for child in value:
                    walk(child, visitor)
            elif value is not None and value.__class__ is not cst.MaybeSentinel:
                walk(value, visitor)
    visitor.on_leave(node)


class Kinds:
    """``isinstance(node, classes)`` decided once per node class: libcst's node classes are
    ABCs, whose isinstance goes through ``ABCMeta.__instancecheck__`` (about 1 us), which the
    hooks of a walk would pay at every node."""

    __slots__ = ("_memo", "classes")

    def __init__(self, *classes: type) -> None:
        self.classes = classes
        self._memo: dict[type, bool] = {}

    def __call__(self, node: object) -> bool:
        cls = type(node)
        hit = self._memo.get(cls)
        if hit is None:
            hit = self._memo[cls] = issubclass(cls, self.classes)
        return hit
