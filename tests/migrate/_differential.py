"""The differential harness for safe fixes (see test_safe_differential.py and docs/migrate.md).

A fixture and its safe-only rewrite are run, for real, under a matrix of inherited
environments; what torch would read (``getCvar*``: the NEW name if set, else the OLD
one) and what every child process is given must come out the same.

Python: one driver process per side forks a child per environment; the child replaces
its environment, runs the module's code with ``runpy`` (module level, then every
module-level function, each required positional argument given ``1``; what one raises is
part of the observation), and reports.  ``subprocess`` spawns and
``os.exec*`` are stubbed to record the environment the child would get (the ``env=``
mapping, else the process's C-level environment, read with ``getenv``), and ``import
torch*`` gets a permissive stub, so that no process group is created.  The observation is
also taken at the end (C-level environment, so ``os.putenv`` counts).

Shell: real ``bash`` runs the script with ``PATH`` pointing nowhere and a
``command_not_found_handle`` (from ``BASH_ENV``) that records every external command with
the variables bash exports to it (``compgen -e``, prefix assignments included).  ``env``, ``docker/podman run -e/--env``, ``mpirun -x`` and ``srun --export``
are then applied to it, since their arguments are environment for the job they start.
The shell's exported environment is recorded once more at exit (a sourced script).
"""

from __future__ import annotations

import difflib
import itertools
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

from ncclx_migrate._torch.envvars import ENV_VARS, TOGGLE_VAR, EnvKind

# (new, old) pairs torch reads new-then-old, and single names read on their own.
PAIRS = [(v.replacement, v.name) for v in ENV_VARS
         if v.replacement and v.kind is EnvKind.DEPRECATED]
SINGLES = [TOGGLE_VAR] + [v.name for v in ENV_VARS if v.kind is EnvKind.IGNORED]

Env = dict[str, str]
Observation = list[tuple[str, dict[str, object]]]


def involved(*texts: str) -> list[str]:
    """Every table name (both names of a pair) that the texts mention (the harness passes
    the lines a fix changed)."""
    names: list[str] = []
    for new, old in PAIRS:
        if any(old in t or new in t for t in texts):
            names += [old, new]
    names += [n for n in SINGLES if any(n in t for t in texts) and n not in names]
    return names


def changed(before: str, after: str) -> str:
    """The lines a fix changed (either side): the names there are the ones it touches."""
    a, b = before.splitlines(), after.splitlines()
    out = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag != "equal":
            out += a[i1:i2] + b[j1:j2]
    return "\n".join(out)


def matrix(names: list[str]) -> list[Env]:
    """Each name unset or set to its own value; the full product up to 4 names, else per
    pair all four combinations with the others unset and with the others set."""
    values = {n: str(9001 + k) for k, n in enumerate(names)}
    if TOGGLE_VAR in values:
        values[TOGGLE_VAR] = "0"  # the one value that changes what torch builds
    if len(names) <= 4:
        return [{n: values[n] for n, on in zip(names, bits, strict=True) if on}
                for bits in itertools.product((False, True), repeat=len(names))]
    envs: list[Env] = []
    groups = [[o, n] for n, o in PAIRS if o in names] + [[s] for s in SINGLES if s in names]
    for group in groups:
        rest = [n for n in names if n not in group]
        for bits in itertools.product((False, True), repeat=len(group)):
            mine = {n: values[n] for n, on in zip(group, bits, strict=True) if on}
            envs.append(mine)
            envs.append({**mine, **{n: values[n] for n in rest}})
    return envs


def torch_reads(env: dict[str, str], names: Iterable[str]) -> dict[str, object]:
    """What torch reads from ``env``: per pair NEW if set else OLD (plus OLD on its own,
    which the legacy backend reads alone); single names as they are."""
    out: dict[str, object] = {}
    names = set(names)
    for new, old in PAIRS:
        if old in names:
            out[f"{new}|{old}"] = env.get(new, env.get(old))
            out[old] = env.get(old)
    for n in SINGLES:
        if n in names:
            v = env.get(n)
            out[n] = "rollback" if (n == TOGGLE_VAR and v == "0") else (None if n == TOGGLE_VAR else v)
    return out


# ---------------------------------------------------------------------------- Python
_DRIVER = r'''
import ctypes, importlib.abc, importlib.machinery, json, os, runpy, subprocess, sys, types

path, names, envs = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
libc = ctypes.CDLL(None)
libc.getenv.restype = ctypes.c_char_p

def c_env():
    out = {}
    for n in names:
        v = libc.getenv(n.encode())
        if v is not None:
            out[n] = v.decode()
    return out

class _Meta(type):
    def __getattr__(cls, n): return _make(n)
def _make(n): return _Meta(n, (_Any,), {})
class _Any:
    def __init__(self, *a, **k): pass
    def __getattr__(self, n): return _make(n)()
    def __call__(self, *a, **k): return _make("result")()
    def __iter__(self): return iter(())
    def __enter__(self): return self
    def __exit__(self, *a): return False
class _Stub(types.ModuleType):
    __path__ = []
    def __getattr__(self, n):
        if n.startswith("__"): raise AttributeError(n)
        return _make(n)
class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, p, t=None):
        if name == "torch" or name.startswith("torch."):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
    def create_module(self, spec): return _Stub(spec.name)
    def exec_module(self, m): pass

def run_one(env):
    seen = []
    def record(kind, child_env):
        seen.append([kind, {n: child_env[n] for n in names if n in child_env}])
    def spawn(*a, env=None, **k):
        record("child", dict(env) if env is not None else c_env())
        return subprocess.CompletedProcess(a, 0, b"", b"")
    for n in ("run", "call", "check_call", "check_output", "Popen"):
        setattr(subprocess, n, spawn)
    for n in ("execv", "execve", "execvp", "execvpe"):
        setattr(os, n, lambda *a: record("exec", dict(a[-1]) if n.endswith("e") else c_env()))
    sys.meta_path.insert(0, _Finder())
    os.environ.clear()
    os.environ.update(env)
    outcome = "ok"
    try:
        g = runpy.run_path(path, run_name="__ncclx_fixture__")
        for v in list(g.values()):
            code = getattr(v, "__code__", None)
            if getattr(v, "__module__", None) != "__ncclx_fixture__" or code is None:
                continue
            if code.co_kwonlyargcount > len(v.__kwdefaults__ or {}):
                continue
            try:
                v(*[1] * (code.co_argcount - len(v.__defaults__ or ())))
            except BaseException as e:
                seen.append(["raised", {"in": v.__name__, "type": type(e).__name__}])
    except BaseException as e:
        outcome = type(e).__name__
    record("end", c_env())
    return [outcome, seen]

results = []
for env in envs:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            data = json.dumps(run_one(env)).encode()
        except BaseException as e:
            data = json.dumps(["driver " + type(e).__name__, []]).encode()
        with os.fdopen(w, "wb") as f:
            f.write(data)
        os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        results.append(json.loads(f.read() or b'["no result", []]'))
    os.waitpid(pid, 0)
print(json.dumps(results))
'''


def run_python(source: str, names: list[str], envs: list[Env]) -> list[object]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "fixture_module.py"
        path.write_text(source, encoding="utf-8")
        proc = subprocess.run(
            [sys.executable, "-c", _DRIVER, str(path), json.dumps(names), json.dumps(envs)],
            capture_output=True, text=True, cwd=tmp, timeout=120,
            env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": os.environ.get("PYTHONPATH", "")},
        )
    assert proc.returncode == 0, proc.stderr
    out: list[object] = []
    for outcome, seen in json.loads(proc.stdout):
        out.append([outcome, [(kind, e if kind == "raised" else torch_reads(e, names))
                              for kind, e in seen]])
    return out


# ----------------------------------------------------------------------------- shell
_BASH_ENV = r'''
__ncclx_record() {
  local n
  { printf 'CMD\0%s\0' "$#"; printf '%s\0' "$@"
    for n in $(compgen -e); do  # exported now, prefix assignments included
      case " $NCCLX_NAMES " in *" $n "*) printf '%s=%s\0' "$n" "${!n}";; esac
    done
    printf 'END\0'; } >>"$NCCLX_LOG"
}
command_not_found_handle() { __ncclx_record "$@"; return 0; }
trap '__ncclx_record "(exit)"' EXIT
'''


def _child_env(argv: list[str], env: Env) -> Env:
    """Apply what ``env`` / container and MPI launchers put in their job's environment."""
    env = dict(env)
    if not argv:
        return env
    if argv[0] == "env":
        for a in argv[1:]:
            if a in ("-i", "-", "--ignore-environment"):
                env = {}
            elif "=" in a and not a.startswith("-"):
                k, v = a.split("=", 1)
                env[k] = v
            elif not a.startswith("-"):
                break
        return env
    for k, a in enumerate(argv):
        item = None
        if a in ("-e", "--env", "-x") and k + 1 < len(argv):
            item = argv[k + 1]
        elif a.startswith("--env="):
            item = a[len("--env="):]
        elif a.startswith("--export="):
            for part in a[len("--export="):].split(","):
                if "=" in part:
                    n, v = part.split("=", 1)
                    env[n] = v
        if item is not None and "=" in item:
            n, v = item.split("=", 1)
            env[n] = v
    return env


def run_shell(script: str, names: list[str], envs: list[Env]) -> list[object]:
    out: list[object] = []
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "script.sh").write_text(script, encoding="utf-8")
        Path(tmp, "bash_env.sh").write_text(_BASH_ENV, encoding="utf-8")
        log = Path(tmp, "log")
        for env in envs:
            log.write_bytes(b"")
            proc = subprocess.run(
                ["/bin/bash", "script.sh"], cwd=tmp, stdin=subprocess.DEVNULL,
                capture_output=True, timeout=30,
                env={**env, "BASH_ENV": "bash_env.sh", "PATH": "/nonexistent", "NCCLX_LOG": str(log),
                     "NCCLX_NAMES": " ".join(names)},
            )
            parts = log.read_bytes().split(b"\0")
            assert parts[0] == b"CMD", f"nothing recorded: {proc.stderr!r}"  # the exit trap always runs
            seen = []
            k = 0
            while k < len(parts) - 1:
                assert parts[k] == b"CMD", parts[k]
                argc = int(parts[k + 1])
                argv = [p.decode() for p in parts[k + 2 : k + 2 + argc]]
                k += 2 + argc
                child: Env = {}
                while parts[k] != b"END":
                    n, _, v = parts[k].decode().partition("=")
                    child[n] = v
                    k += 1
                k += 1
                seen.append((argv[:1], torch_reads(_child_env(argv, child), names)))
            out.append([proc.returncode, seen])
    return out
