"""Members of legacy ``c10d::ProcessGroupNCCL`` that nccl2's class does not declare (NCX303).

:data:`LEGACY_ONLY` is derived from the torch 2.15.0 headers by :func:`derive` (a
tree-sitter parse of both class bodies, public members: a protected one is reached only
from a subclass, which NCX306 reports); a test re-derives it
from the installed headers and compares.  To refresh it:
``python -m ncclx_migrate._migrate._files._cpp._members <site-packages>/torch/include``.
The value says whether ``c10d::Backend`` declares the member: then a call through an nccl2
backend compiles but reaches Backend's default (which throws or does nothing).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

from tree_sitter import Node

__all__ = ["LEGACY_ONLY", "derive"]

# name -> declared by c10d::Backend too (torch 2.15.0 headers)
LEGACY_ONLY: dict[str, bool] = {
    "_broadcast_oop": False,
    "_reduce_oop": False,
    "abortCommsFromMap": False,
    "all_gather_single": True,
    "all_gather_single_coalesced": True,
    "all_to_all_single": True,
    "getCommSplitCounter": False,
    "getOptions": False,
    "getUid": False,
    "groupEnd": False,
    "groupEndNonblocking": False,
    "groupStart": False,
    "initIntraNodeComm": False,
    "merge": True,
    "recvAnysource": True,
    "reduce_scatter_single": True,
    "reduce_scatter_single_coalesced": True,
    "registerOnCompletionHook": True,
    "setEnableNanCheck": False,
    "waitForPendingWorks": True,
}

_C10D = os.path.join("torch", "csrc", "distributed", "c10d")
_HEADERS = {
    "legacy": os.path.join(_C10D, "ProcessGroupNCCL.hpp"),
    "nccl2": os.path.join(_C10D, "nccl2", "ProcessGroupNCCL.hpp"),
    "backend": os.path.join(_C10D, "Backend.hpp"),
}
_KINDS = ("field_declaration", "declaration", "function_definition")


def _class_members(path: str, cls: str) -> dict[str, str]:
    """member name -> access ("public", "protected", "private") of class ``cls`` in ``path``."""
    from ._parse import parse_bytes

    with open(path, "rb") as fh:
        tree, _ = parse_bytes(path, fh.read())
    body = next((n.child_by_field_name("body") for n in _walk(tree.root_node)
                 if n.type == "class_specifier" and _text(n.child_by_field_name("name")) == cls
                 and n.child_by_field_name("body") is not None), None)
    if body is None:
        raise ValueError(f"{path}: no class {cls} with a body")
    out: dict[str, str] = {}
    access = "private"
    for child in _flat(body):
        if child.type == "access_specifier":
            access = _text(child).strip(":").strip()
            continue
        decls = [child] if child.type in _KINDS else [c for c in child.named_children if c.type in _KINDS]
        for decl in decls:
            for d in decl.children_by_field_name("declarator"):
                name = _declared_name(d)
                if name and name not in out:
                    out[name] = access
    return out


def _flat(body: Node) -> Iterator[Node]:
    """Members of a class body, looking through ``#if``/``#ifdef`` blocks (both branches)."""
    for child in body.named_children:
        if child.type.startswith("preproc_") and child.type not in ("preproc_call", "preproc_def"):
            yield from _flat(child)
        else:
            yield child


def _declared_name(node: Node | None) -> str | None:
    while node is not None and node.type not in ("identifier", "field_identifier"):
        if node.type in ("destructor_name", "operator_name", "qualified_identifier"):
            return None
        node = node.child_by_field_name("declarator")
    return _text(node) if node is not None else None


def _walk(node: Node) -> Iterator[Node]:
    yield node
    for c in node.children:
        yield from _walk(c)


def _text(node: Node | None) -> str:
    return node.text.decode("utf-8") if node is not None and node.text is not None else ""


def derive(include_dir: str) -> dict[str, bool]:
    """The :data:`LEGACY_ONLY` table from the headers under ``include_dir`` (torch/include)."""
    paths = {k: os.path.join(include_dir, v) for k, v in _HEADERS.items()}
    legacy = _class_members(paths["legacy"], "ProcessGroupNCCL")
    nccl2 = _class_members(paths["nccl2"], "ProcessGroupNCCL")
    backend = _class_members(paths["backend"], "Backend")
    reachable = {n for n, a in legacy.items() if a == "public"}
    return {n: backend.get(n, "private") != "private"
            for n in sorted(reachable - set(nccl2) - {"ProcessGroupNCCL"})}


if __name__ == "__main__":
    for name, in_backend in derive(sys.argv[1]).items():
        print(f'    "{name}": {in_backend},')
