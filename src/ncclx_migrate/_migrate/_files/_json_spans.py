"""A JSON reader that remembers where every value sits in the text, so that one value
(a notebook cell's ``source``) can be replaced without re-serialising the document."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from json.decoder import scanstring  # type: ignore[attr-defined]

__all__ = ["JsonError", "Node", "parse"]

_WS = re.compile(r"[ \t\r\n]*")
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?")
_LITERALS = {"true": True, "false": False, "null": None}


class JsonError(ValueError):
    pass


@dataclass
class Node:
    start: int
    end: int
    value: object = None
    items: list[Node] = field(default_factory=list)  # arrays
    members: dict[str, Node] = field(default_factory=dict)  # objects


def parse(text: str) -> Node:
    # json.loads first: its error messages are the ones users know, and it rejects
    # everything this small reader might accept by accident.
    try:
        json.loads(text)
    except ValueError as exc:
        raise JsonError(str(exc)) from None
    node, _ = _value(text, _WS.match(text, 0).end())  # type: ignore[union-attr]
    return node


def _value(text: str, i: int) -> tuple[Node, int]:
    c = text[i]
    if c == "{":
        node = Node(i, i)
        i = _WS.match(text, i + 1).end()  # type: ignore[union-attr]
        if text[i] == "}":
            node.end = i + 1
            return node, i + 1
        while True:
            key, i = scanstring(text, i + 1)
            i = _WS.match(text, i).end() + 1  # type: ignore[union-attr]  # the ':'
            i = _WS.match(text, i).end()  # type: ignore[union-attr]
            child, i = _value(text, i)
            node.members[key] = child
            i = _WS.match(text, i).end()  # type: ignore[union-attr]
            if text[i] == "}":
                node.end = i + 1
                return node, i + 1
            i = _WS.match(text, i + 1).end()  # type: ignore[union-attr]  # past ','
    if c == "[":
        node = Node(i, i)
        i = _WS.match(text, i + 1).end()  # type: ignore[union-attr]
        if text[i] == "]":
            node.end = i + 1
            return node, i + 1
        while True:
            child, i = _value(text, i)
            node.items.append(child)
            i = _WS.match(text, i).end()  # type: ignore[union-attr]
            if text[i] == "]":
                node.end = i + 1
                return node, i + 1
            i = _WS.match(text, i + 1).end()  # type: ignore[union-attr]
    if c == '"':
        s, end = scanstring(text, i + 1)
        return Node(i, end, s), end
    for word, val in _LITERALS.items():
        if text.startswith(word, i):
            return Node(i, i + len(word), val), i + len(word)
    m = _NUMBER.match(text, i)
    if m is None:
        raise JsonError(f"unexpected {c!r} at offset {i}")
    return Node(i, m.end(), json.loads(m.group(0))), m.end()
