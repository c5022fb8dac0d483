"""What a name of the file provably holds: an object the code built itself as the legacy
class, or a ``c10d::ProcessGroup``.

A library that builds its own ``c10d::ProcessGroupNCCL`` (``c10::make_intrusive``,
``std::make_shared``, ``new``) and later casts it, calls its members or compares its name
never sees nccl2 there: the object is the legacy class on every torch that has it.  A name
is *self-built* when every value written to it in the file (initialisers, default member
initialisers, constructor initialiser lists, assignments; a parameter of that name is a value
from elsewhere) is such a construction, or another self-built name, its ``.get()``, or a cast
of one.  A local or a parameter (of a function or a lambda, a structured binding, a
range-for variable) is its own variable, found as the compiler finds it: the innermost
declaration in scope before the use (``name@offset``), so a ``backend`` bound from a sorted
copy of the own groups is not the ``backend`` parameter of another function.  Members and
globals are matched by spelling (a method defined in another file reads them).  A name with
any other origin is not self-built: the rules then judge it as before.  ``nullptr`` is no
object (none of torch's), and a lambda called where it is written gives what its returns give.

Values also flow through the code's own functions and containers, as a front end follows
them: a call of a function (or method) every definition of which returns a self-built object
is self-built; so is an element of a container (``std::map``, ``std::vector``, ...) that the
file fills only with self-built objects (``emplace``, ``try_emplace``, ``push_back``,
``c[k] = v``; a container also passed to a call, assigned whole, or touched by any other
member is not), read with ``c[k]``, ``c.at(k)``, ``it->second`` of an iterator into it or a
range-for over it.  A function is keyed ``f`` or ``Class::f`` (a method, by the class of its
receiver); the runner's pre-pass gathers every file's answers (``Options.cpp_returns``, with
whether a function is *declared* to return a ``c10d::ProcessGroup``, with or without a body),
so a call of a function defined or declared in another file is judged by that file.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from tree_sitter import Node

from ..._crossfile import ignored
from ._names import Kind, Resolver, text_of
from ._parse import find, walk

__all__ = ["BUILDERS", "Build", "Values", "callee_name", "declarator_name", "declared_type", "names_process_group", "strip"]

_WRITES = ("init_declarator", "field_declaration", "field_initializer", "assignment_expression",
           "parameter_declaration", "optional_parameter_declaration", "for_range_loop")
# Container members: what puts an element (map-style, sequence-style), reads or drops one.
_PUT_PAIR = frozenset({"emplace", "try_emplace", "insert_or_assign"})
_PUT_ONE = frozenset({"push_back", "emplace_back", "push_front", "emplace_front"})
_READS = frozenset({"find", "at", "count", "contains", "begin", "end", "cbegin", "cend", "clear", "erase",
                    "size", "empty", "reserve", "lower_bound", "upper_bound"})
_ITERATORS = frozenset({"find", "begin", "lower_bound", "upper_bound"})
_PG_RETURN = re.compile(r"^(?:(?:c10|std)::(?:intrusive_ptr|shared_ptr)<)?(?:::)?c10d::ProcessGroup>?$")

BUILDERS = frozenset({"make_intrusive", "make_shared", "make_unique"})
# torch's other backends: their factories (``ProcessGroupUCC::createProcessGroupUCC``) build an
# object of the code's own, as a construction of any class but the legacy one does (a cast of it
# to the legacy class is null on every torch, its name is never "nccl"): no nccl2 change.
_OTHER_BACKENDS = frozenset({"ProcessGroupGloo", "ProcessGroupMPI", "ProcessGroupUCC", "ProcessGroupXCCL"})
_BEGIN, _END = frozenset({"begin", "cbegin"}), frozenset({"end", "cend"})
_PROCESS_GROUP = re.compile(r"(?:^|[^\w:]|::)ProcessGroup\b")
_CASTS = frozenset({"dynamic_cast", "static_cast", "reinterpret_cast", "dynamic_pointer_cast",
                    "static_pointer_cast", "reinterpret_pointer_cast", "dynamic_intrusive_pointer_cast",
                    "static_intrusive_pointer_cast", "reinterpret_intrusive_pointer_cast", "const_cast"})


@dataclass
class Build:
    node: Node  # the make_intrusive<...>(...) call or the new expression
    builder: str  # "make_intrusive", "make_shared", "make_unique", "new"
    name: Node  # the class name built
    kind: Kind


def _template_call(n: Node) -> tuple[str, Node] | None:
    """(function name, first template argument) of ``f<T>(...)`` / ``ns::f<T>(...)``."""
    fn = n.child_by_field_name("function") if n.type == "call_expression" else None
    while fn is not None and fn.type == "qualified_identifier":
        fn = fn.child_by_field_name("name")
    if fn is None or fn.type != "template_function":
        return None
    args = fn.child_by_field_name("arguments")
    first = args.named_children[0] if args is not None and args.named_children else None
    return (text_of(fn.child_by_field_name("name")), first) if first is not None else None


class Values:
    def __init__(self, root: Node, cuda: bool, nodes: dict[str, list[Node]], resolver: Resolver,
                 project: Mapping[str, bool] | None = None, asked: Callable[[str, str], None] | None = None) -> None:
        self.resolver = resolver
        self.root, self.cuda, self.project = root, cuda, project or {}
        self.asked = asked or ignored  # the run's Project.asked: each fact of another file read
        self._function_nodes, self._calls = nodes["function_definition"], nodes["call_expression"]
        self._nodes: dict[str, list[Node]] = {}  # the writes' nodes (only where values are followed)
        self._namespaces = {text_of(n.child_by_field_name("name")) for n in nodes["namespace_definition"]}
        self._classes = nodes["class_specifier"] + nodes["struct_specifier"]
        self._pg: dict[str, bool] | None = None  # this file's declared returns (lazily)
        self.returns_own: set[str] = set()  # functions all of whose definitions here return self-built
        self.own_iters: set[str] = set()  # names only ever set to an iterator into an own container
        self.own_containers: dict[str, str] = {}  # container -> "pair" / "one" / "" (its elements' shape)
        self._elements: dict[int, bool] = {}  # range-for ranges: node id -> binds a map's value (else an element)
        self.builds: list[Build] = []
        self.nccl2_builds: list[int] = []  # where the file builds nccl2's class (byte offsets)
        self._other_built: set[int] = set()  # builds of any other class (node ids)
        self._backend_built = False  # one of them is torch's other backends
        self._copies: dict[str, list[str]] = {}  # container -> the containers it is copied from
        self._handed: set[str] = set()  # names handed whole to a call (it may fill them)
        self._keys: dict[int, str] = {}  # identifier node id -> the key of the variable it names
        self._invoking: set[int] = set()  # the lambdas being judged (a lambda that calls itself)
        for n in nodes["call_expression"]:
            found = _template_call(n)
            if found is not None and found[0] in BUILDERS:
                self._build(n, found[0], found[1])
        for n in nodes["new_expression"]:
            ty = n.child_by_field_name("type")
            if ty is not None:
                self._build(n, "new", ty)
        self._built_at = {b.node.id for b in self.builds} | self._other_built
        self.self_built: set[str] = set()
        if self.builds or self._backend_built or self._calls_own(nodes["call_expression"]):
            # the writes are looked for only in a file that builds the class or calls a
            # function of the project that returns one
            self._nodes = find(root, cuda, _WRITES)
            self._solve(nodes["call_expression"])

    def _calls_own(self, calls: list[Node]) -> bool:
        self.asked("cpp_returns", "own")  # which names the project's own-returning functions have
        names = {k.rpartition("::")[2] for k, v in self.project.items() if v and k.startswith("own:")}
        return bool(names) and any(callee_name(c) in names for c in calls)

    def _build(self, n: Node, builder: str, ty: Node) -> None:
        core = self.resolver.core_type(ty)
        kind = self.resolver.kind_of_name(text_of(core), core.start_byte) if core is not None else None
        if core is not None and kind in (Kind.LEGACY, Kind.LEGACY_SUB):
            self.builds.append(Build(n, builder, core, kind))
            return
        if kind is Kind.NCCL2:
            self.nccl2_builds.append(n.start_byte)
        if core is not None:  # any other class the code builds (a base Backend, a mock, a store)
            self._other_built.add(n.id)
            self._backend_built |= text_of(core).rpartition("::")[2] in _OTHER_BACKENDS

    def _writes(self) -> dict[str, list[Node | None]]:
        """name -> the values written to it (None: a value from elsewhere)."""
        out: dict[str, list[Node | None]] = {}
        for d in self._nodes.get("init_declarator", []):
            name = self._declared(d.child_by_field_name("declarator"))
            value = d.child_by_field_name("value")
            source = self._range_source(value) if value is not None else ""
            if name and source:  # std::vector<std::pair<K, V>> c(own.begin(), own.end())
                self._copies.setdefault(name, []).append(source)
                continue
            if value is not None and value.type in ("argument_list", "initializer_list"):
                value = value.named_children[0] if len(value.named_children) == 1 else None
            if name:
                out.setdefault(name, []).append(value)
        for d in self._nodes.get("field_declaration", []):
            value = d.child_by_field_name("default_value")
            for field_decl in d.children_by_field_name("declarator") if value is not None else ():
                out.setdefault(declarator_name(field_decl), []).append(value)
        for f in self._nodes.get("field_initializer", []):
            name = next((text_of(c) for c in f.named_children if c.type == "field_identifier"), "")
            args = next((c for c in f.named_children if c.type in ("argument_list", "initializer_list")), None)
            if name:
                only = args.named_children[0] if args is not None and len(args.named_children) == 1 else None
                out.setdefault(name, []).append(only)
        for a in self._nodes.get("assignment_expression", []):
            left = a.child_by_field_name("left")
            name = self._ref(left)
            if name:
                out.setdefault(name, []).append(a.child_by_field_name("right"))
        for p in self._nodes.get("parameter_declaration", []) + self._nodes.get("optional_parameter_declaration", []):
            name = self._declared(p.child_by_field_name("declarator"))
            if name:
                out.setdefault(name, []).append(None)
        for loop in self._nodes.get("for_range_loop", []):
            decl: Node | None = loop.child_by_field_name("declarator")
            right = loop.child_by_field_name("right")
            while decl is not None and decl.type in ("reference_declarator", "pointer_declarator") \
                    and decl.named_children:
                decl = decl.named_children[0]
            if decl is None or right is None:
                continue
            names = [c for c in decl.named_children if c.type == "identifier"] \
                if decl.type == "structured_binding_declarator" else [decl]
            if len(names) == 2:  # for (auto& [key, value] : map): the value is an element
                self._elements[right.id] = True
                out.setdefault(self._declared(names[0]), []).append(None)
                out.setdefault(self._declared(names[1]), []).append(right)
            elif len(names) == 1 and names[0].type == "identifier":
                self._elements[right.id] = False
                out.setdefault(self._declared(names[0]), []).append(right)
            else:
                for n in names:
                    out.setdefault(self._declared(n), []).append(None)
        return out

    # --- which variable a name means ---
    def _declared(self, d: Node | None) -> str:
        """The key of the variable declarator ``d`` declares: ``name@offset`` for a local or a
        parameter (of a function or a lambda, a structured binding), else its name (a member or
        a global, matched by spelling across the project)."""
        ident = _declarator_ident(d)
        if ident is None:
            return ""
        return f"{text_of(ident)}@{ident.start_byte}" if _in_body(ident) else text_of(ident)

    def _ref(self, n: Node | None) -> str:
        """The key of the variable ``n`` names: an identifier by the innermost declaration in
        scope where it is written (:meth:`_declared`'s key), a member (``this->x``, ``o.x``)
        by its name; "" for anything else."""
        if n is None:
            return ""
        if n.type == "field_expression":
            return text_of(n.child_by_field_name("field"))
        if n.type != "identifier":
            return ""
        key = self._keys.get(n.id)
        if key is None:
            ident = _declaration_of(n)
            key = f"{text_of(n)}@{ident.start_byte}" if ident is not None else text_of(n)
            self._keys[n.id] = key
        return key

    def _range_source(self, value: Node) -> str:
        return _range_source(value, self._ref)

    def _lambda_built(self, lam: Node) -> bool:
        """Does every return of lambda ``lam`` (called where it is written) give a self-built
        object?"""
        body = lam.child_by_field_name("body")
        returns = _own_returns(body) if body is not None else []
        self._invoking.add(lam.id)
        try:
            return bool(returns) and all(bool(r.named_children) and self.built(r.named_children[0]) for r in returns)
        finally:
            self._invoking.discard(lam.id)

    def _puts(self, calls: list[Node]) -> dict[str, list[tuple[Node | None, str]]]:
        """container name -> the elements put in it, with their shape ("pair": a map's value,
        "one": a sequence's element, "": either); None: a use that may put anything."""
        out: dict[str, list[tuple[Node | None, str]]] = {}
        other: dict[str, int] = {}
        for c in calls:
            fn = c.child_by_field_name("function")
            args = c.child_by_field_name("arguments")
            if fn is None or args is None:
                continue
            if fn.type == "field_expression":
                name, member = self._ref(fn.child_by_field_name("argument")), text_of(fn.child_by_field_name("field"))
                if name and member in _PUT_PAIR:
                    value = args.named_children[-1] if len(args.named_children) == 2 else None
                    out.setdefault(name, []).append((value, "pair"))
                elif name and member in _PUT_ONE:
                    value = args.named_children[0] if len(args.named_children) == 1 else None
                    out.setdefault(name, []).append((value, "one"))
                elif name and member not in _READS:
                    other[name] = 1
            for a in args.named_children:  # a container handed to a call may be filled there
                name = self._ref(strip(a))
                if name:
                    other[name] = 1
        for a in self._nodes.get("assignment_expression", []):
            left = a.child_by_field_name("left")
            if left is not None and left.type == "subscript_expression":
                name = self._ref(left.child_by_field_name("argument"))
                if name:
                    out.setdefault(name, []).append((a.child_by_field_name("right"), ""))
        for a in self._nodes.get("assignment_expression", []):
            left = a.child_by_field_name("left")
            if left is not None and (left.type == "pointer_expression" or (
                    left.type == "field_expression" and text_of(left.child_by_field_name("field")) == "second")):
                other.update(dict.fromkeys(out, 1))  # a write through an iterator: into any container
        for name in other:
            if name in out:
                out[name].append((None, ""))
        self._handed = set(other)
        return out

    def _returns(self) -> dict[str, list[Node | None]]:
        """function key -> the values its definitions in this file return (None: ``return;``)."""
        out: dict[str, list[Node | None]] = {}
        for d in self._function_nodes:
            key = _key(d.child_by_field_name("declarator"), self._namespaces)
            body = d.child_by_field_name("body")
            if not key or body is None:
                continue
            values = out.setdefault(key, [])
            for r in _own_returns(body):
                values.append(r.named_children[0] if r.named_children else None)
            if not values:
                values.append(None)  # a definition that returns nothing: not a factory
        return out

    def _solve(self, calls: list[Node]) -> None:
        writes = self._writes()
        puts = self._puts(calls)
        returns = self._returns()
        banned: set[str] = set()
        while True:
            self._least(writes, puts, {k: v for k, v in returns.items() if k not in banned})
            # A method is own only if every class's method of that name is (an override may
            # be called through the base class): solve again without the doubted ones.
            doubted = {k.rpartition("::")[2] for k in returns if k not in self.returns_own}
            more = {k for k in self.returns_own if "::" in k and k.rpartition("::")[2] in doubted}
            if not more:
                return
            banned |= more
            self.self_built, self.own_iters, self.own_containers, self.returns_own = set(), set(), {}, set()

    def _least(self, writes: dict[str, list[Node | None]], puts: dict[str, list[tuple[Node | None, str]]],
               returns: dict[str, list[Node | None]]) -> None:
        changed = True
        while changed:  # the least sets closed under "every write is built"
            changed = False
            for name, values in writes.items():
                if name not in self.self_built and all(v is not None and self.built(v) for v in values):
                    self.self_built.add(name)
                    changed = True
                if name not in self.own_iters and all(v is not None and self._iterator(v) for v in values):
                    self.own_iters.add(name)
                    changed = True
            for name, elements in puts.items():
                if name not in self.own_containers and name not in writes \
                        and all(v is not None and self.built(v) for v, _ in elements) and self._filled_here(name):
                    shapes = {shape for _, shape in elements}
                    self.own_containers[name] = shapes.pop() if len(shapes) == 1 else ""
                    changed = True
            for name, sources in self._copies.items():  # a copy of own containers (then sorted...)
                extra = puts.get(name, [])
                if name not in self.own_containers and name not in writes and name not in self._handed \
                        and all(c in self.own_containers for c in sources) \
                        and all(v is not None and self.built(v) for v, _ in extra):
                    shapes = {self.own_containers[c] for c in sources} | {shape for _, shape in extra}
                    self.own_containers[name] = shapes.pop() if len(shapes) == 1 else ""
                    changed = True
            for key, values in returns.items():
                if key not in self.returns_own and all(v is not None and self.built(v) for v in values):
                    self.returns_own.add(key)
                    changed = True

    def _filled_here(self, name: str) -> bool:
        """Does no other file of the project put anything but self-built objects in a
        container of that name (a member may be filled by a method defined elsewhere)?"""
        self.asked("cpp_returns", f"fills:{name}")
        return self.project.get(f"fills:{name}", True)

    def _iterator(self, n: Node) -> bool:
        """Is ``n`` an iterator into an own container (``c.find(k)``, ``c.emplace(...).first``)?"""
        n = strip(n)
        if n.type == "identifier":
            return self._ref(n) in self.own_iters
        if n.type == "call_expression":
            fn = n.child_by_field_name("function")
            return fn is not None and fn.type == "field_expression" \
                and text_of(fn.child_by_field_name("field")) in _ITERATORS \
                and self._ref(fn.child_by_field_name("argument")) in self.own_containers
        if n.type == "field_expression" and text_of(n.child_by_field_name("field")) == "first":
            call = n.child_by_field_name("argument")
            fn = call.child_by_field_name("function") if call is not None and call.type == "call_expression" else None
            return fn is not None and fn.type == "field_expression" \
                and text_of(fn.child_by_field_name("field")) in _PUT_PAIR | {"insert"} \
                and self._ref(fn.child_by_field_name("argument")) in self.own_containers
        return False

    # --- what functions return ---
    def fact(self, kind: str, call: Node) -> bool:
        """Does the function ``call`` calls return, by every declaration ("pg": a
        ``c10d::ProcessGroup``) or definition ("own": a self-built object)?  The project's
        answer where the pre-pass has one, else this file's."""
        for key in self._callee_keys(call):
            self.asked("cpp_returns", f"{kind}:{key}")
            if f"{kind}:{key}" in self.project:
                return self.project[f"{kind}:{key}"]
            local = (key in self.returns_own) if kind == "own" else self.declared_pg().get(key)
            if local is not None and (local or kind == "pg"):
                return local
        return False

    def declared_pg(self) -> dict[str, bool]:
        """function key -> is every declaration and definition of it in this file declared to
        return a ``c10d::ProcessGroup`` (raw, intrusive_ptr, shared_ptr; a pointer or reference)?"""
        if self._pg is None:
            self._pg = {}
            for d in find(self.root, self.cuda, ("function_declarator",)).get("function_declarator", []):
                parent = d.parent
                while parent is not None and parent.type in ("pointer_declarator", "reference_declarator"):
                    parent = parent.parent
                if parent is None or parent.type not in ("function_definition", "declaration", "field_declaration"):
                    continue
                key = _key(d, self._namespaces)
                ty = parent.child_by_field_name("type")
                if key and ty is not None:
                    # spelled in full, or a name that means it where it is written (inside
                    # ``namespace c10d``, after ``using namespace c10d;``, an alias)
                    pg = bool(_PG_RETURN.match(re.sub(r"\s+", "", text_of(ty)))) \
                        or self.resolver.kind_of_type(ty) is Kind.GROUP
                    self._pg[key] = self._pg.get(key, True) and pg
        return self._pg

    def facts(self) -> dict[str, bool]:
        """This file's answers for the pre-pass ("pg:KEY", "own:KEY"; "fills:NAME": every
        element this file puts in containers named NAME is self-built)."""
        out = {f"pg:{k}": v for k, v in self.declared_pg().items()}
        out.update({f"own:{k}": k in self.returns_own for k in self._returns()})
        if not self._nodes:
            self._nodes = find(self.root, self.cuda, _WRITES)
        out.update({f"fills:{n}": n in self.own_containers for n in self._puts(self._calls) if "@" not in n})
        out.update(dict.fromkeys(self._member_types(), True))
        return out

    def _member_types(self) -> list[str]:
        """"type:MEMBER:CLASS" for each member the file's classes declare (its class, through
        pointers and smart pointers): a method defined in another file reads it by name."""
        out = []
        for c in self._classes:
            for d in walk(c):
                ty = d.child_by_field_name("type") if d.type == "field_declaration" else None
                core = self.resolver.core_type(ty) if ty is not None else None
                cls = text_of(core).rpartition("::")[2] if core is not None else ""
                out += [f"type:{name}:{cls}" for x in d.children_by_field_name("declarator")
                        if cls and (name := declarator_name(x))] if ty is not None else []
        return out

    def relied_on(self, definition: Node, casts_here: bool, calls: list[Node]) -> bool:
        """Does code that casts to the legacy class (in this file: ``casts_here``, or in
        another of the project) call ``definition``, a function that returns self-built
        objects?  Building nccl2's class there instead would make those casts null."""
        key = _key(definition.child_by_field_name("declarator"), self._namespaces)
        if key not in self.returns_own:
            return False
        name = key.rpartition("::")[2]
        self.asked("cpp_returns", f"called:{name}")
        return bool(self.project.get(f"called:{name}")) or (casts_here and any(callee_name(c) == name for c in calls))

    def _callee_keys(self, call: Node) -> list[str]:
        """The keys a call may mean, the most specific first."""
        fn = call.child_by_field_name("function")
        if fn is None:
            return []
        if fn.type == "field_expression":
            cls = self._class_of(fn.child_by_field_name("argument"), call)
            name = text_of(fn.child_by_field_name("field"))
            return [f"{cls}::{name}"] if cls and name else []
        if fn.type == "qualified_identifier":
            scope, name = _last_scope(fn)
            if not name:
                return []
            return [name] if scope in self._namespaces or not scope else [f"{scope}::{name}", name]
        if fn.type == "identifier":
            cls = _class_of_function(_function_of(call), self._namespaces)
            return ([f"{cls}::{text_of(fn)}"] if cls else []) + [text_of(fn)]
        return []

    def _class_of(self, receiver: Node | None, at: Node) -> str:
        """The class of a method call's receiver (``this``, or a name by its declared type)."""
        if receiver is None:
            return ""
        receiver = strip(receiver)
        if receiver.type == "this":
            return _class_of_function(_function_of(at), self._namespaces)
        name = _spelled(receiver)
        ty = declared_type(self._classes, at, name) if name else None
        core = self.resolver.core_type(ty) if ty is not None else None
        if core is None and name:  # a member declared in another file (its class's header)
            self.asked("cpp_returns", f"type:{name}")
            classes = {k.rpartition(":")[2] for k, yes in self.project.items() if yes and k.startswith(f"type:{name}:")}
            return classes.pop() if len(classes) == 1 else ""
        return text_of(core).rpartition("::")[2] if core is not None else ""

    def built(self, n: Node) -> bool:
        """Is ``n`` provably an object the file built itself (the legacy class, its subclass, or
        another of torch's backends, which nccl2 does not change)?"""
        n = strip(n)
        if n.id in self._built_at:
            return True
        if n.id in self._elements:  # a range-for over an own container of that shape
            shape = self.own_containers.get(self._ref(n))
            return shape is not None and shape in (("pair", "") if self._elements[n.id] else ("one", ""))
        if n.type == "identifier":
            return self._ref(n) in self.self_built
        if n.type == "null":  # nullptr: no object, so none of torch's
            return True
        if n.type == "field_expression":
            field = text_of(n.child_by_field_name("field"))
            if field == "second":
                arg = n.child_by_field_name("argument")
                return arg is not None and self._iterator(arg)
            return field in self.self_built
        if n.type == "subscript_expression":
            return self._ref(n.child_by_field_name("argument")) in self.own_containers
        if n.type == "call_expression":
            fn = n.child_by_field_name("function")
            if fn is not None and fn.type == "field_expression" and text_of(fn.child_by_field_name("field")) == "get":
                arg = fn.child_by_field_name("argument")
                return arg is not None and self.built(arg)
            if fn is not None and fn.type == "field_expression" and text_of(fn.child_by_field_name("field")) == "at":
                return self._ref(fn.child_by_field_name("argument")) in self.own_containers
            if fn is not None and fn.type in ("identifier", "qualified_identifier", "field_expression") \
                    and self.fact("own", n):
                return True
            if fn is not None and fn.type == "qualified_identifier" and _last_scope(fn)[0] in _OTHER_BACKENDS:
                return True  # c10d::ProcessGroupUCC::createProcessGroupUCC(...): another backend's factory
            lam = strip(fn) if fn is not None else None
            if lam is not None and lam.type == "lambda_expression" and lam.id not in self._invoking:
                return self._lambda_built(lam)
            cast = _template_call(n)
            args = n.child_by_field_name("arguments")
            if cast is not None and cast[0] in _CASTS and args is not None and len(args.named_children) == 1:
                return self.built(args.named_children[0])
        if n.type == "cast_expression":
            value = n.child_by_field_name("value")
            return value is not None and self.built(value)
        return False


def _range_source(value: Node, ref: Callable[[Node | None], str]) -> str:
    """``c`` when ``value`` (an initialiser) is ``(c.begin(), c.end())`` or ``{...}`` of them
    (``ref``: the key of the variable a node names)."""
    if value.type not in ("argument_list", "initializer_list") or len(value.named_children) != 2:
        return ""
    ends = []
    for call in value.named_children:
        fn = call.child_by_field_name("function") if call.type == "call_expression" else None
        if fn is None or fn.type != "field_expression":
            return ""
        ends.append((ref(fn.child_by_field_name("argument")), text_of(fn.child_by_field_name("field"))))
    (a, first), (b, last) = ends
    return a if a and a == b and first in _BEGIN and last in _END else ""


def strip(n: Node) -> Node:
    """``n`` without parentheses, ``*``/``&`` and ``std::move(...)``."""
    while True:
        if n.type == "parenthesized_expression" and len(n.named_children) == 1:
            n = n.named_children[0]
        elif n.type == "pointer_expression" and n.child_by_field_name("argument") is not None:
            n = n.child_by_field_name("argument")  # type: ignore[assignment]
        elif n.type == "call_expression" and text_of(n.child_by_field_name("function")) in ("std::move", "move"):
            args = n.child_by_field_name("arguments")
            if args is None or len(args.named_children) != 1:
                return n
            n = args.named_children[0]
        else:
            return n


def _spelled(n: Node | None) -> str:
    """The name ``n`` spells: ``x``, or the member of ``this->x`` / ``obj.x``."""
    if n is None:
        return ""
    if n.type == "field_expression":
        return text_of(n.child_by_field_name("field"))
    return text_of(n) if n.type == "identifier" else ""


def callee_name(call: Node) -> str:
    """The unqualified name a call calls (a method's, a function's)."""
    fn = call.child_by_field_name("function")
    if fn is not None and fn.type == "field_expression":
        return text_of(fn.child_by_field_name("field"))
    if fn is not None and fn.type == "qualified_identifier":
        return _last_scope(fn)[1]
    return text_of(fn) if fn is not None and fn.type == "identifier" else ""


def _last_scope(n: Node) -> tuple[str, str]:
    """(innermost scope, name) of ``a::B::f``: ("B", "f"); ("", "") when not a plain name."""
    scope: Node | None = None
    while n.type == "qualified_identifier":
        scope, inner = n.child_by_field_name("scope"), n.child_by_field_name("name")
        if inner is None:
            return "", ""
        n = inner
    if n.type not in ("identifier", "field_identifier"):
        return "", ""
    return text_of(scope).split("<")[0], text_of(n)


def _key(d: Node | None, namespaces: set[str]) -> str:
    """``f`` or ``Class::f`` for a function declarator (of a definition or a declaration)."""
    while d is not None and d.type in ("pointer_declarator", "reference_declarator"):
        d = d.child_by_field_name("declarator") or (d.named_children[-1] if d.named_children else None)
    name = d.child_by_field_name("declarator") if d is not None and d.type == "function_declarator" else None
    if name is None:
        return ""
    if name.type == "qualified_identifier":
        scope, last = _last_scope(name)
        return "" if not last else last if scope in namespaces or not scope else f"{scope}::{last}"
    if name.type not in ("identifier", "field_identifier"):
        return ""
    p = name.parent
    while p is not None and p.type not in ("compound_statement", "field_declaration_list"):
        p = p.parent
    cls = p.parent.child_by_field_name("name") if p is not None and p.type == "field_declaration_list" \
        and p.parent is not None else None
    return f"{text_of(cls)}::{text_of(name)}" if cls is not None else text_of(name)


def _function_of(n: Node) -> Node | None:
    p = n.parent
    while p is not None and p.type != "function_definition":
        p = p.parent
    return p


def _class_of_function(fn: Node | None, namespaces: set[str]) -> str:
    """The class a function definition is a method of ("" for a free function)."""
    key = _key(fn.child_by_field_name("declarator"), namespaces) if fn is not None else ""
    return key.rpartition("::")[0]


def _own_returns(body: Node) -> list[Node]:
    """The return statements of a function body (not those of the lambdas in it)."""
    out: list[Node] = []
    stack = [body]
    while stack:
        n = stack.pop()
        if n.type == "return_statement":
            out.append(n)
        elif n.type not in ("lambda_expression", "function_definition", "class_specifier", "struct_specifier"):
            stack.extend(n.children)
    return out


_SCOPES = frozenset({"compound_statement", "for_range_loop", "for_statement", "condition_clause", "catch_clause",
                     "function_definition", "lambda_expression"})


def _declarator_ident(d: Node | None) -> Node | None:
    """The identifier a declarator declares (through pointers, references, initialisers)."""
    while d is not None and d.type not in ("identifier", "field_identifier"):
        d = d.child_by_field_name("declarator") or (d.named_children[0] if d.named_children else None)
    return d


def _in_body(ident: Node) -> bool:
    """Is a declared identifier local to a function or lambda (its body or parameters)?"""
    p = ident.parent
    while p is not None:
        if p.type in ("function_definition", "lambda_expression"):
            return True
        if p.type in ("field_declaration_list", "translation_unit", "declaration_list", "field_declaration"):
            return False
        p = p.parent
    return False


def _declared_here(scope: Node, name: str, before: int) -> Node | None:
    """The identifier of the last declaration of ``name`` that ``scope`` itself holds before
    byte ``before`` (its statements, through ``#if`` arms; a loop's or condition's variable;
    a function's or lambda's parameters)."""
    found: Node | None = None
    if scope.type in ("function_definition", "lambda_expression", "catch_clause"):
        d = scope.child_by_field_name("declarator") if scope.type != "catch_clause" else None
        while d is not None and d.type not in ("function_declarator", "abstract_function_declarator"):
            # through ``T* f(...)`` and ``T& f(...)`` (a reference declarator has no field)
            d = d.child_by_field_name("declarator") or (d.named_children[0] if d.named_children else None)
        params = d.child_by_field_name("parameters") if d is not None else scope.child_by_field_name("parameters")
        decls = [p for p in params.named_children if p.type.endswith("parameter_declaration")] if params else []
    elif scope.type == "for_range_loop":
        d = scope.child_by_field_name("declarator")
        while d is not None and d.type in ("reference_declarator", "pointer_declarator") and d.named_children:
            d = d.named_children[0]
        names = [c for c in d.named_children if c.type == "identifier"] \
            if d is not None and d.type == "structured_binding_declarator" else [d] if d is not None else []
        return next((n for n in names if n.type == "identifier" and text_of(n) == name), None)
    else:
        decls, stack = [], list(scope.named_children)
        while stack:
            c = stack.pop(0)
            if c.start_byte >= before:
                break
            if c.type == "declaration":
                decls.append(c)
            elif c.type.startswith("preproc_"):
                stack[:0] = c.named_children
    for decl in decls:
        for d in decl.children_by_field_name("declarator"):
            ident = _declarator_ident(d)
            if ident is not None and text_of(ident) == name and ident.start_byte < before:
                found = ident
    return found


def _declaration_of(ident: Node) -> Node | None:
    """The identifier of the local or parameter declaration an identifier use names (the
    innermost in scope before it), or None (a member, a global, or not declared here)."""
    name, p = text_of(ident), ident.parent
    while p is not None:
        if p.type in _SCOPES:
            found = _declared_here(p, name, ident.start_byte)
            if found is not None:
                return found
            if p.type == "function_definition":
                return None
        p = p.parent
    return None


def declarator_name(d: Node | None) -> str:
    """The name a declarator declares (through pointers, references, initialisers)."""
    while d is not None and d.type not in ("identifier", "field_identifier"):
        d = d.child_by_field_name("declarator") or (d.named_children[0] if d.named_children else None)
    return text_of(d)


def declared_type(classes: list[Node], at: Node, name: str) -> Node | None:
    """The type ``name`` is declared with where ``at`` uses it: a parameter or local of the
    function around, else a member declared in one of ``classes``."""
    fn = _function_of(at)
    for d in walk(fn) if fn is not None else ():
        if d.type in ("parameter_declaration", "optional_parameter_declaration", "declaration") \
                and d.start_byte < at.start_byte \
                and any(declarator_name(x) == name for x in d.children_by_field_name("declarator")):
            return d.child_by_field_name("type")
    for c in classes:
        for d in walk(c):
            if d.type == "field_declaration" and any(
                    declarator_name(x) == name for x in d.children_by_field_name("declarator")):
                return d.child_by_field_name("type")
    return None


def names_process_group(type_text: str) -> bool:
    """Does a declared type name ``c10d::ProcessGroup`` (raw, a smart pointer of it, a reference)?"""
    return bool(_PROCESS_GROUP.search(type_text))
