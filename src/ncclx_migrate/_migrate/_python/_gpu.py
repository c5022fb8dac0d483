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

from dataclasses import dataclass

import libcst as cst

from ._ctx import Analyzer
from ._reach import Def, Path, dotted, every, reaching

__all__ = ["Verdict", "judge", "rank_arg"]

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
              "init_process_group % device_count, this GPU only when every node runs device_count tasks "
              "numbered node by node (srun --ntasks-per-node=<GPUs>, block distribution); fewer tasks per "
              "node or a cyclic distribution put the group on another GPU",
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


@dataclass(frozen=True)
class Verdict:
    severity: bool | None  # True: the GPU nccl2 binds (hardening); False: a break; None: maybe a break
    what: str  # where the device comes from
    short: str  # the same in a word or two, for the message
    why: str  # when it is and is not the GPU nccl2 binds


def rank_arg(call: cst.Call) -> cst.BaseExpression | None:
    """The ``rank`` an ``init_process_group`` call passes (keyword, or fifth positional)."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "rank":
            return arg.value
    plain = [arg for arg in call.args if arg.keyword is None and not arg.star]
    return plain[4].value if len(plain) > 4 else None


def _env_name(a: Analyzer, expr: cst.BaseExpression) -> str | None:
    """``"X"`` for ``os.environ["X"]``, ``os.environ.get("X", ...)``, ``os.getenv("X")``."""
    key: cst.BaseExpression | None = None
    if isinstance(expr, cst.Subscript) and a.qnames(expr.value) == {"os.environ"} and len(expr.slice) == 1:
        sl = expr.slice[0].slice
        key = sl.value if isinstance(sl, cst.Index) else None
    elif isinstance(expr, cst.Call) and expr.args and (a.qnames(expr.func) & set(_ENV_READERS)):
        key = expr.args[0].value
    if isinstance(key, cst.SimpleString) and isinstance(key.evaluated_value, str):
        return key.evaluated_value
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


class _Resolver:
    def __init__(self, a: Analyzer, rank: cst.BaseExpression | None) -> None:
        self.a = a
        self.rank = a.code(rank).strip() if rank is not None else None  # the init's own rank argument
        self.active: set[tuple[str, int]] = set()  # names being resolved, against cycles
        self.steps = 0  # against branchy code: each name joins the values of each branch

    def origins(self, expr: cst.BaseExpression, at: Path | None, depth: int = 0) -> list[Origin]:
        a = self.a
        code = a.code(expr).strip()
        self.steps += 1
        if depth > 8 or self.steps > 400:
            return [Origin(UNKNOWN, f"`{code}`")]
        env = _env_name(a, expr)
        if env is not None:
            return [_env_origin(env)]
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
        if isinstance(expr, cst.Call):
            return self._call(expr, at, depth)
        if isinstance(expr, cst.FormattedString):
            parts = [p.expression for p in expr.parts if isinstance(p, cst.FormattedStringExpression)]
            return self.origins(parts[0], at, depth + 1) if len(parts) == 1 else [Origin(UNKNOWN, f"`{code}`")]
        if isinstance(expr, cst.BinaryOperation):
            return self._arith(expr, at, depth)
        if isinstance(expr, cst.Subscript):
            key = expr.slice[0].slice if len(expr.slice) == 1 else None
            keyed = isinstance(key, cst.Index) and isinstance(key.value, cst.SimpleString)
            return [Origin(UNKNOWN, f"`{code}` ({'a looked-up value' if keyed else 'a remapped index'})")]
        if isinstance(expr, (cst.Name, cst.Attribute)):
            return self._value(expr, at, depth)
        return [Origin(UNKNOWN, f"`{code}`")]

    def _call(self, expr: cst.Call, at: Path | None, depth: int) -> list[Origin]:
        a = self.a
        code = a.code(expr).strip()
        fname = a.code(expr.func).rpartition(".")[2]
        plain = [arg.value for arg in expr.args if arg.keyword is None and not arg.star]
        if fname in _WRAPPERS and plain:
            return self.origins(plain[-1], at, depth + 1)
        if (isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "format"
                and isinstance(expr.func.value, cst.SimpleString) and len(plain) == 1):
            return self.origins(plain[0], at, depth + 1)  # "cuda:{}".format(i)
        if (fname == "getattr" and len(plain) >= 2 and isinstance(plain[1], cst.SimpleString)
                and isinstance(plain[1].evaluated_value, str)):  # getattr(args, "local_rank", -1)
            return [self._named(code, plain[1].evaluated_value, True)]
        if fname == "get_node_local_rank" or "local_rank" in fname.lower():
            return [Origin(LOCAL, f"`{code}` (the local rank)")]
        if fname in ("get_rank", "get_global_rank"):
            return [Origin(GLOBAL, f"`{code}` (the global rank)")]
        return [Origin(UNKNOWN, f"`{code}`")]

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

    def _is_count(self, expr: cst.BaseExpression, at: Path | None) -> bool:
        """``torch.cuda.device_count()``, or a name every value of which is it."""
        if "device_count" in self.a.code(expr):
            return True
        target = dotted(expr)
        if target is None or at is None:
            return False
        defs, entry = reaching(target, at)
        return bool(defs) and not entry and all(d.value is not None and "device_count" in self.a.code(d.value)
                                                for d in defs)

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

    def _def(self, d: Def, expr: cst.Name | cst.Attribute, code: str, depth: int) -> list[Origin]:
        if d.value is None:
            return [self._by_name(expr, code)] if not d.whole else [Origin(UNKNOWN, f"`{code}` (rebound)")]
        value: cst.BaseExpression | None = d.value
        if d.index is not None:
            els = value.elements if isinstance(value, (cst.Tuple, cst.List)) else ()
            value = (els[d.index].value if len(els) > d.index and not any(isinstance(e, cst.StarredElement) for e in els)
                     else None)
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
        if root is not None and every(root, target):
            return []  # a local of this function, unbound on that path
        if root is None:
            return []
        value = self.a.scopes.single_value(target, self.a.scopes.module_scope)
        return self.origins(value, None, depth + 1) if value is not None else [self._by_name(expr, code)]

    def _by_name(self, expr: cst.Name | cst.Attribute, code: str) -> Origin:
        """What a name says of a value the file does not show."""
        return self._named(code, expr.value if isinstance(expr, cst.Name) else expr.attr.value,
                           isinstance(expr, cst.Attribute))

    def _named(self, code: str, name: str, attribute: bool) -> Origin:
        name = name.lower()
        if code == self.rank:
            return Origin(GLOBAL, f"`{code}` (the rank passed to init_process_group)")
        if "local_rank" in name:
            return Origin(LOCAL, f"`{code}` (by its name, the local rank)")
        if name in ("rank", "global_rank", "world_rank"):
            return Origin(GLOBAL, f"`{code}` (by its name, the global rank)")
        if attribute:
            return Origin(UNKNOWN, f"`{code}` (a configuration value)")
        return Origin(UNKNOWN, f"`{code}`")


def _param_names(params: cst.Parameters) -> set[str]:
    out = {p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)}
    return out | {p.name.value for p in (params.star_arg, params.star_kwarg) if isinstance(p, cst.Param)}


def _verdict(origins: list[Origin], device: str, named: bool) -> Verdict:
    """Join the values a pick can take: the same GPU only when each is LOCAL_RANK, a break only
    when each is one, else maybe (``device``: the pick's argument, ``named``: a name or attribute)."""
    seen = list(dict.fromkeys(origins))
    if any(o.kind != FIXED0 for o in seen):
        seen = [o for o in seen if o.kind != FIXED0]  # 0 next to a rank: the lone-process default
    kinds = [o.kind for o in seen]
    whats = [o.what.replace(f"{device} (", "the value passed in (", 1) if len(seen) > 1 else o.what for o in seen]
    what = " or ".join(whats[:3]) + (" or more" if len(seen) > 3 else "")
    if named and (len(seen) > 1 or not what.startswith((device, "the "))):
        what = f"{device} = {what}"
    short = seen[0].what.partition(" (")[0].removeprefix("the ").removesuffix(" variable") if len(seen) == 1 else device
    if all(k == LOCAL for k in kinds):
        return Verdict(True, what, short, "")
    if all(k == BREAK for k in kinds):
        return Verdict(False, what, short, seen[0].why)
    return Verdict(None, what, short, "; ".join(_WHEN[k] for k in dict.fromkeys(kinds) if k in _WHEN))


def judge(a: Analyzer, device: cst.BaseExpression, at: Path, init: cst.Call | None) -> Verdict:
    """Where ``device`` (a GPU pick's argument; ``at``: the pick and the nodes around it) comes
    from, for ``init`` (given when the pick is in the init's function)."""
    origins = _Resolver(a, rank_arg(init) if init is not None else None).origins(device, at) or [
        Origin(UNKNOWN, f"`{a.code(device).strip()}`")]
    return _verdict(origins, f"`{a.code(device).strip()}`", isinstance(device, (cst.Name, cst.Attribute)))
