"""Where the GPU a file picks comes from, against the GPU nccl2 binds (NCX130/NCX134).

nccl2 (torch 2.15, ``_nccl2_device`` in distributed_c10d.py) binds ``device_id`` when it is
given, else ``LOCAL_RANK % device_count`` when ``LOCAL_RANK`` is set, else the rank of the
group ``% device_count``; it reads no launcher variable (``SLURM_*``, ``OMPI_*``) and not the
current device.  So a pick is judged by its origin: ``LOCAL_RANK`` binds the same GPU
(hardening); the global rank, another launcher's local rank, index 0, an origin the file does
not show are the same GPU under some launchers only (maybe a break); a fixed index other than
0 or a rank scaled or shifted by a constant differ whenever they matter (a break).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst

from ._ctx import Analyzer
from ._reach import Def, Path, dotted, every, reaching, returns
from ._xcall import helper, helpers_of

__all__ = ["Verdict", "judge", "lone", "rank_arg"]

LOCAL, GLOBAL, LAUNCHER, FIXED0, BREAK, UNKNOWN = "local", "global", "launcher", "fixed0", "break", "unknown"

_GLOBAL_VARS = frozenset({"RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK",
                          "MV2_COMM_WORLD_RANK", "PALS_RANKID"})
_ENV_READERS = ("os.environ.get", "os.getenv", "os.environ.__getitem__", "os.environ.setdefault")
_WRAPPERS = ("int", "str", "device")  # int(x), str(x), torch.device(x) / torch.device("cuda", x)

# When each kind of pick is the GPU nccl2 binds, and when not (the finding's detail).
_WHEN = {
    GLOBAL: "where LOCAL_RANK is not set (srun, mpirun, mp.spawn) nccl2 binds rank % device_count, this GPU, "
            "but where it is set (torchrun) it binds LOCAL_RANK % device_count: another GPU unless every "
            "node runs device_count processes (torchrun --nproc-per-node below the GPU count differs on "
            "every node after the first)",
    LAUNCHER: "torch reads no launcher variable: without LOCAL_RANK nccl2 binds the rank passed to "
              "init_process_group (under srun, usually SLURM_PROCID) % device_count, this GPU only when "
              "every node runs device_count tasks numbered node by node (srun --ntasks-per-node=<GPUs>, "
              "block distribution); fewer tasks per node or a cyclic distribution put the group on another GPU",
    FIXED0: "nccl2 binds cuda:0 too for a lone process, one visible GPU or LOCAL_RANK 0, but without "
            "LOCAL_RANK it binds rank % device_count (srun with one task per node: another GPU on every "
            "node after the first)",
    UNKNOWN: "nothing here shows it is LOCAL_RANK % device_count (or, without LOCAL_RANK, the rank % "
             "device_count), and where it is not, the group runs on another GPU than this process",
}


@dataclass(frozen=True)
class Origin:
    kind: str
    what: str  # a few words: "the LOCAL_RANK variable", "`rank % n` (the global rank)"
    why: str = ""  # for BREAK: why it always differs
    named: bool = False  # judged by its name alone


@dataclass(frozen=True)
class Verdict:
    severity: bool | None  # True: the GPU nccl2 binds (hardening); False: a break; None: maybe a break
    what: str  # where the device comes from
    short: str  # the same in a word or two, for the message
    why: str  # when it is and is not the GPU nccl2 binds
    fixed0: bool = False  # every value it can take is index 0


def lone(call: cst.Call) -> bool:
    """An init of a lone process: literal ``world_size=1`` and ``rank=0`` (keywords, or the
    fourth and fifth positional arguments)."""
    plain = [arg.value for arg in call.args if arg.keyword is None and not arg.star]
    size = next((arg.value for arg in call.args if arg.keyword is not None and arg.keyword.value == "world_size"),
                plain[3] if len(plain) > 3 else None)
    rank = rank_arg(call)
    return (isinstance(size, cst.Integer) and int(size.value, 0) == 1
            and isinstance(rank, cst.Integer) and int(rank.value, 0) == 0)


def rank_arg(call: cst.Call) -> cst.BaseExpression | None:
    """The ``rank`` an ``init_process_group`` call passes (keyword, or fifth positional)."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "rank":
            return arg.value
    plain = [arg for arg in call.args if arg.keyword is None and not arg.star]
    return plain[4].value if len(plain) > 4 else None


def _env_key(a: Analyzer, expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """``X`` for ``os.environ[X]``, ``os.environ.get(X, ...)``, ``os.getenv(X)``."""
    if isinstance(expr, cst.Subscript) and a.qnames(expr.value) == {"os.environ"} and len(expr.slice) == 1:
        sl = expr.slice[0].slice
        return sl.value if isinstance(sl, cst.Index) else None
    if isinstance(expr, cst.Call) and expr.args and (a.qnames(expr.func) & set(_ENV_READERS)):
        return expr.args[0].value
    return None


def _string(expr: cst.BaseExpression | None) -> str | None:
    v = expr.evaluated_value if isinstance(expr, cst.SimpleString) else None
    return v if isinstance(v, str) else None


def _unwrap(expr: cst.BaseExpression) -> cst.BaseExpression:
    """``x`` for ``int(x)``, ``str(x)``, ``torch.device("cuda", x)``, ``f"cuda:{x}"``, ``"cuda:%d" % x``."""
    if isinstance(expr, cst.Call):
        plain = [arg.value for arg in expr.args if arg.keyword is None and not arg.star]
        if plain and (dotted(expr.func) or "").rpartition(".")[2] in _WRAPPERS:
            return _unwrap(plain[-1])
    if isinstance(expr, cst.FormattedString):
        index = _index_part(expr)
        return _unwrap(index) if index is not None else expr
    if (isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Modulo)
            and isinstance(expr.left, cst.SimpleString)):
        return _unwrap(expr.right)
    return expr


def _index_part(expr: cst.FormattedString) -> cst.BaseExpression | None:
    """The index in ``f"cuda:{i}"``, ``f"{i}"`` or ``f"{get_device_name()}:{i}"`` (the part after the ``:``)."""
    parts = list(expr.parts)
    values = [p for p in parts if isinstance(p, cst.FormattedStringExpression)]
    if len(values) == 1:
        return values[0].expression
    last = parts[-1] if parts else None
    before = parts[-2] if len(parts) > 1 else None
    if (isinstance(last, cst.FormattedStringExpression) and isinstance(before, cst.FormattedStringText)
            and before.value.endswith(":")):
        return last.expression
    return None


def _env_origin(name: str) -> Origin:
    if name == "LOCAL_RANK":
        return Origin(LOCAL, "the LOCAL_RANK variable")
    if name in _GLOBAL_VARS:
        return Origin(GLOBAL, f"the {name} variable (the global rank)")
    if "LOCAL" in name:
        return Origin(LAUNCHER, f"the {name} variable")
    return Origin(UNKNOWN, f"the {name} variable")


def _int(expr: cst.BaseExpression) -> int | None:
    if isinstance(expr, cst.Integer):
        return int(expr.value, 0)
    return None


def _fixed(index: int) -> Origin:
    if index == 0:
        return Origin(FIXED0, "the fixed index 0")
    return Origin(BREAK, f"the fixed index {index}",
                  "nccl2 binds cuda:0 on the process with LOCAL_RANK 0 (or, without LOCAL_RANK, rank 0), "
                  "so at least that process's group runs on another GPU than its tensors")


_RANKS = (LOCAL, GLOBAL, LAUNCHER)
Before = Callable[[cst.CSTNode, "cst.CSTNode | None"], bool]


class _Resolver:
    def __init__(self, a: Analyzer, rank: cst.BaseExpression | None, before: Before) -> None:
        self.a = a
        self.before = before  # whether a statement runs before the init (LOCAL_RANK exports)
        self.rank = a.code(rank).strip() if rank is not None else None  # the init's own rank argument
        self.active: set[tuple[str, int]] = set()  # names being resolved, against cycles
        self.steps = 0  # against branchy code: each name joins the values of each branch

    def origins(self, expr: cst.BaseExpression, at: Path | None, depth: int = 0) -> list[Origin]:
        a = self.a
        code = a.code(expr).strip()
        self.steps += 1
        if depth > 8 or self.steps > 400:
            return [Origin(UNKNOWN, f"`{code}`")]
        key = _env_key(a, expr)
        if key is not None:
            names = self._strings(key, at)
            return ([_env_origin(name) for name in names] if names
                    else [Origin(UNKNOWN, f"`{code}` (a variable whose name is not known here)")])
        if isinstance(expr, cst.Integer):
            return [_fixed(int(expr.value, 0))]
        if isinstance(expr, cst.SimpleString):
            v = expr.evaluated_value
            index = v.partition(":")[2] if isinstance(v, str) else ""
            if index.isdigit():
                return [_fixed(int(index))]
            return [Origin(UNKNOWN, f"the device {code}")]
        if isinstance(expr, cst.IfExp):
            return [*self.origins(expr.body, at, depth + 1), *self.origins(expr.orelse, at, depth + 1)]
        if isinstance(expr, cst.BooleanOperation):  # local_rank or 0: either value
            return [*self.origins(expr.left, at, depth + 1), *self.origins(expr.right, at, depth + 1)]
        if isinstance(expr, cst.Call):
            return self._call(expr, at, depth)
        if isinstance(expr, cst.FormattedString):
            part = _index_part(expr)
            return self.origins(part, at, depth + 1) if part is not None else [Origin(UNKNOWN, f"`{code}`")]
        if isinstance(expr, cst.BinaryOperation):
            return self._arith(expr, at, depth)
        if isinstance(expr, cst.Subscript):
            sl = expr.slice[0].slice if len(expr.slice) == 1 else None
            keyed = isinstance(sl, cst.Index) and isinstance(sl.value, cst.SimpleString)
            return [Origin(UNKNOWN, f"`{code}` ({'a looked-up value' if keyed else 'a remapped index'})")]
        if isinstance(expr, (cst.Name, cst.Attribute)):
            return self._value(expr, at, depth)
        return [Origin(UNKNOWN, f"`{code}`")]

    def _call(self, expr: cst.Call, at: Path | None, depth: int) -> list[Origin]:
        a = self.a
        code = a.code(expr).strip()
        fname = a.code(expr.func).rpartition(".")[2]
        plain = [arg.value for arg in expr.args if arg.keyword is None and not arg.star]
        index = next((arg.value for arg in expr.args if arg.keyword is not None and arg.keyword.value == "index"), None)
        if fname.lower() == "device" and index is not None:  # torch.device("cuda", index=i)
            return self.origins(index, at, depth + 1)
        if fname in _WRAPPERS and plain:
            return self.origins(plain[-1], at, depth + 1)
        if (isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "format"
                and isinstance(expr.func.value, cst.SimpleString) and len(plain) == 1):
            return self.origins(plain[0], at, depth + 1)  # "cuda:{}".format(i)
        if (fname == "getattr" and len(plain) >= 2 and isinstance(plain[1], cst.SimpleString)
                and isinstance(plain[1].evaluated_value, str)):  # getattr(args, "local_rank", -1)
            return [self._named(code, plain[1].evaluated_value, True)]
        fn = self._function(expr.func)
        if fn is not None:  # a function of this file: what it returns
            return self._returns(fn, None, code, depth)
        via = self.helper(expr, at, depth)
        if via is not None:  # a helper of another module of the run: what it returns
            return via
        if fname == "get_node_local_rank" or "local_rank" in fname.lower():
            return [Origin(LOCAL, f"`{code}` (the local rank)")]
        if fname in ("get_rank", "get_global_rank"):
            return [Origin(GLOBAL, f"`{code}` (the global rank)")]
        return [Origin(UNKNOWN, f"`{code}`")]

    def helper(self, call: cst.Call, at: Path | None, depth: int, picks: bool = False,
               index: int | None = None) -> list[Origin] | None:
        """What a helper the run indexed returns (``index``: that element of the tuple it returns;
        ``picks``: the GPU it picks), None if not one."""
        found = helper(self.a, call.func)
        if found is None:
            return None
        qual, h = found
        code = self.a.code(call).strip()
        tokens = list(h.sets) if picks else helpers_of(self.a).values(h.returns)
        head = f"at:{index}:"
        tokens = ([t[len(head):] for t in tokens if t.startswith(head)] if index is not None
                  else ["?" if t.startswith("at:") else t for t in tokens])
        out: list[Origin] = []
        for t in dict.fromkeys(tokens):
            kind, _, rest = t.partition(":")
            if kind == "param":  # the caller's argument
                k, _, name = rest.partition(":")
                arg = _argument(call, int(k), name)
                out += (self.origins(arg, at, depth + 1) if arg is not None
                        else [Origin(UNKNOWN, f"`{code}` (its default {name})")])
                continue
            if kind == "pidx":  # a device whose missing index the helper fills in (its other tokens)
                k, _, name = rest.partition(":")
                arg = _argument(call, int(k), name)
                if arg is None or _typed_only(_string(arg)):
                    continue  # the default, or "cuda": the fill applies
                out += [o for o in self.origins(arg, at, depth + 1) if not _device_type(o)]
                continue
            if kind == "env":
                o = _env_origin(rest)
            elif kind == "int":
                o = _fixed(int(rest))
            elif kind == "str" and rest.partition(":")[2].isdigit():
                o = _fixed(int(rest.partition(":")[2]))
            elif kind == "str" and picks:
                continue  # set_device("cuda") raises: not the GPU it picks
            elif kind in ("rank", "local"):
                o = Origin(GLOBAL if kind == "rank" else LOCAL, f"the {'global' if kind == 'rank' else 'local'} rank")
            else:
                out.append(Origin(UNKNOWN, f"`{code}` (from {qual})"))
                continue
            out.append(Origin(o.kind, f"`{code}` ({o.what.removeprefix('the ')}, from {qual})", o.why))
        return out or [Origin(UNKNOWN, f"`{code}` (from {qual})")]

    def _arith(self, expr: cst.BinaryOperation, at: Path | None, depth: int) -> list[Origin]:
        a = self.a
        code = a.code(expr).strip()
        op = expr.operator
        if isinstance(op, cst.Modulo) and isinstance(expr.left, (cst.SimpleString, cst.ConcatenatedString)):
            right = expr.right  # "cuda:%d" % i
            if isinstance(right, cst.Tuple) and len(right.elements) == 1:
                right = right.elements[0].value
            return self.origins(right, at, depth + 1)
        computed = Origin(UNKNOWN, f"`{code}` (a computed index)")
        if isinstance(op, cst.Modulo):
            if not self._is_count(expr.right, at):
                return [computed]
            names = {LOCAL: "LOCAL_RANK % device_count", GLOBAL: "the global rank % device_count"}
            return [Origin(o.kind, f"`{code}` ({names[o.kind]})" if o.kind in names else o.what)
                    if o.kind != BREAK else computed for o in self.origins(expr.left, at, depth + 1)]
        if isinstance(op, (cst.Multiply, cst.Add, cst.Subtract)):
            # a rank scaled or shifted by a constant: several GPUs per process, or an offset
            for this, other in ((expr.left, expr.right), (expr.right, expr.left)):
                k = _int(other)
                if k is None or (k == 1 if isinstance(op, cst.Multiply) else k == 0):
                    continue
                if isinstance(op, cst.Subtract) and this is expr.right:
                    continue
                if all(o.kind in _RANKS for o in self.origins(this, at, depth + 1)):
                    return [Origin(BREAK, f"`{code}` (a remapped index)",
                                   "it moves the rank by a constant, and nccl2 binds LOCAL_RANK % device_count (or, "
                                   "without LOCAL_RANK, rank % device_count): another GPU on every process "
                                   "whose index the remap changes")]
        return [computed]

    def _is_count(self, expr: cst.BaseExpression, at: Path | None, depth: int = 0) -> bool:
        """``torch.cuda.device_count()`` (any ``device_count()`` call), or a name every value of
        which reaching ``at`` is one."""
        if isinstance(expr, cst.Call):
            return (dotted(expr.func) or "").rpartition(".")[2] == "device_count"
        target = dotted(expr)
        if target is None or at is None or depth > 4:
            return False
        defs, entry = reaching(target, at)
        return bool(defs) and not entry and all(d.value is not None and d.index is None and not d.loop
                                                and self._is_count(d.value, d.path, depth + 1) for d in defs)

    def _value(self, expr: cst.Name | cst.Attribute, at: Path | None, depth: int) -> list[Origin]:
        """The values a name or attribute can hold at ``at``: the assignments that reach it."""
        a = self.a
        code = a.code(expr).strip()
        target = dotted(expr)
        if target is None or at is None:  # met where no statement is known: a module-level value
            value = (a.scopes.single_value(expr.value, a.scopes.module_scope) if isinstance(expr, cst.Name)
                     else None)
            return self.origins(value, None, depth + 1) if value is not None else [self._by_name(expr, code)]
        key = (target, id(at[-1]))
        if key in self.active:
            return []  # a loop feeding a name back to itself adds nothing new
        self.active.add(key)
        try:
            defs, entry = reaching(target, at)
            out = [o for d in defs for o in self._def(d, expr, code, depth)]
            if entry:
                out += self._entry(expr, code, target, at, depth)
        finally:
            self.active.discard(key)
        return out

    def _strings(self, expr: cst.BaseExpression, at: Path | None) -> list[str] | None:
        """The strings ``expr`` can be: a literal, or a name assigned literals or looping over them."""
        if _string(expr) is not None:
            return [str(_string(expr))]
        target = dotted(expr)
        if target is None or at is None:
            return None
        defs, entry = reaching(target, at)
        out: list[str] = []
        for d in defs:
            if d.loop and isinstance(d.value, (cst.Tuple, cst.List)):
                values = [el.value for el in d.value.elements]
            elif not d.loop and d.value is not None and d.index is None:
                values = [d.value]
            else:
                return None
            strings = [_string(v) for v in values]
            if not strings or any(v is None for v in strings):
                return None
            out += [str(v) for v in strings]
        return out if out and (not entry or self._local(target, at)) else None

    @staticmethod
    def _local(target: str, at: Path) -> bool:
        """``target`` is a local of the function ``at`` is in (bound there, not a parameter)."""
        root = next((n for n in reversed(at[:-1]) if isinstance(n, (cst.FunctionDef, cst.Lambda))), None)
        return (root is not None and "." not in target and target not in _param_names(root.params)
                and bool(every(root, target)))

    def _function(self, func: cst.BaseExpression) -> cst.FunctionDef | None:
        """The module-level function of this file a call's name refers to."""
        if not isinstance(func, cst.Name) or self.a.qnames(func):
            return None  # imported, or a builtin
        defs = [n for n in self.a.module.body if isinstance(n, cst.FunctionDef) and n.name.value == func.value]
        return defs[-1] if defs else None

    def _returns(self, fn: cst.FunctionDef, index: int | None, code: str, depth: int) -> list[Origin]:
        key = (fn.name.value, id(fn))
        if key in self.active:
            return [Origin(UNKNOWN, f"`{code}`")]
        self.active.add(key)
        try:
            out: list[Origin] = []
            for ret, path in returns(fn, (self.a.module, fn)):
                value: cst.BaseExpression | None = ret.value
                if index is not None:
                    els = value.elements if isinstance(value, (cst.Tuple, cst.List)) else ()
                    value = els[index].value if len(els) > index else None
                out += (self.origins(value, path, depth + 1) if value is not None
                        else [Origin(UNKNOWN, f"`{code}` (returned from {fn.name.value}())")])
            return out or [Origin(UNKNOWN, f"`{code}`")]
        finally:
            self.active.discard(key)

    def exported(self, target: str, at: Path, both_ways: bool = False) -> int | None:
        """The line of ``os.environ["LOCAL_RANK"] = str(target)`` that runs before the init, after
        the statement ``at`` ends in (``both_ways``: or before it) with no rebinding in between:
        nccl2 then binds this value (``LOCAL_RANK % device_count``)."""
        i = next((k for k in range(len(at) - 1, 0, -1)
                  if isinstance(at[k - 1], (cst.Module, cst.IndentedBlock, cst.SimpleStatementSuite))), 0)
        if not i:
            return None
        block, item = at[i - 1], at[i]
        assert isinstance(block, (cst.Module, cst.IndentedBlock, cst.SimpleStatementSuite))
        items = list(block.body)
        pos = next((j for j, it in enumerate(items) if it is item), None)
        if pos is None:
            return None
        fn = next((n for n in reversed(at[:i]) if isinstance(n, (cst.FunctionDef, cst.Lambda))), None)
        for order in ([*items[pos + 1:]], [*reversed(items[:pos])] if both_ways else []):
            for other in order:
                if self._exports(other) == target and self.before(other, fn):
                    return self.a.pos(other).start.line
                if every(other, target):
                    break
        return None

    def _exports(self, item: cst.CSTNode) -> str | None:
        """The name or attribute a statement exports as LOCAL_RANK (``os.environ["LOCAL_RANK"] = str(x)``)."""
        if not isinstance(item, cst.SimpleStatementLine):
            return None
        for small in item.body:
            value: cst.BaseExpression | None = None
            if isinstance(small, cst.Assign) and len(small.targets) == 1:
                t = small.targets[0].target
                if _string(_env_key(self.a, t)) == "LOCAL_RANK":
                    value = small.value
            elif (isinstance(small, cst.Expr) and isinstance(small.value, cst.Call)
                  and self.a.qnames(small.value.func) == {"os.environ.update"}):
                value = next((arg.value for arg in small.value.args if arg.keyword is not None
                              and arg.keyword.value == "LOCAL_RANK"), None)
            if value is not None:
                return dotted(_unwrap(value))
        return None

    def _def(self, d: Def, expr: cst.Name | cst.Attribute, code: str, depth: int) -> list[Origin]:
        if d.value is None and not d.whole:
            return [self._by_name(expr, code)]  # args = ... for args.gpu: what the name says
        target = dotted(expr)
        line = self.exported(target, d.path) if target is not None and d.value is not None else None
        if line is not None:  # nccl2 binds this very value
            return [Origin(LOCAL, f"the value exported as LOCAL_RANK on line {line} "
                                  f"({_join(self._assigned(d, code, depth))})")]
        return self._assigned(d, code, depth)

    def _assigned(self, d: Def, code: str, depth: int) -> list[Origin]:
        """What an assignment gives ``code`` (its value, an element of it, a loop's items)."""
        if d.value is None:
            hows = {cst.Import: "imported", cst.ImportFrom: "imported", cst.For: "a loop variable",
                    cst.AugAssign: "changed in place"}
            return [Origin(UNKNOWN, f"`{code}` ({hows.get(type(d.path[-1]), 'rebound')})")]
        if d.loop:
            els = d.value.elements if isinstance(d.value, (cst.Tuple, cst.List)) else ()
            return ([o for el in els for o in self.origins(el.value, d.path, depth + 1)]
                    or [Origin(UNKNOWN, f"`{code}` (a loop variable)")])
        value: cst.BaseExpression | None = d.value
        fn = self._function(value.func) if d.index is not None and isinstance(value, cst.Call) else None
        if fn is not None:
            return self._returns(fn, d.index, code, depth)
        via = self.helper(value, d.path, depth, index=d.index) if d.index is not None and isinstance(value, cst.Call) \
            else None
        if via is not None:  # local_rank, rank = get_local_and_global_rank() of another module
            return via
        if d.index is not None:
            els = value.elements if isinstance(value, (cst.Tuple, cst.List)) else ()
            starred = any(isinstance(e, cst.StarredElement) for e in els)
            value = els[d.index].value if len(els) > d.index and not starred else None
        if value is None:
            return [Origin(UNKNOWN, f"`{code}` (unpacked from `{self.a.code(d.value).strip()}`)")]
        return self.origins(value, d.path, depth + 1)

    def _entry(self, expr: cst.Name | cst.Attribute, code: str, target: str, at: Path, depth: int) -> list[Origin]:
        """Its value when the function (or module) it is used in starts."""
        root = next((n for n in reversed(at[:-1]) if isinstance(n, (cst.FunctionDef, cst.Lambda, cst.ClassDef))),
                    None)
        if isinstance(expr, cst.Attribute):
            return [self._by_name(expr, code)]  # an attribute of a parameter or a global
        params = root.params if isinstance(root, (cst.FunctionDef, cst.Lambda)) else None
        if params is not None and target in _param_names(params):
            return [self._by_name(expr, code)]
        if root is None or self._local(target, at):
            return []  # unbound on that path (a local of this function, or module code before it)
        value = self.a.scopes.single_value(target, self.a.scopes.module_scope)
        return self.origins(value, None, depth + 1) if value is not None else [self._by_name(expr, code)]

    def _by_name(self, expr: cst.Name | cst.Attribute, code: str) -> Origin:
        """What a name says of a value the file does not show."""
        return self._named(code, expr.value if isinstance(expr, cst.Name) else expr.attr.value,
                           isinstance(expr, cst.Attribute))

    def _named(self, code: str, name: str, attribute: bool) -> Origin:
        name = name.lower()
        if code == self.rank:
            return Origin(GLOBAL, f"`{code}` (the rank passed to init_process_group)", named=True)
        if "local_rank" in name:
            return Origin(LOCAL, f"`{code}` (by its name, the local rank)", named=True)
        if name in ("rank", "global_rank", "world_rank"):
            return Origin(GLOBAL, f"`{code}` (by its name, the global rank)", named=True)
        if attribute:
            return Origin(UNKNOWN, f"`{code}` (a configuration value)", named=True)
        return Origin(UNKNOWN, f"`{code}` (set elsewhere)", named=True)


def _typed_only(device: str | None) -> bool:
    """A device string without an index (``"cuda"``): ``set_device`` raises on it, so a helper
    that fills the index in when it is missing picks its own value."""
    return device is not None and not device.partition(":")[2].isdigit()


def _device_type(o: Origin) -> bool:
    """A device string without an index, or a value the file does not show whose name says it
    is a device (``cfg.device``, ``device_type``), not an index: taken for a device type, as
    ``local_rank`` is taken for the local rank."""
    if o.kind == UNKNOWN and o.what.startswith("the device "):
        return True  # a device string without an index ("cuda" reached through a name)
    word = o.what.partition(" (")[0].strip("`").rpartition(".")[2].lower()
    return o.named and o.kind == UNKNOWN and "device" in word and not any(
        w in word for w in ("id", "idx", "index", "rank", "gpu", "num"))


def _argument(call: cst.Call, index: int, name: str) -> cst.BaseExpression | None:
    """The argument a call passes for a parameter (``index``: its position, -1 keyword-only)."""
    kw = next((arg.value for arg in call.args if arg.keyword is not None and arg.keyword.value == name), None)
    plain = [arg.value for arg in call.args if arg.keyword is None and not arg.star]
    return kw if kw is not None or index < 0 or index >= len(plain) else plain[index]


def _param_names(params: cst.Parameters) -> set[str]:
    out = {p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)}
    return out | {p.name.value for p in (params.star_arg, params.star_kwarg) if isinstance(p, cst.Param)}


def _distinct(origins: list[Origin]) -> list[Origin]:
    seen = list(dict.fromkeys(origins))
    if any(o.kind != FIXED0 for o in seen):
        seen = [o for o in seen if o.kind != FIXED0]  # 0 next to a rank: the lone-process default
    return seen


def _join(origins: list[Origin], device: str = "") -> str:
    seen = _distinct(origins)
    whats = [o.what.replace(f"{device} (", "the value passed in (", 1) if o.named and len(seen) > 1 else o.what
             for o in seen]
    return " or ".join(whats[:3]) + (" or more" if len(seen) > 3 else "")


def _verdict(origins: list[Origin], device: str, named: bool) -> Verdict:
    """Join the values a pick can take: the same GPU only when each is LOCAL_RANK, a break only
    when each is one, else maybe (``device``: the pick's argument, ``named``: a name or attribute)."""
    seen = _distinct(origins)
    kinds = [o.kind for o in seen]
    what = _join(seen, device)
    if named and (len(seen) > 1 or not what.startswith((device, "the "))):
        what = f"{device} = {what}"
    short = seen[0].what.partition(" (")[0].removeprefix("the ").removesuffix(" variable") if len(seen) == 1 else device
    if all(k == LOCAL for k in kinds):
        return Verdict(True, what, short, "")
    if all(k == BREAK for k in kinds):
        return Verdict(False, what, short, seen[0].why)
    why = "; ".join(_WHEN[k] for k in dict.fromkeys(kinds) if k in _WHEN)
    if not why:  # LOCAL_RANK on some paths, a break on others
        why = next(f"where it is not LOCAL_RANK, {o.why}" for o in seen if o.kind == BREAK)
    return Verdict(None, what, short, why, fixed0=all(k == FIXED0 for k in kinds))


def judge(a: Analyzer, device: cst.BaseExpression, at: Path, init: cst.Call | None, before: Before,
          picks: bool = False) -> Verdict:
    """Where ``device`` (a GPU pick's argument; ``at``: the pick and the nodes around it) comes
    from, for ``init`` (given when the pick is in the init's function); ``before(statement,
    function)`` says whether a statement runs before the init.  ``picks``: ``device`` is the
    call of a helper of the run that picks the GPU itself (``init_device(args.local_rank)``)."""
    r = _Resolver(a, rank_arg(init) if init is not None else None, before)
    if picks and isinstance(device, cst.Call):
        origins = r.helper(device, at, 0, picks=True) or [Origin(UNKNOWN, f"`{a.code(device).strip()}`")]
        return _verdict(origins, f"`{a.code(device).strip()}`", False)
    index = dotted(_unwrap(device))
    line = r.exported(index, at, both_ways=True) if index is not None else None
    if line is not None:  # set_device(x) and LOCAL_RANK = str(x) before the init: nccl2 binds x too
        return Verdict(True, f"`{index}`, exported as LOCAL_RANK on line {line}", f"`{index}`", "")
    origins = r.origins(device, at) or [Origin(UNKNOWN, f"`{a.code(device).strip()}`")]
    literal = isinstance(_unwrap(device), (cst.Integer, cst.SimpleString)) or _env_key(a, _unwrap(device)) is not None
    return _verdict(origins, f"`{a.code(device).strip()}`", not literal)
