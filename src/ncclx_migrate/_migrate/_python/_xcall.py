"""Calls of the run's own helpers in other modules (and in this one): see ``_migrate/_xref``."""

from __future__ import annotations

import os

import libcst as cst

from .._xref import Helper, Helpers, absolute, summarize
from ._ctx import Analyzer

__all__ = ["helper", "helpers_of"]


def _own_module(a: Analyzer) -> tuple[str, bool]:
    got = a.facts.get("module_name")
    if got is None:
        got = a.facts["module_name"] = (a.options.project.module_name(a.path), os.path.basename(a.path) == "__init__.py")
    assert isinstance(got, tuple)
    return got


def helpers_of(a: Analyzer) -> Helpers:
    """The run's helpers with this file's own, as the source now reads (the run's index may
    not have it: a single file given to ``transform_source``, a notebook cell, a later pass)."""
    got = a.facts.get("helpers")
    if got is None:
        _own_module(a)  # (its own helpers are named by its module)
        own = summarize(a.source, a.path)
        got = a.facts["helpers"] = a.options.helpers.with_own(own) if own else a.options.helpers
    assert isinstance(got, Helpers)
    return got


def helper(a: Analyzer, func: cst.BaseExpression, own: bool = True) -> tuple[str, Helper] | None:
    """The helper a call's ``func`` names, through this file's imports (or, with ``own``, a
    function of this module), with its qualified name; None when it names none of them."""
    if not isinstance(func, (cst.Name, cst.Attribute)):
        return None
    q = next(iter(a.qnames(func)), None)
    mod, is_pkg = _own_module(a)
    if q is None:
        if not (own and isinstance(func, cst.Name) and any(
                isinstance(n, cst.FunctionDef) and n.name.value == func.value for n in a.module.body)):
            return None
        q = f"{mod}.{func.value}" if mod else func.value
    elif q.startswith("."):
        q = absolute(mod, is_pkg, q)
    elif q.startswith(("torch.", "builtins.")):
        return None
    helpers = helpers_of(a) if own else a.options.helpers
    if not helpers:
        return None
    key = helpers.find(q)
    return (key, helpers.table[key]) if key is not None else None
