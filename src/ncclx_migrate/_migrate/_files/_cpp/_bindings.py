"""Functions exposed to Python and the functions they name, in one file and across a project.

A binding is a pybind11 ``m.def("name", ...)`` / ``py::class_<...>(...).def(...)`` /
``.def_static`` or a ``TORCH_LIBRARY`` ``m.impl("op", ...)``: its target is a lambda (whose
parameters are read in place) or a function named by ``&f``, ``f``, ``ns::f``, ``&Cls::f``,
``TORCH_FN(f)`` or ``py::overload_cast<...>(&f)``.  A function is a definition (with a
body) or a declaration (a prototype in a header, a method declared in its class): both
carry the parameter types that pybind11 checks, so both count.

Real projects declare a function in a header, define it in one ``.cpp`` and bind it in
another, whose text may never name ``ProcessGroupNCCL``.  The runner's pre-pass therefore
reads every file that binds a function some file declares with a legacy parameter
(:class:`Project`), and each file's scan gets those names, with where they are bound
(``Options.cpp_bound``).  Names are matched unqualified, as the compiler's overload set
would gather them.

The same pre-pass reads every file that names ``ProcessGroup`` or ``Backend`` for what its
functions return (:meth:`._values.Values.facts`): a function is declared to return a
``c10d::ProcessGroup``, or returns an object the code built as the legacy class, only where
every file that declares or defines it agrees (``Options.cpp_returns``); and which functions
code that casts to the legacy class calls, so that no fix builds nccl2's class in a factory
whose objects such code relies on.
"""

from __future__ import annotations

import codecs
import hashlib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from tree_sitter import Node

from ..._model import Options
from ._index import Scan
from ._names import Kind, text_of
from ._parse import find, is_cuda, parse_bytes
from ._values import callee_name

__all__ = ["BINDS", "Binding", "Project", "binding_calls", "function_declarators", "may_bind"]

# what a file that binds spells (bytes.find each: a regex alternation costs ~10x more)
BINDS = (b"pybind11", b"py::", b"PYBIND11_MODULE", b"TORCH_LIBRARY")
_PY_BIND = ("def", "def_static", "impl")
_CPP_EXT = (".cpp", ".cc", ".cxx", ".cu", ".cuh", ".hip", ".h", ".hpp", ".hh")


def may_bind(data: bytes) -> bool:
    return any(word in data for word in BINDS)


@dataclass
class Binding:
    exposed: str  # the Python name
    call: Node  # the m.def(...) call
    target: str  # the bound function's unqualified name ("" for a lambda)
    params: Node | None  # a lambda's parameter list


def binding_calls(calls: list[Node]) -> Iterator[Binding]:
    """The bindings among ``calls`` (call_expression nodes)."""
    for n in calls:
        fn = n.child_by_field_name("function")
        if fn is None or fn.type != "field_expression" or text_of(fn.child_by_field_name("field")) not in _PY_BIND:
            continue
        args = n.child_by_field_name("arguments")
        if args is None or len(args.named_children) < 2 or args.named_children[0].type != "string_literal":
            continue
        exposed = text_of(args.named_children[0]).strip('"').split("(")[0]
        target = args.named_children[1]
        lam = _lambda(target)
        if lam is not None:
            decl = lam.child_by_field_name("declarator")
            yield Binding(exposed, n, "", decl.child_by_field_name("parameters") if decl is not None else None)
            continue
        name = _target_name(target)
        if name:
            yield Binding(exposed, n, name, None)


def _lambda(n: Node) -> Node | None:
    """The lambda a binding's second argument is (in parentheses, or wrapped in one call)."""
    for _ in range(4):
        if n.type == "lambda_expression":
            return n
        if n.type == "parenthesized_expression" and n.named_children:
            n = n.named_children[0]
        elif n.type == "call_expression":
            args = n.child_by_field_name("arguments")
            if args is None or len(args.named_children) != 1:
                return None
            n = args.named_children[0]
        else:
            return None
    return None


def _target_name(n: Node) -> str:
    """The function a binding's second argument names (``&ns::f``, ``TORCH_FN(f)``, ...)."""
    for _ in range(8):
        if n.type in ("pointer_expression", "parenthesized_expression"):
            inner = n.child_by_field_name("argument") if n.type == "pointer_expression" else \
                (n.named_children[0] if n.named_children else None)
        elif n.type == "call_expression":  # TORCH_FN(f), py::overload_cast<int>(&f)
            args = n.child_by_field_name("arguments")
            inner = args.named_children[0] if args is not None and len(args.named_children) == 1 else None
        elif n.type == "qualified_identifier":
            inner = n.child_by_field_name("name")
        elif n.type == "template_function":
            inner = n.child_by_field_name("name")
        elif n.type in ("identifier", "field_identifier", "destructor_name"):
            return text_of(n)
        else:
            return ""
        if inner is None:
            return ""
        n = inner
    return ""


def function_declarators(root: Node, nodes: dict[str, list[Node]]) -> dict[str, list[Node]]:
    """Function name -> the ``function_declarator`` of each definition and declaration."""
    out: dict[str, list[Node]] = {}
    for d in nodes.get("function_declarator", []):
        parent = d.parent
        while parent is not None and parent.type in ("pointer_declarator", "reference_declarator"):
            parent = parent.parent
        if parent is None or parent.type not in ("function_definition", "declaration", "field_declaration"):
            continue  # a function pointer, a parameter, a call misread as a declaration
        name = _target_name(d.child_by_field_name("declarator") or d)
        if name:
            out.setdefault(name, []).append(d)
    return out


@dataclass
class _Binds:
    """A file that binds, in the order read: the bindings' (target, "path:line"), or its
    text while they are not read yet (a file that may name no function worth reading)."""

    path: str
    data: bytes | None
    sites: list[tuple[str, str]]


@dataclass
class Project:
    """The runner's pre-pass: ``add`` each file read, then ``bound()`` and ``returns()``.

    Only what a scan can use is parsed.  A binding matters only for a function some file
    declares with a legacy parameter (NCX305 reports nothing else), and such a file names
    ProcessGroupNCCL: those files are parsed as they come (their functions are the
    ``legacy`` ones), and a file that binds is parsed only if its text names one of them
    (a bound function is named in the binding's text).  What functions return (``returns``)
    is asked only where some file can answer yes (it names ProcessGroupNCCL, or both c10d and
    ProcessGroup: see :meth:`returns`); until one does, the others wait unparsed."""

    # the trees a file's scan reads (its own, and the views of its #if arms where a region is
    # unreadable): the package's ``read_trees``, handed down (the views are read above this layer)
    trees: Callable[[Scan], list[Scan]]
    answers: dict[str, dict[str, bool]] = field(default_factory=dict)  # path -> its answers ("pg:KEY", "own:KEY", "fills:NAME", "called:NAME")
    kept: dict[str, bytes] = field(default_factory=dict)  # path -> the text of a file that answers yes to an "own"/"fills" fact
    legacy: set[str] = field(default_factory=set)  # functions some file declares with a legacy parameter
    binds: list[_Binds] = field(default_factory=list)
    waiting: list[tuple[str, bytes]] = field(default_factory=list)  # files to judge once some file can answer yes
    answering: bool = False  # some file can answer yes
    # the cache's facts of each file (``_cache``): what its content answers, binds and declares,
    # kept so that an unchanged file is not parsed again (None: no cache)
    known: Callable[[str], dict[str, object] | None] | None = None
    remember: Callable[[str, str, object], None] | None = None

    @classmethod
    def new(cls, trees: Callable[[Scan], list[Scan]]) -> Project:
        return cls(trees)

    def add(self, path: str, data: bytes, scanned: bool = True) -> None:
        """Read one file of the run; ``scanned``: the run scans it (only a scanned file's
        findings can need a binding, so only its legacy functions are looked for)."""
        # what a function returns matters where it can be a group or a backend (an override
        # of an own factory returns a c10d::Backend too)
        # (or declare a member a method elsewhere reaches them through: a header naming c10d::)
        binds, returns = may_bind(data), b"ProcessGroup" in data or b"Backend" in data or b"c10d::" in data
        if not path.lower().endswith(_CPP_EXT) or not (binds or returns) or b"\0" in data[:8192]:
            return
        entry = _Binds(path, data, []) if binds else None
        if entry is not None:
            self.binds.append(entry)
        if not returns:
            return
        if not self.answering and (b"ProcessGroupNCCL" in data or (b"c10d" in data and b"ProcessGroup" in data)):
            self.answering = True
            for waited, text in self.waiting:
                self._judge(waited, text, None, False)
            self.waiting.clear()
        if self.answering:
            self._judge(path, data, entry, scanned)
        else:
            self.waiting.append((path, data))

    def _judge(self, path: str, data: bytes, entry: _Binds | None, scanned: bool) -> None:
        """Read one file's answers (and, from its tree, its bindings and legacy functions)."""
        memo = self._memo(path)
        declares = scanned and b"ProcessGroupNCCL" in data  # (a waiting file names no ProcessGroupNCCL)
        answers, legacy, sites = memo.get("answers"), memo.get("legacy"), memo.get("sites")
        if (isinstance(answers, dict) and all(isinstance(v, bool) for v in answers.values())
                and (not declares or (isinstance(legacy, list) and all(isinstance(n, str) for n in legacy)))
                and (entry is None or _are_sites(sites))):
            self.answers[path] = answers  # what this content says, kept by the cache: not parsed again
        else:
            text = data.decode("utf-8", "replace")
            scan = Scan(path, text, Options())
            memo["answers"] = self.answers[path] = _answers(scan)
            if declares:
                memo["legacy"] = legacy = sorted(self._declares(scan, data, text))
            if entry is not None:
                memo["sites"] = sites = _sites(path, scan.root)
            if self.remember is not None:
                self.remember(path, "cpp", memo)
        if any(yes for k, yes in self.answers[path].items() if k.startswith(("own:", "fills:"))):
            self.kept[path] = data
        if declares:
            self.legacy.update(legacy)  # type: ignore[arg-type]
        if entry is not None:
            entry.sites, entry.data = [(str(n), str(at)) for n, at in sites], None  # type: ignore[attr-defined]

    def _memo(self, path: str) -> dict[str, object]:
        """The C++ facts the cache keeps of ``path``'s content (a copy; empty: none)."""
        got = self.known(path) if self.known is not None else None
        cpp = got.get("cpp") if got is not None else None
        return dict(cpp) if isinstance(cpp, dict) else {}

    def _declares(self, scan: Scan, data: bytes, text: str) -> set[str]:
        """The functions the file declares with a legacy parameter, in every tree its own
        scan reads (its text decoded as the scan decodes it; the views of its ``#if`` arms
        where a region is unreadable), as NCX305 looks for them (_rules._legacy_params)."""
        try:
            as_read = data.decode("utf-8-sig" if data.startswith(codecs.BOM_UTF8) else "utf-8")
        except UnicodeDecodeError:
            return set()  # the scan reports the file unreadable, with no finding
        if as_read != text:
            scan = Scan(scan.path, as_read, Options())
        out: set[str] = set()
        for s in self.trees(scan):
            functions = function_declarators(s.root, find(s.root, s.cuda, ("function_declarator",)))
            for name, decls in functions.items():
                if name not in out and any(_takes_legacy(s, d.child_by_field_name("parameters")) for d in decls):
                    out.add(name)
        return out

    def bound(self) -> tuple[tuple[str, str], ...]:
        """The functions declared with a legacy parameter that some file binds, each with
        its first binding (files in the order read)."""
        # a binding's target is an identifier token: the name as a whole word
        named = re.compile(rb"\b(?:" + b"|".join(re.escape(n.encode()) for n in sorted(self.legacy)) + rb")\b") \
            if self.legacy else None
        sites: dict[str, str] = {}
        for b in self.binds:
            if b.data is not None and named is not None and named.search(b.data):
                memo = self._memo(b.path)
                if _are_sites(memo.get("sites")):
                    b.sites = [(str(n), str(at)) for n, at in memo["sites"]]  # type: ignore[attr-defined]
                else:
                    memo["sites"] = b.sites = _sites(b.path, parse_bytes(b.path, b.data)[0].root_node)
                    if self.remember is not None:
                        self.remember(b.path, "cpp", memo)
            b.data = None
            for name, site in b.sites:
                if name in self.legacy:
                    sites.setdefault(name, site)
        return tuple(sorted(sites.items()))

    def returns(self) -> tuple[tuple[str, bool], ...]:
        """The facts some file answers yes to (and every container some file fills), and
        whether every file that has it agrees.  Each file was first judged alone: the files
        that answered yes to an "own" or "fills" fact are judged again with the others'
        answers (another file may fill the same member, or override the method), until the
        answers hold.  Where no file can answer yes, none is judged: a "no" matters only
        against a yes, and a container's "fills" only where some object is own (_values)."""
        facts = self._merged()
        for _ in range(4):
            changed = False
            key = hashlib.blake2b(repr(facts).encode(), digest_size=8).hexdigest()
            for path, data in self.kept.items():
                memo = self._memo(path)
                seen = memo.get("again")  # this content's answers given others' facts, by those facts
                seen = dict(seen) if isinstance(seen, dict) else {}
                again = seen.get(key)
                if not (isinstance(again, dict) and all(isinstance(v, bool) for v in again.values())):
                    again = seen[key] = _answers(Scan(path, data.decode("utf-8", "replace"), Options(cpp_returns=facts)))
                    if self.remember is not None:
                        memo["again"] = dict(list(seen.items())[-4:])  # (a run takes at most 4 rounds)
                        self.remember(path, "cpp", memo)
                changed |= again != self.answers[path]
                self.answers[path] = again
            if not changed:
                return facts
            facts = self._merged()
        # answers that still change (a cycle through several files): no object is provably own
        return tuple((k, yes and not k.startswith(("own:", "fills:"))) for k, yes in facts)

    def _merged(self) -> tuple[tuple[str, bool], ...]:
        """A method is own only if every class's method of that name is (an override may be
        called through the base class)."""
        every: dict[str, set[bool]] = {}
        for answers in self.answers.values():
            for k, yes in answers.items():
                every.setdefault(k, set()).add(yes)
        doubted = {k.rpartition("::")[2] for k, v in every.items() if k.startswith("own:") and False in v}
        return tuple(sorted((k, v == {True} and not (k.startswith("own:") and "::" in k
                                                    and k.rpartition("::")[2] in doubted))
                            for k, v in every.items() if True in v or k.startswith("fills:")))


def _are_sites(sites: object) -> bool:
    """A kept list of (bound function, "path:line") pairs."""
    return isinstance(sites, list) and all(isinstance(x, (list, tuple)) and len(x) == 2 for x in sites)


def _sites(path: str, root: Node) -> list[tuple[str, str]]:
    """(bound function, "path:line") of each binding of a file, in order."""
    calls = find(root, is_cuda(path), ("call_expression",)).get("call_expression", [])
    return [(b.target, f"{path}:{b.call.start_point.row + 1}")
            for b in binding_calls(sorted(calls, key=lambda n: n.start_byte)) if b.target]


def _takes_legacy(scan: Scan, params: Node | None) -> bool:
    return any((ty := p.child_by_field_name("type")) is not None and scan.resolver.kind_of_type(ty) is Kind.LEGACY
               for p in (params.named_children if params is not None else ()))


def _answers(scan: Scan) -> dict[str, bool]:
    out = scan.values.facts()
    if any(c.kind in (Kind.LEGACY, Kind.LEGACY_SUB) for c in scan.casts):
        # the functions code that casts to the legacy class calls (by name)
        for c in scan.nodes["call_expression"]:
            if name := callee_name(c):
                out[f"called:{name}"] = True
    return out
