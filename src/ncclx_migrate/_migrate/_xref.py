"""The run's own small helpers, across its modules: what each returns, which GPU it picks.

NCX130/NCX134 judge a GPU pick by where its index comes from, and the device-binding rules
need the backend an init gets.  Real code fetches both from its own helpers in another
module: ``get_torch_device().set_device(rank)`` (a helper that returns ``torch.cuda``), a
``get_local_device()`` that returns ``LOCAL_RANK``, a ``get_nccl_backend()``, an
``init_device()`` that calls ``torch.cuda.set_device`` itself.  The runner reads every file
before the scan (the pre-pass); this module summarises the small module-level functions of
the modules that a file creating a process group imports (and of those their helpers call),
with CPython's ``ast`` (a fraction of a libcst parse), once per run, and each worker looks
calls up in that summary through its file's imports.

A summary is a list of tokens per function: ``env:NAME`` (reads that environment
variable), ``str:V`` / ``int:N`` (a literal), ``devmod`` (a device module: ``torch.cuda``,
``getattr(torch, name)``, ``torch.get_device_module()``), ``rank`` (``dist.get_rank()``),
``local`` (a call named for the local rank), ``at:K:TOKEN`` (element K of a returned
tuple), ``param:K:NAME`` (its K-th parameter: the caller's argument), ``pidx:K:NAME`` (a device
parameter whose missing index the function fills in: the caller's argument unless it has no index), ``call:QUAL`` (another function's result, looked up in turn) and ``?``
(anything else); a pick's list also holds ``pick:QUAL`` for each function it calls (whatever
that one picks) and ``with:QUAL:K:TOKEN`` / ``with:QUAL:=NAME:TOKEN`` for what it passes it, so that
a chain of helpers (up to ``MAX_DEPTH``) keeps the value its first caller gives.  Values are followed through the function's own assignments (all of them:
flow-insensitive, so a branch joins) and the module's constants.  Not seen: methods, a
helper reached through a variable or ``getattr``, values built in loops or containers, a
function over 60 lines (not a small helper; summarising every function of a large tree
would cost more than the scan).
"""

from __future__ import annotations

import ast
import functools
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from ._crossfile import ignored

__all__ = ["MAX_DEPTH", "Helper", "Helpers", "Indexer", "absolute", "imports_of", "module_name", "summarize"]

_DEVICE_MODULES = ("cuda", "npu", "xpu", "mps", "musa", "mlu", "hpu")
_PICKERS = frozenset({"set_device", "set_device_index", "set_device_idx"})
# Text a helper worth indexing must contain (files without it are not parsed).
_WORDS = ("RANK", "LOCALID", "set_device", "nccl\"", "nccl'", "gloo\"", "gloo'", "device_module", "getattr(torch",
          *(f"return torch.{m}\n" for m in _DEVICE_MODULES))
# A helper is small: longer functions (training loops, whole setups) are not summarised.
_MAX_LINES = 60
# How many helpers deep a value or a GPU pick is followed (docs/migrate.md, "Across modules"):
# a chain longer than this (or a cycle) ends in a value not known.
MAX_DEPTH = 8


@dataclass(frozen=True)
class Helper:
    returns: tuple[str, ...]  # tokens (see the module docstring)
    sets: tuple[str, ...] = ()  # the tokens of the GPU index a set_device in it picks


@dataclass(frozen=True, eq=False)
class Helpers:
    """qualified function name -> summary; compared and hashed by identity (it is in the Project).

    Built from every file's summaries: each pick is resolved through the helpers it calls,
    and only functions whose result or pick says something are kept (workers get a copy).
    Each lookup is a fact asked of the project (``asked``: its :meth:`Project.asked`)."""

    table: dict[str, Helper] = field(default_factory=dict)
    asked: Callable[[str, str], None] = field(init=False, default_factory=lambda: ignored, repr=False)
    _setters: frozenset[str] = field(init=False, default=frozenset())  # names of helpers that pick a GPU
    _by_name: dict[str, list[str]] = field(init=False, default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self._index()
        picks = {q: self._sets(q) for q, h in self.table.items() if h.sets}
        kept = {q: Helper(h.returns, tuple(picks.get(q, ()))) for q, h in self.table.items()
                if _useful(h.returns) or picks.get(q)}
        object.__setattr__(self, "table", kept)
        object.__setattr__(self, "_setters", frozenset(q.rpartition(".")[2] for q, h in kept.items() if h.sets))
        self._index()

    @property
    def setters(self) -> frozenset[str]:
        """The names of the helpers that pick a GPU."""
        self.asked("setters", "")
        return self._setters

    def names_that_pick(self) -> frozenset[str]:
        """:attr:`setters`, not asked (the project's answer)."""
        return self._setters

    def with_own(self, own: dict[str, Helper]) -> Helpers:
        """These helpers and a file's own (asking the same project)."""
        out = Helpers({**self.table, **own})
        object.__setattr__(out, "asked", self.asked)
        return out

    def _index(self) -> None:
        self._by_name.clear()
        for q in self.table:
            self._by_name.setdefault(q.rpartition(".")[2], []).append(q)

    def __bool__(self) -> bool:
        self.asked("any", "")
        return bool(self.table)

    def find(self, qualified: str) -> str | None:
        """The key ``qualified`` (``pkg.utils.get_local_device``) names: itself, else the one
        helper of that name under that package (a re-export from ``pkg/utils/__init__.py``, a
        tree scanned without its top package)."""
        mod, _, name = qualified.rpartition(".")
        self.asked("helper", name)  # the answer depends on the helpers of that name only
        if qualified in self.table:
            return qualified
        cands = self._by_name.get(name, [])
        under = [q for q in cands if q.startswith(mod + ".") or ("." + qualified).endswith("." + q)]
        return under[0] if len(under) == 1 else None

    def get(self, qualified: str) -> Helper | None:
        key = self.find(qualified)
        return self.table[key] if key is not None else None

    def values(self, tokens: Iterable[str], depth: int = 0) -> list[str]:
        """``tokens`` with each ``call:Q`` replaced by what Q returns (its own parameters: ``?``)."""
        out: list[str] = []
        for t in tokens:
            if t.startswith("at:"):  # an element of a returned tuple
                k, _, rest = t[3:].partition(":")
                out += [f"at:{k}:{r}" for r in self.values([rest], depth)]
                continue
            if not t.startswith("call:"):
                out.append(t)
                continue
            h = self.get(t[5:]) if depth < MAX_DEPTH else None
            out += (["?" if r.startswith("param:") else r for r in self.values(h.returns, depth + 1)]
                    if h is not None else ["?"])
        return out

    def _sets(self, qualified: str, depth: int = 0) -> list[str]:
        """The value tokens of the GPU a call of ``qualified`` picks, through the helpers it calls:
        a callee's parameter becomes what this one passes it (``with:`` tokens), so a chain of
        helpers keeps the value its first caller gives (``param:``/``pidx:`` of ``qualified``)."""
        h = self.get(qualified)
        if h is None or depth > MAX_DEPTH:
            return []
        out: list[str] = []
        for t in h.sets:
            if t.startswith("pick:"):
                callee = t[5:]
                for r in self._sets(callee, depth + 1):
                    out += _passed(h.sets, callee, r)
            elif not t.startswith("with:"):
                out.append(t)
        return self.values(out)


def _passed(sets: tuple[str, ...], callee: str, token: str) -> list[str]:
    """``token`` of a callee's pick, seen from its caller: a parameter becomes the tokens of the
    argument the caller passes for it (``with:CALLEE:K:T`` / ``with:CALLEE:=NAME:T``), ``?`` when
    it passes none that the summary shows.  For a ``pidx`` parameter (a device whose missing index
    the callee fills in) a device string without an index adds nothing (the fill applies), and the
    caller's own parameters stay ``pidx``."""
    kind, _, rest = token.partition(":")
    if kind not in ("param", "pidx"):
        return [token]
    k, _, name = rest.partition(":")
    head = f"with:{callee}:"
    got = [x[len(head):].partition(":") for x in sets if x.startswith(head)]
    args = [v for key, _, v in got if key in (k, f"={name}")]
    if not args:
        return ["?"]
    out: list[str] = []
    for v in args:
        if kind == "pidx" and v.startswith("str:") and not v.rpartition(":")[2].isdigit():
            continue  # "cuda": the callee fills the index in
        out.append("pidx" + v[5:] if kind == "pidx" and v.startswith("param:") else v)
    return out


@functools.lru_cache(maxsize=65536)
def module_name(path: str) -> str:
    """``pkg.sub.mod`` for ``.../pkg/sub/mod.py`` (up through the folders holding __init__.py);
    a scan asks it of its project (:meth:`Project.module_name`), which records it.  Found once
    per path in a process (a run), as :func:`_package` is per folder."""
    folder, base = os.path.split(os.path.abspath(path))
    stem = base.rsplit(".", 1)[0]
    package = _package(folder)
    return ".".join(p for p in (package, "" if stem == "__init__" else stem) if p)


@functools.lru_cache(maxsize=4096)
def _package(folder: str) -> str:
    """The dotted package a folder is (empty when it holds no __init__.py)."""
    if not os.path.exists(os.path.join(folder, "__init__.py")):
        return ""
    parent, name = os.path.split(folder)
    if not name:
        return ""
    head = _package(parent)
    return f"{head}.{name}" if head else name


def absolute(module: str, is_package: bool, relative: str) -> str:
    """``pkg.b.f`` for ``.b.f`` met in module ``pkg.a`` (``..x`` goes one package up)."""
    level = len(relative) - len(relative.lstrip("."))
    if not level:
        return relative
    base = module.split(".") if module else []
    if not is_package:
        base = base[:-1]
    base = base[: len(base) - (level - 1)] if level > 1 else base
    rest = relative[level:]
    return ".".join([*base, rest] if rest else base)


def _chain(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _chain(node.value)
        return f"{head}.{node.attr}" if head else None
    return None


class _Module:
    def __init__(self, tree: ast.Module, name: str, is_package: bool) -> None:
        self.name = name
        self.imports: dict[str, str] = {}
        self.functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        self.constants: dict[str, list[ast.expr | None]] = {}
        for node in tree.body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                self._bind(node, is_package)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.functions[node.name] = node
            for target, value in _bindings(node):
                self.constants.setdefault(target, []).append(value)

    def _bind(self, node: ast.Import | ast.ImportFrom, is_package: bool) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    self.imports[alias.asname] = alias.name
                else:
                    head = alias.name.split(".")[0]
                    self.imports[head] = head
            return
        base = absolute(self.name, is_package, "." * node.level + (node.module or ""))
        for alias in node.names:
            if alias.name != "*":
                self.imports[alias.asname or alias.name] = f"{base}.{alias.name}" if base else alias.name

    def qualify(self, func: ast.expr) -> str | None:
        """What a called name refers to: a function of this module, or one imported."""
        chain = _chain(func)
        if chain is None:
            return None
        head, _, rest = chain.partition(".")
        if head in self.imports:
            return f"{self.imports[head]}.{rest}" if rest else self.imports[head]
        if not rest and head in self.functions:
            return f"{self.name}.{head}" if self.name else head
        return None


def _bindings(node: ast.AST) -> Iterator[tuple[str, ast.expr | None]]:
    """(name, value) for each name a statement binds: value None when not a plain ``x = v``."""
    if isinstance(node, ast.Assign):
        for t in node.targets:
            if isinstance(t, ast.Name):
                yield t.id, node.value
            else:
                yield from ((n.id, None) for n in ast.walk(t) if isinstance(n, ast.Name))
    elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        yield node.target.id, node.value
    elif isinstance(node, (ast.AugAssign, ast.For, ast.AsyncFor, ast.With, ast.AsyncWith, ast.NamedExpr)):
        targets: list[ast.AST] = ([node.target] if isinstance(node, (ast.AugAssign, ast.For, ast.AsyncFor, ast.NamedExpr))
                                  else [i.optional_vars for i in node.items if i.optional_vars is not None])
        for tgt in targets:
            yield from ((n.id, None) for n in ast.walk(tgt) if isinstance(n, ast.Name))


def _own(fn: ast.AST) -> Iterator[ast.AST]:
    """The nodes of a function's body, not of functions or classes nested in it."""
    todo = list(ast.iter_child_nodes(fn))
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            todo.extend(ast.iter_child_nodes(node))


class _Summary:
    def __init__(self, mod: _Module, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.mod = mod
        args = fn.args
        self.params = {a.arg: k for k, a in enumerate([*args.posonlyargs, *args.args])}
        self.params.update({a.arg: -1 for a in args.kwonlyargs})
        self.assigns: dict[str, list[ast.expr | None]] = {}
        self.nodes = list(_own(fn))
        for node in self.nodes:
            for target, value in _bindings(node):
                self.assigns.setdefault(target, []).append(value)
        self.active: set[str] = set()
        # parameters rebound only under ``if p.index is None:`` (a device whose index is filled in)
        filled: dict[str, int] = {}
        for node in self.nodes:
            if isinstance(node, ast.If) and isinstance(node.test, ast.Compare) and len(node.test.ops) == 1 \
                    and isinstance(node.test.ops[0], ast.Is) and isinstance(node.test.left, ast.Attribute) \
                    and node.test.left.attr == "index" and isinstance(node.test.left.value, ast.Name) \
                    and isinstance(node.test.comparators[0], ast.Constant) and node.test.comparators[0].value is None:
                name = node.test.left.value.id
                filled[name] = filled.get(name, 0) + sum(
                    1 for stmt in node.body for t, _ in _bindings(stmt) if t == name)
        self.fills = {n for n, c in filled.items() if n in self.params and c and c == len(self.assigns.get(n, ()))}

    def tokens(self, e: ast.expr | None, depth: int = 0) -> list[str]:
        if e is None or depth > 6:
            return ["?"]
        if isinstance(e, ast.Constant):
            if isinstance(e.value, str):
                return [f"str:{e.value}"]
            return [f"int:{e.value}"] if isinstance(e.value, int) and not isinstance(e.value, bool) else ["?"]
        env = _env_name(e)
        if env is not None:
            return [f"env:{env}"] if env else ["?"]
        if isinstance(e, ast.IfExp):
            return [*self.tokens(e.body, depth + 1), *self.tokens(e.orelse, depth + 1)]
        if isinstance(e, ast.BoolOp):  # _get_local_rank() or 0: either value
            return [t for v in e.values for t in self.tokens(v, depth + 1)]
        if isinstance(e, ast.Call):
            return self._call(e, depth)
        if isinstance(e, ast.JoinedStr):
            parts = [v.value for v in e.values if isinstance(v, ast.FormattedValue)]
            return self.tokens(parts[0], depth + 1) if len(parts) == 1 else ["?"]
        if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Mod):
            if isinstance(e.left, ast.Constant) and isinstance(e.left.value, str):  # "cuda:%d" % i
                right = e.right.elts[0] if isinstance(e.right, ast.Tuple) and len(e.right.elts) == 1 else e.right
                return self.tokens(right, depth + 1)
            if "device_count" in ast.unparse(e.right):  # LOCAL_RANK % device_count is LOCAL_RANK's GPU
                return self.tokens(e.left, depth + 1)
            return ["?"]
        if isinstance(e, ast.Attribute):
            chain = _chain(e) or ""
            head, _, rest = chain.partition(".")
            torch = self.mod.imports.get(head) == "torch"
            return ["devmod"] if torch and rest in _DEVICE_MODULES else ["?"]
        if isinstance(e, ast.Name):
            return self._name(e.id, depth)
        return ["?"]

    def _name(self, name: str, depth: int) -> list[str]:
        if name in self.active:
            return []
        if name in self.params:  # the caller's argument, or what the function rebinds it to
            kind = "pidx" if name in self.fills else "param"
            own = [f"{kind}:{self.params[name]}:{name}"]
            self.active.add(name)
            try:
                return own + [t for v in self.assigns.get(name, ()) for t in self.tokens(v, depth + 1)]
            finally:
                self.active.discard(name)
        values = self.assigns.get(name) or (self.mod.constants.get(name) if name not in self.assigns else None)
        if not values:
            return ["?"]
        self.active.add(name)
        try:
            return [t for v in values for t in self.tokens(v, depth + 1)]
        finally:
            self.active.discard(name)

    def _call(self, e: ast.Call, depth: int) -> list[str]:
        chain = _chain(e.func) or ""
        fname = chain.rpartition(".")[2]
        plain = [a for a in e.args if not isinstance(a, ast.Starred)]
        kw = {k.arg: k.value for k in e.keywords if k.arg}
        if fname in ("int", "str", "device") and (plain or "index" in kw):
            return self.tokens(kw.get("index") or plain[-1], depth + 1)
        if fname == "format" and isinstance(e.func, ast.Attribute) and isinstance(e.func.value, ast.Constant) \
                and len(plain) == 1:
            return self.tokens(plain[0], depth + 1)
        if fname == "getattr" and plain and isinstance(plain[0], ast.Name) \
                and self.mod.imports.get(plain[0].id) == "torch":
            return ["devmod"]
        qual = self.mod.qualify(e.func)
        if qual is not None and not qual.startswith("torch."):
            return [f"call:{qual}"]
        if fname.lstrip("_") in ("get_device_module", "device_module"):
            return ["devmod"]
        if fname in ("get_rank", "get_global_rank"):
            return ["rank"]
        if fname == "get_node_local_rank" or "local_rank" in fname.lower():
            return ["local"]
        return ["?"]

    def returns(self) -> list[str]:
        out: list[str] = []
        for node in self.nodes:
            if isinstance(node, ast.Return) and isinstance(node.value, ast.Tuple):  # return local_rank, rank
                out += [f"at:{k}:{t}" for k, el in enumerate(node.value.elts) for t in self.tokens(el)]
            elif isinstance(node, ast.Return):
                out += self.tokens(node.value) if node.value is not None else ["?"]
        return out

    def sets(self) -> list[str]:
        """The GPU index each set_device in it picks; ``call:Q`` for a helper it calls that picks one."""
        out: list[str] = []
        for node in self.nodes:
            if not isinstance(node, ast.Call):
                continue
            chain = _chain(node.func) or ""
            if isinstance(node.func, ast.Attribute) and node.func.attr in _PICKERS and self._is_devmod(node.func.value):
                arg = next((a for a in node.args if not isinstance(a, ast.Starred)), None)
                out += self.tokens(arg)
            elif chain and not isinstance(node.func, ast.Attribute):
                qual = self.mod.qualify(node.func)
                if qual is not None and not qual.startswith("torch."):
                    out.append(f"pick:{qual}")  # resolved against the table (it may pick a GPU)
                    # what it passes, for the callee's parameters (Helpers._sets)
                    plain = [a for a in node.args if not isinstance(a, ast.Starred)]
                    if len(plain) == len(node.args):
                        out += [f"with:{qual}:{k}:{t}" for k, a in enumerate(plain) for t in self.tokens(a)]
                    out += [f"with:{qual}:={kw.arg}:{t}" for kw in node.keywords if kw.arg
                            for t in self.tokens(kw.value)]
        return out

    def _is_devmod(self, recv: ast.expr) -> bool:
        chain = _chain(recv)
        if chain is not None:
            head, _, rest = chain.partition(".")
            if self.mod.imports.get(head) == "torch" and rest in (*_DEVICE_MODULES, "accelerator"):
                return True
        # a call of another helper: taken to return a device module (looked up when it is used)
        return any(t == "devmod" or t.startswith("call:") for t in self.tokens(recv))


def _env_name(e: ast.expr) -> str | None:
    """The variable ``os.environ[X]`` / ``os.environ.get(X)`` / ``os.getenv(X)`` reads ("" if
    not a literal); None when ``e`` reads none."""
    key: ast.expr | None = None
    if isinstance(e, ast.Subscript) and (_chain(e.value) or "").endswith("environ"):
        key = e.slice
    elif isinstance(e, ast.Call) and e.args and (_chain(e.func) or "").endswith(
            ("environ.get", "getenv", "environ.setdefault")):
        key = e.args[0]
    else:
        return None
    return key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else ""


def _useful(tokens: Iterable[str]) -> bool:
    return any(t != "?" for t in tokens)


def summarize(text: str, path: str) -> dict[str, Helper]:
    """The helpers of one file (module-level functions whose result or pick says something)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return {}  # the scan reports it
    mod = _Module(tree, module_name(path), os.path.basename(path) == "__init__.py")
    out: dict[str, Helper] = {}
    for name, fn in mod.functions.items():
        if (fn.end_lineno or fn.lineno) - fn.lineno > _MAX_LINES:
            continue
        s = _Summary(mod, fn)
        returns, sets = s.returns(), s.sets()
        if _useful(returns) or sets:
            key = f"{mod.name}.{name}" if mod.name else name
            out[key] = Helper(tuple(dict.fromkeys(returns)), tuple(dict.fromkeys(sets)))
    return out


def _text(data: bytes) -> str | None:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None


def imports_of(path: str, data: bytes) -> list[tuple[str, str, str]]:
    """What a file creating a process group imports at its top, as ("import", module, "") and
    ("from", module, name) in order (none for other files): the code before its first top-level
    ``def``/``class`` is parsed (the whole file when that piece does not parse)."""
    if not path.endswith((".py", ".pyw")) or b"init_process_group" not in data:
        return []
    cut = min((i for i in (data.find(w) for w in (b"\ndef ", b"\nclass ", b"\n@", b"\nasync def ")) if i >= 0),
              default=len(data))
    tree = None
    for piece in (data[:cut], data) if cut < len(data) else (data,):
        text = _text(piece)
        try:
            tree = ast.parse(text) if text is not None else None
            break
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
    if tree is None:
        return []
    mod, is_pkg = module_name(path), os.path.basename(path) == "__init__.py"
    out: list[tuple[str, str, str]] = []
    todo: list[ast.stmt] = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.If, ast.Try)):  # try: import x / if TYPE_CHECKING: ...
            todo += [*node.body, *node.orelse, *(getattr(node, "finalbody", [])),
                     *(s for h in getattr(node, "handlers", []) for s in h.body)]
        elif isinstance(node, ast.Import):
            out += [("import", alias.name, "") for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = absolute(mod, is_pkg, "." * node.level + (node.module or ""))
            out += [("from", base, alias.name) for alias in node.names]
    return out


class Indexer:
    """The pre-pass side: ``add`` every file of the run as the runner reads it, then ``build``.

    Only modules that a file creating a process group imports (or that such a module's
    helpers call) are summarised, and of those only files whose text could hold a helper:
    a large tree (torch's own: 2,481 files) has a few dozen, where summarising every file
    would cost a good part of the scan."""

    def __init__(self) -> None:
        self.wanted: dict[str, set[str] | None] = {}  # module -> names imported from it (None: the module)
        self.candidates: list[str] = []  # every Python file (read again in build() only if wanted)

    def add(self, path: str, data: bytes) -> None:
        if not path.endswith((".py", ".pyw")):
            return
        self.note(path, imports_of(path, data))

    def note(self, path: str, imports: list[tuple[str, str, str]]) -> None:
        """Take a file of the run, with what :func:`imports_of` says of it (kept by the cache)."""
        if not path.endswith((".py", ".pyw")):
            return
        for kind, base, name in imports:
            if kind == "import":
                self.wanted[base] = None
                continue
            names = self.wanted.setdefault(base, set())
            if names is not None:
                names.add(name)
            self.wanted[f"{base}.{name}"] = None  # the name may be a module
        self.candidates.append(path)

    def _named(self, module: str, tails: set[str]) -> bool:
        """Some file creating a group imports ``module`` (or its tail: a tree scanned without its
        top package), or a name from a package above it (a re-export, checked in ``_want``)."""
        if module == "torch" or module.startswith("torch.") or not module:
            return False  # torch's own functions are judged by the rules, never as a project's helper
        parts = module.split(".")
        return (module in tails or any(".".join(parts[k:]) in self.wanted for k in range(len(parts)))
                or any(self.wanted.get(".".join(parts[:k])) for k in range(1, len(parts))))

    def _want(self, module: str, defined: Callable[[str], bool], tails: set[str]) -> bool:
        """Whether to summarise ``module`` (it passed ``_named``, and its text could hold a
        helper), given which names it ``defined`` (``def NAME(`` is in its text)."""
        parts = module.split(".")
        names: set[str] = set()
        if module in self.wanted:
            got = self.wanted[module]
            if got is None:
                return True  # import m: any of its functions
            names |= got
        elif module in tails or any(".".join(parts[k:]) in self.wanted for k in range(1, len(parts))):
            return True  # a tree scanned without its top package: the names are not matched up
        for k in range(1, len(parts)):  # from pkg import f, where pkg re-exports f from this module
            names |= self.wanted.get(".".join(parts[:k])) or set()
        return any(defined(n) for n in names)

    def build(self, read: Callable[[str], bytes | None],
              kept: Callable[[str], dict[str, object] | None] | None = None,
              remember: Callable[[str, str, object], None] | None = None) -> Helpers:
        """The helpers of the run; ``kept``/``remember``: the facts the cache keeps of each
        file (what :func:`screen` and :func:`summarize` said of its content), so that an
        unchanged file is neither read nor parsed again."""
        table: dict[str, Helper] = {}
        todo, done = list(self.candidates), set()
        for _ in range(MAX_DEPTH):  # the wanted modules, then the modules their helpers call (and so on)
            tails = {".".join(k.split(".")[i:]) for k in self.wanted for i in range(1, k.count(".") + 1)}
            for path in todo:
                module = module_name(path)
                if not self._named(module, tails):
                    continue
                memo = kept(path) if kept is not None else None
                got = _Read(path, read, memo, remember)
                screened = got.screen()
                if screened is not None and self._want(module, screened.__contains__, tails):
                    table.update(got.summary(module))
                    done.add(path)
            inner = [t.split(":", 3)[3] if t.startswith("with:") else t for h in table.values()
                     for t in (*h.returns, *h.sets)]  # with:CALLEE:K:TOKEN passes TOKEN on
            called = {t.split(":", 1)[1].rpartition(".")[0] for t in inner if t.startswith(("call:", "pick:"))}
            fresh = called - self.wanted.keys()
            if not fresh:
                break
            self.wanted.update(dict.fromkeys(fresh))
            todo = [p for p in self.candidates if p not in done]
        return Helpers(table)


def screen(data: bytes) -> frozenset[str] | None:
    """What :meth:`Indexer._want` needs of a file's bytes: the names ``NAME`` of each
    ``def NAME(`` in it; None when it cannot hold a helper (undecodable, no ``def``, or none
    of the words a helper says)."""
    if _text(data) is None or b"def " not in data or not any(w.encode() in data for w in _WORDS):
        return None
    names: set[str] = set()
    at = data.find(b"def ")
    while at >= 0:
        end = data.find(b"(", at + 4)
        if end < 0:
            break
        try:
            name = data[at + 4:end].decode()
        except UnicodeDecodeError:
            name = ""
        if name.isidentifier():  # (an imported name is one)
            names.add(name)
        at = data.find(b"def ", at + 4)
    return frozenset(names)


class _Read:
    """One file as :meth:`Indexer.build` needs it: read once at most, and not at all where
    the cache kept what its content says (``memo``: its facts this run)."""

    def __init__(self, path: str, read: Callable[[str], bytes | None], memo: dict[str, object] | None,
                 remember: Callable[[str, str, object], None] | None) -> None:
        self.path, self._read, self.memo, self.remember = path, read, memo, remember
        self._data: bytes | None = None

    def data(self) -> bytes | None:
        if self._data is None:
            self._data = self._read(self.path)
        return self._data

    def screen(self) -> frozenset[str] | None:
        got = self.memo.get("screen", False) if self.memo is not None else False
        if got is None or (isinstance(got, list) and all(isinstance(n, str) for n in got)):
            return None if got is None else frozenset(got)
        data = self.data()
        out = screen(data) if data is not None else None
        if data is not None and self.remember is not None:
            self.remember(self.path, "screen", None if out is None else sorted(out))
        return out

    def summary(self, module: str) -> dict[str, Helper]:
        got = self.memo.get("summary") if self.memo is not None else None
        if isinstance(got, list) and len(got) == 2 and got[0] == module and isinstance(got[1], dict):
            try:
                return {q: Helper(tuple(r), tuple(t)) for q, (r, t) in got[1].items()}
            except (TypeError, ValueError):
                pass  # another shape: summarised again
        data = self.data()
        text = _text(data) if data is not None else None
        if text is None:
            return {}
        out = summarize(text, self.path)
        if self.remember is not None:
            self.remember(self.path, "summary", [module, {q: [list(h.returns), list(h.sets)] for q, h in out.items()}])
        return out
