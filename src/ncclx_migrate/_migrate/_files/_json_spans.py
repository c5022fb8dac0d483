"""A JSON reader that remembers where every value sits in the text, so that one value
(a notebook cell's ``source``) can be replaced without re-serialising the document.

A ``shape`` names the values wanted (``{"cells": [{"source": ALL}]}``): only those get
nodes; every other value is stepped over by the json module's own C decoder, whose object is
dropped at once.  A notebook's outputs and metadata (most of a large one) so cost nothing,
and the nodes kept are a few per cell (docs/performance.md, "Resource bounds").
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Mapping, Sequence
from json.decoder import scanstring  # type: ignore[attr-defined]

__all__ = ["ALL", "JsonError", "Node", "parse"]

_WS = re.compile(r"[ \t\r\n]*")
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?")
_LITERALS = {"true": True, "false": False, "null": None}
_DECODER = json.JSONDecoder()
_AFTER = frozenset(" \t\r\n,]}")  # what may follow a number or a literal

ALL = True  # a shape: this value and all it holds
Shape = object  # ALL, a dict of key -> shape (other keys skipped), or [shape] (every item)
_NO_ITEMS: Sequence[Node] = ()
_NO_MEMBERS: Mapping[str, Node] = {}


class JsonError(ValueError):
    pass


class _Bad(Exception):
    """Something this reader refuses: the json module then says what (its messages are the
    ones users know)."""


class Node:
    __slots__ = ("end", "items", "members", "start", "value")

    def __init__(self, start: int, end: int, value: object = None, items: Sequence[Node] = _NO_ITEMS,
                 members: Mapping[str, Node] = _NO_MEMBERS) -> None:
        self.start = start
        self.end = end
        self.value = value
        self.items = items  # arrays
        self.members = members  # objects (only the members the shape names)


def parse(text: str, shape: Shape = ALL) -> Node:
    """The node of the document ``text``; raises JsonError with the json module's message
    for anything that is not JSON."""
    try:
        node, i = _value(text, _ws(text, 0), shape)
        if _ws(text, i) != len(text):
            raise _Bad
    except (_Bad, IndexError, ValueError):
        try:
            json.loads(text)
        except ValueError as exc:
            raise JsonError(str(exc)) from None
        raise JsonError("not strict JSON (NaN or Infinity)") from None
    return node


def _ws(text: str, i: int) -> int:
    return _WS.match(text, i).end()  # type: ignore[union-attr]


def _expect(text: str, i: int, char: str) -> int:
    if text[i] != char:
        raise _Bad
    return _ws(text, i + 1)


def _value(text: str, i: int, shape: Shape) -> tuple[Node, int]:
    c = text[i]
    if c == "{":
        members: dict[str, Node] = {}
        start = i
        i = _ws(text, i + 1)
        if text[i] == "}":
            return Node(start, i + 1, members=members), i + 1
        while True:
            if text[i] != '"':
                raise _Bad
            key, i = scanstring(text, i + 1)
            key = sys.intern(key)  # the same few keys in every object: one copy each
            i = _expect(text, _ws(text, i), ":")
            sub = shape if shape is ALL else shape.get(key) if isinstance(shape, dict) else None
            if sub is None:
                _, i = _DECODER.raw_decode(text, i)
            else:
                members[key], i = _value(text, i, sub)
            i = _ws(text, i)
            if text[i] == "}":
                return Node(start, i + 1, members=members), i + 1
            i = _expect(text, i, ",")
    if c == "[":
        items: list[Node] = []
        start = i
        i = _ws(text, i + 1)
        if text[i] == "]":
            return Node(start, i + 1, items=items), i + 1
        sub = shape if shape is ALL else shape[0] if isinstance(shape, list) and shape else {}
        while True:
            child, i = _value(text, i, sub)
            items.append(child)
            i = _ws(text, i)
            if text[i] == "]":
                return Node(start, i + 1, items=items), i + 1
            i = _expect(text, i, ",")
    if c == '"':
        s, end = scanstring(text, i + 1)
        return Node(i, end, sys.intern(s) if len(s) < 16 and s.isidentifier() else s), end
    word = next((w for w in _LITERALS if text.startswith(w, i)), None)
    val: object
    if word is not None:
        end, val = i + len(word), _LITERALS[word]
    else:
        m = _NUMBER.match(text, i)
        if m is None:
            raise _Bad
        end, val = m.end(), json.loads(m.group(0))
    if end < len(text) and text[end] not in _AFTER:
        raise _Bad
    return Node(i, end, val), end
