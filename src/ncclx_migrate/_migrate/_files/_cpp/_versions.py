"""Which torch releases compile each ``#if`` arm: its conditions on torch's version macros
evaluated as the preprocessor would, for every release the project supports.

torch's ``torch/version.h`` (in 2.13.0-2.15.0 it includes ``torch/headeronly/version.h``)
defines ``TORCH_VERSION_MAJOR``, ``TORCH_VERSION_MINOR``, ``TORCH_VERSION_PATCH``,
``TORCH_VERSION_ABI_TAG`` (0) and ``TORCH_ABI_VERSION`` (``MAJOR << 56 | MINOR << 48 |
PATCH << 40 | ABI_TAG``); ``torch/csrc/stable/version.h`` adds ``TORCH_VERSION_2_N_0``
constants of the same layout.  A condition is read from tree-sitter's own parse of the
directive (``preproc_defined``, ``binary_expression``, ...), evaluated with three values:
true, false, and unknown (a project macro, ``__has_include``, a function-like macro).

The releases are the project's oldest torch (``Options.target_torch``: ``--target-torch``, else
the project's own bound) up to 2.15; nccl2 ships from 2.14.  An arm false on every nccl2
release of that range is code no torch with nccl2 compiles: it has no nccl2 finding.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from tree_sitter import Node

from ._parse import parse_snippet
from ._views import Arm, Group, negate

__all__ = ["NCCL2_FROM", "VersionArms", "releases", "truth"]

NCCL2_FROM = (2, 14)  # the first torch with c10d::nccl2::ProcessGroupNCCL
_NEWEST = (2, 15)
_ABI_FROM = (2, 13)  # the oldest release whose headers were read for TORCH_ABI_VERSION
_PATCHES = (0, 9)  # a release's patch is not known: a condition must agree on both
_STABLE = re.compile(r"TORCH_VERSION_(\d+)_(\d+)_(\d+)\Z")

Release = tuple[int, int]


def releases(oldest: Release) -> tuple[Release, ...]:
    """The torch releases from ``oldest`` up to 2.15 (``oldest`` alone when it is newer)."""
    if oldest >= _NEWEST:
        return (oldest,)
    out = [(1, m) for m in range(oldest[1], 14)] if oldest[0] < 2 else []
    return (*out, *((2, m) for m in range(oldest[1] if oldest[0] == 2 else 0, _NEWEST[1] + 1)))


def _abi(major: int, minor: int, patch: int, tag: int = 0) -> int:
    return (major << 56) | (minor << 48) | (patch << 40) | tag


def _macros(rel: Release, patch: int) -> dict[str, int | None]:
    abi = rel >= _ABI_FROM
    return {"TORCH_VERSION_MAJOR": rel[0], "TORCH_VERSION_MINOR": rel[1], "TORCH_VERSION_PATCH": patch,
            "TORCH_VERSION_ABI_TAG": 0 if abi else None,
            "TORCH_ABI_VERSION": _abi(rel[0], rel[1], patch) if abi else None}


@functools.lru_cache(maxsize=512)
def _condition(text: str) -> Node | None:
    """The expression node of ``#if text`` (None: the grammar cannot read it)."""
    tree = parse_snippet("x.cpp", b"#if " + text.encode("utf-8") + b"\n#endif\n")
    top = tree.root_node.named_children[0] if tree.root_node.named_children else None
    cond = top.child_by_field_name("condition") if top is not None and top.type == "preproc_if" else None
    return None if cond is None or cond.has_error else cond


def truth(text: str, rel: Release) -> bool | None:
    """Is the ``#if`` condition ``text`` true on torch ``rel`` (None: it does not say)?"""
    cond = _condition(text)
    if cond is None:
        return None
    seen = {_value(cond, _macros(rel, p)) for p in _PATCHES}
    if len(seen) != 1 or None in seen:
        return None
    return bool(seen.pop())


def _number(text: str) -> int | None:
    digits = text.rstrip("uUlL").replace("'", "")
    try:
        return int(digits, 8) if re.fullmatch(r"0[0-7]+", digits) else int(digits, 0)
    except ValueError:
        return None


def _value(n: Node, env: dict[str, int | None]) -> int | None:
    t = n.type
    text = n.text.decode("utf-8", "replace") if n.text is not None else ""
    if t == "number_literal":
        return _number(text)
    if t in ("true", "false") or (t == "identifier" and text in ("true", "false")):
        return int(text == "true")
    if t == "identifier":
        stable = _STABLE.match(text)
        return env.get(text) if not stable else _abi(*(int(g) for g in stable.groups()))
    if t == "parenthesized_expression":
        return _value(n.named_children[0], env) if n.named_children else None
    if t == "preproc_defined":
        name = next((c for c in n.named_children if c.type == "identifier"), None)
        key = name.text.decode() if name is not None and name.text is not None else ""
        if key in env:
            return None if env[key] is None else 1
        return None  # a project macro, or one of torch's this table does not know
    if t == "unary_expression":
        arg = n.child_by_field_name("argument")
        op = n.child_by_field_name("operator")
        v = _value(arg, env) if arg is not None else None
        if v is None or op is None:
            return None
        return {"!": int(not v), "-": -v, "+": v, "~": ~v}.get(op.type)
    if t == "binary_expression":
        return _binary(n, env)
    if t == "conditional_expression":
        c, a, b = (n.child_by_field_name(f) for f in ("condition", "consequence", "alternative"))
        v = _value(c, env) if c is not None else None
        if v is None:
            return None
        pick = a if v else b
        return _value(pick, env) if pick is not None else None
    return None  # __has_include (blanked to a call), a function-like macro, a string: not known


def _binary(n: Node, env: dict[str, int | None]) -> int | None:
    left, right, op = n.child_by_field_name("left"), n.child_by_field_name("right"), n.child_by_field_name("operator")
    if left is None or right is None or op is None:
        return None
    a, b = _value(left, env), _value(right, env)
    if op.type == "&&":
        return 0 if a == 0 or b == 0 else None if a is None or b is None else 1
    if op.type == "||":
        return 1 if (a is not None and a != 0) or (b is not None and b != 0) else None if a is None or b is None else 0
    if a is None or b is None:
        return None
    return _arith(op.type, a, b)


_COMPARE = {"==": int.__eq__, "!=": int.__ne__, "<": int.__lt__, ">": int.__gt__, "<=": int.__le__, ">=": int.__ge__}
_ARITH = {"+": int.__add__, "-": int.__sub__, "*": int.__mul__, "&": int.__and__, "|": int.__or__, "^": int.__xor__}


def _arith(op: str, a: int, b: int) -> int | None:
    if op in _COMPARE:
        return int(_COMPARE[op](a, b))
    if op in _ARITH:
        return int(_ARITH[op](a, b))
    if op in ("<<", ">>"):
        return None if b < 0 else a << b if op == "<<" else a >> b
    if op in ("/", "%") and b:
        return int(a / b) if op == "/" else a % b
    return None


def _arm_truth(arm: Arm, rel: Release) -> bool | None:
    known = True
    for text, wanted in arm.terms:
        v = truth(text, rel)
        if v is None:
            known = False
        elif v != wanted:
            return False
    return True if known else None


@dataclass
class VersionArms:
    """The arms of a file's conditionals, read against the releases from ``oldest``."""

    groups: list[Group]
    oldest: Release

    def __post_init__(self) -> None:
        self.nccl2 = tuple(r for r in releases(self.oldest) if r >= NCCL2_FROM)

    def without_nccl2(self, arm: Arm) -> bool:
        """Is ``arm`` compiled by no torch with nccl2 the project supports?"""
        return bool(self.nccl2) and all(_arm_truth(arm, r) is False for r in self.nccl2)

    def every_nccl2(self, arm: Arm) -> bool:
        """Is ``arm`` compiled by every torch with nccl2 the project supports (its condition
        says nothing about nccl2's code)?"""
        return bool(self.nccl2) and all(_arm_truth(arm, r) is True for r in self.nccl2)

    def wording(self, arm: Arm) -> str:
        """``arm``'s condition as a finding says it: without the terms that every torch with
        nccl2 in the range decides the arm's way (an ``#elif``'s "earlier conditions false"
        on torch's version macros), so the finding names only what the scanner cannot
        decide; the whole condition when every term goes or none is decided."""
        if not self.nccl2:
            return arm.condition
        kept = [text if wanted else negate(text) for text, wanted in arm.terms
                if not all(truth(text, r) is wanted for r in self.nccl2)]
        return " && ".join(kept) if kept and len(kept) < len(arm.terms) else arm.condition

    def never_nccl2(self, offset: int) -> bool:
        """Is the byte ``offset`` in code that no torch with nccl2 in the range compiles (the
        arms holding it, together, false on each such release)?"""
        arms = [a for g in self.groups if g.start <= offset < g.end for a in g.arms if a.start <= offset < a.end]
        if not arms or not self.nccl2:
            return False
        return all(any(_arm_truth(a, r) is False for a in arms) for r in self.nccl2)
