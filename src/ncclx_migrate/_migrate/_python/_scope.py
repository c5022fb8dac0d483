"""Name resolution through the file's imports, and single-assignment lookup, in the one walk.

A light replacement for libcst's ScopeProvider/QualifiedNameProvider, whose whole-module
analysis costs several times a parse.  It knows what the rules need: which import a name
comes from (``import torch.distributed as dist``, ``from torch.distributed import
init_process_group as ipg``), whether a def/class/parameter/loop variable shadows it, and
every binding of a name per function (or module) so that "assigned exactly once" is exact.
Names are resolved against the bindings seen so far in the walk; imports come first in
real code, and an import seen after its use only loses that finding (never a false one).
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass, field

import libcst as cst

__all__ = ["Scope", "Scopes", "dotted"]

_BUILTINS = frozenset(dir(builtins))


@dataclass(eq=False)
class Scope:
    node: cst.CSTNode  # Module, FunctionDef, Lambda or ClassDef
    parent: Scope | None
    imports: dict[str, str] = field(default_factory=dict)  # local name -> qualified name
    shadows: set[str] = field(default_factory=set)  # bound by def/class/param/for/with/except
    assigns: dict[str, list[cst.BaseExpression]] = field(default_factory=dict)  # Name = value
    others: dict[str, int] = field(default_factory=dict)  # any other binding (aug-assign, tuple, ...)
    globals: set[str] = field(default_factory=set)

    @property
    def is_class(self) -> bool:
        return isinstance(self.node, cst.ClassDef)


def dotted(node: cst.CSTNode) -> str | None:
    """``"args.gpu"`` for ``args.gpu``; None for anything but names and attributes of names."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        head = dotted(node.value)
        return f"{head}.{node.attr.value}" if head else None
    return None


class Scopes:
    def __init__(self, module: cst.Module) -> None:
        self.module_scope = Scope(module, None)
        self.current = self.module_scope

    # --- building (called by the walk) ---
    def push(self, node: cst.CSTNode) -> None:
        self.current = Scope(node, self.current)

    def pop(self) -> None:
        assert self.current.parent is not None
        self.current = self.current.parent

    def _target_scope(self, name: str) -> Scope:
        s = self.current
        return self.module_scope if name in s.globals else s

    def bind_import(self, node: cst.Import | cst.ImportFrom) -> None:
        scope = self.current
        if isinstance(node, cst.Import):
            for alias in node.names:
                full = dotted(alias.name)
                if full is None:
                    continue
                if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                    scope.imports[alias.asname.name.value] = full
                else:
                    head = full.split(".", 1)[0]
                    scope.imports[head] = head
            return
        if isinstance(node.names, cst.ImportStar):
            return
        base = dotted(node.module) if node.module is not None else ""
        dots = "." * len(node.relative)
        for alias in node.names:
            name = dotted(alias.name)
            if name is None:
                continue
            local = alias.asname.name.value if alias.asname is not None and isinstance(alias.asname.name, cst.Name) else name
            scope.imports[local] = f"{dots}{base}.{name}" if base else f"{dots}{name}"

    def bind_shadow(self, name: str) -> None:
        self._target_scope(name).shadows.add(name)

    def bind_assign(self, name: str, value: cst.BaseExpression) -> None:
        self._target_scope(name).assigns.setdefault(name, []).append(value)

    def bind_other(self, name: str) -> None:
        s = self._target_scope(name)
        s.others[name] = s.others.get(name, 0) + 1

    def bind_targets(self, target: cst.BaseExpression) -> None:
        """Names bound by a for/with/tuple target: "other" bindings."""
        if isinstance(target, cst.Name):
            self.bind_other(target.value)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for el in target.elements:
                self.bind_targets(el.value)
        elif isinstance(target, cst.StarredElement):
            self.bind_targets(target.value)

    # --- queries ---
    def chain(self) -> Scope:
        return self.current

    @staticmethod
    def _visible(scope: Scope) -> list[Scope]:
        """Scopes a name in ``scope`` may come from, innermost first (class bodies are
        visible only to their own body, as in Python)."""
        out = [scope]
        s = scope.parent
        while s is not None:
            if not s.is_class:
                out.append(s)
            s = s.parent
        return out

    def qualify(self, node: cst.BaseExpression, scope: Scope | None = None) -> str | None:
        """``torch.distributed.init_process_group`` for ``dist.init_process_group`` etc."""
        path = dotted(node)
        if path is None:
            return None
        head, _, rest = path.partition(".")
        for s in self._visible(scope or self.current):
            if head in s.shadows:
                return None  # a local def/class/parameter: not an import
            if head in s.imports:
                q = s.imports[head]
                return f"{q}.{rest}" if rest else q
            alias = self._torch_alias(head, s)
            if alias is not None:
                return f"{alias}.{rest}" if rest else alias
        if head in _BUILTINS:
            return f"builtins.{path}"
        return None

    def _torch_alias(self, name: str, scope: Scope) -> str | None:
        """``torch._C._distributed_c10d`` for ``c10d`` bound once, by ``c10d =
        torch._C._distributed_c10d`` (a torch module or member through an import)."""
        values = scope.assigns.get(name, ())
        if len(values) != 1 or scope.others.get(name) or name in scope.shadows:
            return None
        path = dotted(values[0])
        if path is None:
            return None
        head, _, rest = path.partition(".")
        for s in self._visible(scope):
            if head in s.imports:
                q = s.imports[head]
                q = f"{q}.{rest}" if rest else q
                return q if q.startswith("torch.") else None
            if head in s.shadows or head in s.assigns:
                return None
        return None

    def single_value(self, name: str, scope: Scope) -> cst.BaseExpression | None:
        """The value of ``name`` when, in the scope it resolves to, it is bound exactly once
        and by a plain ``name = value`` (call after the walk, so every binding is known)."""
        for s in self._visible(scope):
            bound = (len(s.assigns.get(name, ())) + s.others.get(name, 0)
                     + (name in s.shadows) + (name in s.imports))
            if bound:
                values = s.assigns.get(name, [])
                return values[0] if bound == 1 and len(values) == 1 else None
        return None
