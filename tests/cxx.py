"""Compile C++ against the real torch headers of this project's venvs (``g++ -fsyntax-only``).

One toolchain per torch release: 2.15 (``.venv``, C++20), 2.14 (``.venv-2.14``, C++20) and 2.13
(``.venv-2.13``, C++17); ``NCCLX_TEST_PY215``/``NCCLX_TEST_PY214``/``NCCLX_TEST_PY213`` name
another interpreter. The CUDA and NCCL headers come from the 2.15 venv's NVIDIA wheels (the 2.13
CPU wheel has none), the ``crt/`` headers those wheels lack from PyPI's header-only
``nvidia-cuda-crt`` 13.2 wheel (``scripts/bootstrap.sh`` downloads it into ``.whl/``), and the one
generated header the 2.13 CPU wheel lacks is written here (see
docs/torch-versions.md, "C++ extensions"). Everything prepared lives in the git-ignored
``.cache/cxx/``. Where something is missing, ``toolchain()`` returns the reason to skip with.

A translation unit with the c10d headers costs 20-30 s of CPU, and a precompiled header of them
is 900 MB and still 10 s a use; so ``compile_sources`` puts many cases in ONE translation unit:
a prelude of the torch/c10d headers (and ``<ncclx/compat.h>``), then each case inside its own
``namespace ncclx_case_N { #line 1 "path" ... }`` with its ``#define``\\s undone after it (a
case that reopens a namespace of the headers, ``namespace c10d {``, stays at global scope, last
in its unit, one such case a unit). A case passes when no error is reported in its file; a case
with an error is compiled again alone (its own verdict, no prelude), and the rest again without
it, until a unit passes: on a cold cache each such retry costs a whole unit, so a fixture that
fails only inside the unit is a harness bug to fix, not a cost to pay. Passing cases are
remembered under ``.cache/cxx/ok/`` by a hash of the compiler, flags, prelude and text.
Limitations of one unit: a case sees the prelude's headers, so a missing ``#include`` of a
header the prelude has is not caught; and g++ 12 takes an ``#include`` of a header that an
earlier ``__has_include`` did not find as an empty file (GCC PR 80753), so on 2.13, after
``<ncclx/compat.h>`` probed for nccl2's header, a case that includes it without a guard fails
only where it uses its names (hoisting below therefore never uses ``__has_include``).

Command line (debugging a fixture): ``python tests/cxx.py [--release 2.13] FILE...``.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".cache" / "cxx"
SHIPPED_INCLUDE = ROOT / "src" / "ncclx_migrate" / "backend" / "include"
CRT_WHEEL_GLOB = "nvidia_cuda_crt-13.2*.whl"
CRT_SPEC = "nvidia-cuda-crt>=13.2,<13.3"
NCCL2_HEADER = "torch/csrc/distributed/c10d/nccl2/ProcessGroupNCCL.hpp"
# (release, env var naming its python, venv dir, C++ standard)
RELEASES = {
    "2.15": ("NCCLX_TEST_PY215", ".venv", "c++20"),
    "2.14": ("NCCLX_TEST_PY214", ".venv-2.14", "c++20"),
    "2.13": ("NCCLX_TEST_PY213", ".venv-2.13", "c++17"),
}
PRELUDE = f"""\
#include <torch/extension.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#if __has_include(<{NCCL2_HEADER}>)
#include <{NCCL2_HEADER}>
#include <torch/csrc/distributed/c10d/nccl2/ProcessGroupNCCLLazy.hpp>
#endif
#include <ncclx/compat.h>
"""
# First-line markers of a fixture (tests/fixtures/files/cpp): never compiled / only on 2.15.
NO_COMPILE = "// ncclx-test: no-compile:"
ONLY_215 = "// ncclx-test: compile-2.15-only:"
HARNESS_FILE = "<ncclx-cxx-harness>"
TIMEOUT_S = 600

_INCLUDE = re.compile(r"^[ \t]*#[ \t]*include[ \t]*([<\"][^>\"\n]+[>\"])", re.M)
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)", re.M)
_PYMODULE = re.compile(r"\bPYBIND11_MODULE[ \t]*\([ \t]*(\w+)")
# A case that opens one of the headers' namespaces (``namespace c10d {``) must stay at global
# scope: inside ``ncclx_case_N`` it would declare a new ``ncclx_case_N::c10d`` that hides
# ``::c10d`` from every ``c10d::`` name after it, an error the case alone does not have.
_REOPENS = re.compile(r"^[ \t]*(?:inline[ \t]+)?namespace[ \t]+(?:c10d|c10|at|torch|std|pybind11|ncclx)\b", re.M)
GLOBAL_SCOPE = "<global scope>"  # a _groups name: at most one such case per unit


@dataclass(frozen=True)
class Toolchain:
    release: str  # "2.15"
    torch_version: str  # "2.15.0+cu132"
    python: str
    flags: tuple[str, ...]  # everything but the source file

    def key(self, *parts: str) -> str:
        h = hashlib.sha256("\0".join([_gxx_version(), self.torch_version, *self.flags, *parts]).encode())
        return h.hexdigest()[:32]


@dataclass(frozen=True)
class Verdict:
    ok: bool
    output: str  # the compiler's diagnostics for this case (errors only: -w)
    alone: bool = False  # compiled in its own unit


def _run(cmd: Sequence[str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout, check=False)


_GXX: list[str] = []


def _gxx_version() -> str:
    if not _GXX:
        _GXX.append(_run(["g++", "--version"]).stdout.splitlines()[0] if shutil.which("g++") else "")
    return _GXX[0]


def python_for(release: str) -> str:
    var, venv, _ = RELEASES[release]
    return os.environ.get(var) or str(ROOT / venv / "bin" / "python")


_PROBE = """\
import importlib.metadata as m, importlib.util as u, json, os, sysconfig
s = u.find_spec("torch")
d = os.path.dirname(s.origin) if s and s.origin else None
try:
    v = m.version("torch")
except m.PackageNotFoundError:
    v = None
print(json.dumps({"torch": d, "version": v, "site": os.path.dirname(d) if d else None,
                  "pyinclude": sysconfig.get_paths()["include"]}))
"""


def _venv_facts(python: str) -> dict[str, str | None] | str:
    """Where a venv's torch and Python.h are (no torch import), or why not."""
    if not os.path.exists(python):
        return f"{python} does not exist (scripts/bootstrap.sh creates it)"
    try:
        proc = _run([python, "-c", _PROBE])
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{python} could not run: {exc}"
    if proc.returncode != 0:
        return f"{python} failed: {proc.stderr.strip().splitlines()[-1:]}"
    facts: dict[str, str | None] = json.loads(proc.stdout)
    if not facts["torch"] or not facts["version"]:
        return f"{python} has no torch"
    return facts


def crt_include() -> Path | str:
    """The nvidia-cuda-crt headers, unzipped from .whl/ into .cache/cxx/ on first use."""
    wheels = sorted(glob.glob(str(ROOT / ".whl" / CRT_WHEEL_GLOB)))
    if not wheels:
        return (f"the nvidia-cuda-crt 13.2 headers are missing: run scripts/bootstrap.sh (or pip download "
                f"--no-deps '{CRT_SPEC}' -d .whl)")
    wheel = Path(wheels[-1])
    dest = CACHE / wheel.name.split("-py3")[0]
    include = dest / "nvidia" / "cu13" / "include"
    if not (include / "crt" / "host_config.h").is_file():
        tmp = dest.with_name(dest.name + f".tmp{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        with zipfile.ZipFile(wheel) as zf:
            zf.extractall(tmp, [n for n in zf.namelist() if n.startswith("nvidia/")])
        shutil.rmtree(dest, ignore_errors=True)
        tmp.rename(dest)
    return include


def generated_include() -> Path:
    """c10/cuda/impl/cuda_cmake_macros.h, generated at build time and absent from CPU wheels.

    Passed with -idirafter: a wheel that has its own copy wins.
    """
    path = CACHE / "generated" / "c10" / "cuda" / "impl" / "cuda_cmake_macros.h"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n")
    return CACHE / "generated"


_TOOLCHAINS: dict[str, Toolchain | str] = {}


def toolchain(release: str) -> Toolchain | str:
    """The flags to compile against ``release``'s torch headers, or the reason it cannot."""
    if release not in _TOOLCHAINS:
        _TOOLCHAINS[release] = _toolchain(release)
    return _TOOLCHAINS[release]


def _toolchain(release: str) -> Toolchain | str:
    if not shutil.which("g++"):
        return "g++ is not installed (apt-get install g++)"
    facts = _venv_facts(python_for(release))
    if isinstance(facts, str):
        return f"torch {release}: {facts}"
    if not (facts["version"] or "").startswith(release + "."):
        return f"torch {release}: {python_for(release)} has torch {facts['version']}"
    host = _venv_facts(python_for("2.15")) if release != "2.15" else facts
    if isinstance(host, str):
        return f"the CUDA/NCCL headers come from torch 2.15's venv: {host}"
    nvidia = Path(host["site"] or "") / "nvidia"
    cuda, nccl = nvidia / "cu13" / "include", nvidia / "nccl" / "include"
    if not (cuda / "cuda_runtime.h").is_file() or not (nccl / "nccl.h").is_file():
        return f"no CUDA/NCCL headers under {nvidia} (the torch 2.15 CUDA wheel's nvidia-* packages)"
    crt = crt_include()
    if isinstance(crt, str):
        return crt
    pyinclude = facts["pyinclude"] or ""
    if not os.path.isfile(os.path.join(pyinclude, "Python.h")):
        return f"Python.h is missing from {pyinclude} (install the Python development headers)"
    torch_include = Path(facts["torch"] or "") / "include"
    std = RELEASES[release][2]
    flags = (
        f"-std={std}", "-fsyntax-only", "-w", "-DUSE_C10D_NCCL",
        "-I", str(SHIPPED_INCLUDE),
        "-I", str(torch_include), "-I", str(torch_include / "torch" / "csrc" / "api" / "include"),
        "-I", str(cuda), "-I", str(crt), "-I", str(nccl), "-I", pyinclude,
        "-idirafter", str(generated_include()),
    )
    return Toolchain(release, facts["version"] or "", python_for(release), flags)


def marker(source: Path) -> tuple[str, str] | None:
    """("no-compile" | "compile-2.15-only", reason) from a fixture's first line."""
    with open(source, encoding="utf-8", errors="replace") as fh:
        first = fh.readline().strip()
    for prefix in (NO_COMPILE, ONLY_215):
        if first.startswith(prefix):
            return prefix[len("// ncclx-test: "):-1], first[len(prefix):].strip()
    return None


def compiles_on(source: Path, release: str) -> bool:
    mark = marker(source)
    if mark is None:
        return True
    return mark[0] == "compile-2.15-only" and release == "2.15"


def at_global_scope(text: str) -> bool:
    return _REOPENS.search(text) is not None


def _case_text(index: int, source: Path, text: str) -> str:
    undo = "".join(f"#undef {name}\n" for name in dict.fromkeys(_DEFINE.findall(text)))
    body = f"#line 1 \"{source}\"\n{text}\n#line 1 \"{HARNESS_FILE}\"\n"
    if not at_global_scope(text):
        body = f"namespace ncclx_case_{index} {{\n{body}}}\n"
    return f"#define TORCH_EXTENSION_NAME ncclx_case_{index}_ext\n{body}{undo}#undef TORCH_EXTENSION_NAME\n"


_SYSTEM_DIRS: list[Path] = []


def _system_dirs() -> list[Path]:
    """g++'s own <...> search list (libstdc++, /usr/include)."""
    if not _SYSTEM_DIRS:
        out = _run(["g++", "-xc++", "-E", "-v", "/dev/null"]).stderr
        block = out.split("#include <...> search starts here:", 1)[-1].split("End of search list.", 1)[0]
        _SYSTEM_DIRS.extend(Path(line.strip()) for line in block.splitlines() if line.strip())
    return _SYSTEM_DIRS


def _include_dirs(flags: Sequence[str]) -> list[Path]:
    return [Path(flags[i + 1]) for i, f in enumerate(flags[:-1]) if f in ("-I", "-idirafter")]


def _exists(spelled: str, case_dir: Path, dirs: Sequence[Path]) -> bool:
    name = spelled[1:-1]
    where = [case_dir, *dirs] if spelled.startswith('"') else dirs
    return any((d / name).is_file() for d in where)


def unit_text(sources: Sequence[Path], texts: dict[Path, str], prelude: str = PRELUDE,
              flags: Sequence[str] = ()) -> str:
    """One translation unit: the prelude, every case's includes hoisted, then the cases.

    Only includes that exist are hoisted, found here rather than by __has_include: g++ 12 then
    takes a later #include of a header that __has_include did not find as an empty file (GCC
    PR 80753), and a case's missing header must stay an error.
    """
    dirs = [*_include_dirs(flags), *_system_dirs()]
    hoisted = dict.fromkeys(inc for s in sources for inc in _INCLUDE.findall(texts[s])
                            if _exists(inc, s.parent, dirs))
    head = "".join(f"#include {inc}\n" for inc in hoisted)
    # A case at global scope goes last, so no other case sees its names.
    order = sorted(enumerate(sources), key=lambda item: at_global_scope(texts[item[1]]))
    return prelude + head + "".join(_case_text(i, s, texts[s]) for i, s in order)


def _compile(tc: Toolchain, source: Path, quote_dirs: Sequence[Path] = ()) -> tuple[bool, str]:
    quotes = [arg for d in dict.fromkeys(quote_dirs) for arg in ("-iquote", str(d))]
    try:
        proc = _run(["g++", *tc.flags, *quotes, "-x", "c++", str(source)], timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return False, f"{source}: error: g++ ran past {TIMEOUT_S}s"
    return proc.returncode == 0, proc.stderr


def _stamp(key: str) -> Path:
    return CACHE / "ok" / key


def _remember(key: str) -> None:
    _stamp(key).parent.mkdir(parents=True, exist_ok=True)
    _stamp(key).touch()


def _groups(sources: Sequence[Path], texts: dict[Path, str]) -> list[list[Path]]:
    """Cases split so no two in one unit define the same PYBIND11_MODULE (an extern "C" name)
    or stand at global scope (their names could clash)."""
    groups: list[tuple[set[str], list[Path]]] = []
    for s in sources:
        names = set(_PYMODULE.findall(texts[s])) - {"TORCH_EXTENSION_NAME"}
        if at_global_scope(texts[s]):
            names.add(GLOBAL_SCOPE)
        for taken, members in groups:
            if not names & taken:
                taken |= names
                members.append(s)
                break
        else:
            groups.append((set(names), [s]))
    return [members for _, members in groups]


def _shipped_header() -> str:
    return "".join(p.read_text() for p in sorted(SHIPPED_INCLUDE.rglob("*.h")))


def compile_sources(tc: Toolchain, sources: Sequence[Path], prelude: str = PRELUDE) -> dict[Path, Verdict]:
    """A verdict for each source: compiled in as few units as their errors allow."""
    texts = {s: Path(s).read_text(encoding="utf-8", errors="replace") for s in sources}
    shipped = _shipped_header()
    keys = {s: tc.key(prelude, shipped, str(s), texts[s]) for s in sources}
    verdicts = {s: Verdict(True, "") for s in sources if _stamp(keys[s]).exists()}
    todo = [s for s in sources if s not in verdicts]
    pending = _groups(todo, texts)
    while pending:
        group = pending.pop(0)
        if not group:
            continue
        unit = CACHE / "units" / f"{tc.release}-{tc.key('unit', *map(str, group))[:16]}.cpp"
        unit.parent.mkdir(parents=True, exist_ok=True)
        unit.write_text(unit_text(group, texts, prelude, tc.flags))
        ok, output = _compile(tc, unit, [s.parent for s in group])
        if ok:
            for s in group:
                verdicts[s] = Verdict(True, "")
                _remember(keys[s])
            continue
        # With -w every diagnostic belongs to an error ("required from here", "In file
        # included from" and notes name the case behind an error inside a header).
        blamed = [s for s in group if f"{s}:" in output]
        if not blamed:  # the prelude or the harness: nothing to single out
            for s in group:
                verdicts[s] = Verdict(False, output)
            continue
        for s in blamed:
            alone_ok, alone_out = _compile(tc, s)
            verdicts[s] = Verdict(alone_ok, alone_out, alone=True)
            if alone_ok:
                _remember(keys[s])
        pending.insert(0, [s for s in group if s not in blamed])
    return {s: verdicts[s] for s in sources}


def compile_jobs(jobs: dict[str, tuple[Toolchain | str, Sequence[Path], str]],
                 ) -> dict[str, dict[Path, Verdict] | str]:
    """compile_sources for several (toolchain, sources, prelude) jobs, two g++ at a time (this
    machine's cores); a job whose toolchain is a reason to skip gets that reason instead."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {name: pool.submit(compile_sources, tc, list(files), prelude)
                   for name, (tc, files, prelude) in jobs.items() if isinstance(tc, Toolchain)}
        return {name: futures[name].result() if name in futures else str(job[0])
                for name, job in jobs.items()}


def compile_releases(jobs: dict[str, Sequence[Path]]) -> dict[str, dict[Path, Verdict] | str]:
    """compile_jobs with each release's toolchain."""
    return compile_jobs({rel: (toolchain(rel), files, PRELUDE) for rel, files in jobs.items()})


def extension_flags() -> list[str] | str:
    """g++ flags to build a real extension against THIS interpreter's torch (a CUDA build), as
    torch.utils.cpp_extension.CUDAExtension would with ``define_macros=[("USE_C10D_NCCL", None)]``
    and ``include_dirs=[ncclx_migrate.backend.get_include()]``; or why it cannot."""
    if not shutil.which("g++"):
        return "g++ is not installed (apt-get install g++)"
    try:
        import torch
        from torch.utils import cpp_extension
    except ImportError as exc:
        return f"torch is not importable: {exc}"
    if torch.version.cuda is None:
        return f"torch {torch.__version__} is not a CUDA build (no libtorch_cuda to link)"
    import sysconfig

    site = Path(torch.__file__).parent.parent
    cuda_dirs = [site / "nvidia" / "cu13" / "include", site / "nvidia" / "cuda_runtime" / "include"]
    home = os.environ.get("CUDA_HOME") or "/usr/local/cuda"
    cuda_dirs.append(Path(home) / "include")
    cuda = next((d for d in cuda_dirs if (d / "cuda_runtime.h").is_file()), None)
    if cuda is None:
        return f"no cuda_runtime.h in {', '.join(map(str, cuda_dirs))}"
    if not (cuda / "nv" / "target").is_file():  # CCCL, which cuda_fp16.h includes
        return (f"the CUDA headers in {cuda} (torch {torch.__version__}) lack <nv/target>: "
                "real extensions are built on the torch whose CUDA wheels ship it (2.15)")
    includes = [str(SHIPPED_INCLUDE), *cpp_extension.include_paths(), str(cuda)]
    if not (cuda / "crt" / "host_config.h").is_file():
        crt = crt_include()
        if isinstance(crt, str):
            return crt
        includes.append(str(crt))
    nccl = next((d for d in (site / "nvidia" / "nccl" / "include", cuda) if (d / "nccl.h").is_file()), None)
    if nccl is None:
        return f"no nccl.h under {site / 'nvidia'} or {cuda}"
    includes += [str(nccl), sysconfig.get_paths()["include"]]
    minor = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2])
    abi = int(torch._C._GLIBCXX_USE_CXX11_ABI)
    libs = cpp_extension.library_paths()
    return [
        f"-std={'c++20' if minor >= (2, 14) else 'c++17'}", "-O0", "-shared", "-fPIC", "-w",
        "-DUSE_C10D_NCCL", "-DTORCH_API_INCLUDE_EXTENSION_H", f"-D_GLIBCXX_USE_CXX11_ABI={abi}",
        *(f"-I{d}" for d in includes), "-idirafter", str(generated_include()),
        *(f"-L{d}" for d in libs), *(f"-Wl,-rpath,{d}" for d in libs),
        "-lc10", "-ltorch", "-ltorch_cpu", "-ltorch_python", "-ltorch_cuda",
    ]


def build_extension(source: Path, out_dir: Path, name: str) -> Path | str:
    """Build ``source`` into ``out_dir/name.so`` (module name ``name``), or say why not."""
    flags = extension_flags()
    if isinstance(flags, str):
        return flags
    out = out_dir / f"{name}.so"
    proc = _run(["g++", f"-DTORCH_EXTENSION_NAME={name}", str(source), *flags, "-o", str(out)],
                timeout=TIMEOUT_S)
    if proc.returncode != 0:
        raise AssertionError(f"building {source} failed:\n{proc.stderr[-6000:]}")
    return out


def main(argv: Sequence[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--release", action="append", choices=sorted(RELEASES))
    parser.add_argument("files", nargs="+", type=Path)
    args = parser.parse_args(argv)
    files = [f.resolve() for f in args.files]
    status = 0
    releases = args.release or ["2.15", "2.13"]
    for f in files:
        for rel in releases:
            if not compiles_on(f, rel):
                print(f"torch {rel}: skipped ({' '.join(marker(f) or ())}) {f}")
    jobs = {rel: [f for f in files if compiles_on(f, rel)] for rel in releases}
    for rel, result in compile_releases(jobs).items():
        if isinstance(result, str):
            print(f"torch {rel}: skipped: {result}")
            continue
        for path, verdict in result.items():
            print(f"torch {rel}: {'ok' if verdict.ok else 'FAIL'} {path}")
            if not verdict.ok:
                status = 1
                print(verdict.output)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
