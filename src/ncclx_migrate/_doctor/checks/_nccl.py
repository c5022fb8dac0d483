"""nccl-version, rccl-version, fast-reconfigure."""

from __future__ import annotations

import re
from importlib import metadata

from ..._torch import probe as ti
from ..._torch.envvars import SHRINK_GROW_VAR, TOGGLE_VAR
from ..._torch.releases import (
    NCCL_FLOOR,
    NCCL_RECONFIGURE_MIN,
    NCCL_SHRINK_GROW_MIN,
    RCCL_RECONFIGURE_MIN,
)
from .._facts import NEEDS_TORCH, Facts
from .._model import CheckResult, Status

V = ti.format_version


def torch_nccl_pin() -> tuple[str, tuple[int, ...]] | None:
    """(package, version) of the NCCL wheel torch pins in its metadata, without importing it."""
    try:
        requires = metadata.requires("torch") or []
    except metadata.PackageNotFoundError:
        return None
    for req in requires:
        m = re.match(r"\s*(nvidia-nccl-cu\d+)\s*==\s*([\d.]+)", req)
        if m:
            return m.group(1), tuple(int(p) for p in m.group(2).split(".")[:3])
    return None


def _is_rocm(f: Facts) -> bool:
    if f.flavor == "rocm":
        return True
    top = f.libraries[0] if f.libraries else None
    # An explicit librccl (override or LD_PRELOAD) says the job runs RCCL.
    return bool(top and top.kind == "rccl" and top.source in (ti.NCCL_LIBRARY_VAR, "LD_PRELOAD"))


def nccl_version(f: Facts) -> CheckResult:
    cid = "nccl-version"
    if _is_rocm(f):
        return CheckResult(cid, Status.SKIP, "ROCm: the collective library is RCCL (see rccl-version)")
    floor = V(NCCL_FLOOR)
    if f.build is not None:
        return _nccl_runtime(f, cid, floor)
    fact = f.library_fact("nccl")
    pin = torch_nccl_pin()
    details: dict[str, object] = {
        "candidates": [{"path": c.path, "kind": c.kind, "source": c.source} for c in f.libraries],
        "pinned": f"{pin[0]}=={V(pin[1])}" if pin else None,
        "floor": floor,
    }
    if fact is None:
        if f.flavor == "cpu" or (f.flavor is None and f.torch_version is None):
            return CheckResult(cid, Status.SKIP, "no NCCL library and no CUDA torch here", "", details)
        want = f"pip install {pin[0]}=={V(pin[1])}" if pin else "install the NCCL your torch needs"
        return CheckResult(
            cid, Status.WARN,
            "no libnccl found (NCCLX_NCCL_LIBRARY, LD_PRELOAD, nvidia-nccl-cu* packages, "
            "LD_LIBRARY_PATH, system directories)",
            want, details,
        )
    c = fact.candidate
    details.update(library=c.path, source=c.source)
    if fact.version is None:
        return CheckResult(
            cid, Status.FAIL, f"libnccl at {c.path} ({c.source}) cannot be asked its version: {fact.error}",
            "fix or remove that library (a job loading it will fail); NCCLX_NCCL_LIBRARY=PATH "
            "points the doctor at the one the job uses",
            details,
        )
    details["runtime"] = V(fact.version)
    msg = f"NCCL {V(fact.version)} at {c.path} ({c.source})"
    if fact.version < NCCL_FLOOR:
        return CheckResult(
            cid, Status.FAIL, msg + f"; older than the {floor} floor torch needs (pytorch#186292)",
            f"load NCCL >= {floor}: pip install {pin[0]}=={V(pin[1])}" if pin else f"install NCCL >= {floor}",
            details,
        )
    if pin and pin[1] != fact.version:
        return CheckResult(
            cid, Status.WARN,
            msg + f"; torch {f.torch_version} pins {pin[0]}=={V(pin[1])}",
            f"make the job load the pinned NCCL (pip install {pin[0]}=={V(pin[1])}; take {c.path} out of "
            f"{c.source}), or keep it deliberately",
            details,
        )
    return CheckResult(cid, Status.OK, msg + f"; floor {floor}", "", details)


def _nccl_runtime(f: Facts, cid: str, floor: str) -> CheckResult:
    build, runtime, loaded = f.build_nccl, f.runtime_nccl, f.loaded_nccl
    origin = f.nccl_origin
    details: dict[str, object] = {
        "build": V(build) if build else None,
        "runtime": V(runtime) if runtime else None,
        "library": origin,
        "loaded": loaded,
        "floor": floor,
    }
    if build is None and runtime is None:
        if f.build is not None and not f.build.nccl_available:
            return CheckResult(cid, Status.SKIP, f"torch {f.torch_version} is a {f.flavor} build without NCCL",
                               "", details)
        return CheckResult(cid, Status.WARN, "torch has NCCL but reports no NCCL version",
                           "check the torch install (python -c 'import torch.cuda.nccl as n; print(n.version())')",
                           details)
    where = f" from {origin}" if origin else f" from {loaded[0]}" if loaded else ""
    if runtime is None:
        return CheckResult(
            cid, Status.WARN,
            f"build-time NCCL {V(build)}; the loaded version is unknown (no ProcessGroupNCCL.get_runtime_nccl_version)",
            "", details,
        )
    msg = f"NCCL {V(runtime)} loaded{where}; torch was built against {V(build)}"
    if runtime[:3] < NCCL_FLOOR:
        return CheckResult(
            cid, Status.FAIL, msg + f"; older than the {floor} floor (pytorch#186292)",
            f"load NCCL >= {floor}: remove the old libnccl from LD_PRELOAD/LD_LIBRARY_PATH or reinstall "
            "the nvidia-nccl wheel torch pins",
            details,
        )
    if build is not None and runtime[:3] < build[:3]:
        return CheckResult(
            cid, Status.WARN,
            msg + "; the loaded library is OLDER than the build: features gated on the build version "
            "(reconfigure, shrink/grow) may fail at run time",
            "load the NCCL torch was built against (the pinned nvidia-nccl wheel); check LD_PRELOAD and "
            "LD_LIBRARY_PATH",
            details,
        )
    return CheckResult(cid, Status.OK, msg + f"; floor {floor}", "", details)


def rccl_version(f: Facts) -> CheckResult:
    cid = "rccl-version"
    if not _is_rocm(f):
        return CheckResult(cid, Status.SKIP, "not a ROCm build")
    minimum = V(RCCL_RECONFIGURE_MIN)
    version: tuple[int, ...] | None = f.runtime_nccl
    where = "runtime"
    fact = f.library_fact("rccl")
    details: dict[str, object] = {"reconfigure_min": minimum}
    if version is None and fact is not None:
        version, where = fact.version, f"{fact.candidate.path} ({fact.candidate.source})"
        if version is None:
            return CheckResult(cid, Status.FAIL, f"librccl at {fact.candidate.path} cannot be asked its version: "
                               f"{fact.error}", "fix or remove that library", details)
    if version is None:
        return CheckResult(cid, Status.WARN, "ROCm build, but no librccl was found", "install RCCL (ROCm)", details)
    details["runtime"] = V(version)
    msg = f"RCCL {V(version)} ({where})"
    if version[:3] < NCCL_FLOOR:
        return CheckResult(cid, Status.FAIL, msg + f"; older than the {V(NCCL_FLOOR)} floor",
                           f"upgrade ROCm/RCCL to >= {minimum}", details)
    if version[:3] < RCCL_RECONFIGURE_MIN:
        return CheckResult(
            cid, Status.WARN,
            msg + f"; nccl2 reconfigure on ROCm needs RCCL >= {minimum} (first with ncclCommRevoke; "
            "pytorch#194774, not in the 2.15 CUDA sources)",
            f"upgrade to RCCL >= {minimum} (ROCm 7.14) if the job uses reconfigure", details,
        )
    return CheckResult(cid, Status.OK, msg + f"; >= {minimum} for reconfigure (ROCm support in 2.15 is unconfirmed)",
                       "", details)


def fast_reconfigure(f: Facts) -> CheckResult:
    cid = "fast-reconfigure"
    shrink = f.environ.get(SHRINK_GROW_VAR)
    details: dict[str, object] = {"shrink_grow": shrink}
    if f.torch_version is None:
        return CheckResult(cid, Status.SKIP, NEEDS_TORCH if f.before_torch else "torch is not installed", "",
                           details)
    minor = f.torch_minor
    if minor is not None and minor < (2, 14):
        return CheckResult(cid, Status.SKIP, f"torch {f.torch_version} has no reconfigure API (2.14+)", "", details)
    impl, why = f.job_backend
    details["backend"] = impl
    stray = ""
    if shrink is not None and impl != ti.IMPL_NCCL2:
        stray = f"; {SHRINK_GROW_VAR} is set but only nccl2 reads it"
    if impl == ti.IMPL_GLOO:
        status = Status.WARN if stray else Status.OK
        return CheckResult(cid, status, f"{f.backend_label('gloo')}: reconfigure works (full rendezvous; no shrink/grow)"
                           + stray, f"unset {SHRINK_GROW_VAR}" if stray else "", details)
    if impl in (ti.IMPL_LEGACY, ti.IMPL_LAZY):
        name = "the legacy ProcessGroupNCCL" if impl == ti.IMPL_LEGACY else "nccl-lazy"
        # Name what made the job's backend legacy/lazy: the toggle, --backend, or torch itself.
        if impl == ti.IMPL_LEGACY and f.toggle is not None and f.toggle.strip() == "0" \
                and (f.options.backend or "nccl").strip().lower() == "nccl":
            fix = f'unset {TOGGLE_VAR} ({TOGGLE_VAR}=0 rolls "nccl" back to legacy; nccl2 can reconfigure)'
        elif impl == ti.IMPL_LEGACY and minor is not None and minor < (2, 15) and f.options.backend in (None, "nccl"):
            fix = f'export {TOGGLE_VAR}=1 on torch 2.14 (opt in to nccl2) for groups that reconfigure'
        else:
            fix = f'use backend="nccl" (nccl2) instead of "{f.options.backend or impl}" for groups that reconfigure'
        return CheckResult(
            cid, Status.WARN, f"{name} does not support enable_reconfigure: no reconfigure at all" + stray,
            fix, details,
        )
    if impl != ti.IMPL_NCCL2:
        return CheckResult(cid, Status.SKIP, f"backend {impl}: {why}", "", details)
    version, source = f.nccl_version()
    details["nccl"] = V(version) if version else None
    if _is_rocm(f):
        return CheckResult(
            cid, Status.WARN,
            "nccl2 on ROCm: reconfigure is disabled (RCCL lacks ncclCommRevoke before 2.30.4; "
            "ROCm support was an open PR, pytorch#194774)",
            "use gloo-based recovery (destroy + re-init) on ROCm", details,
        )
    if version is None:
        return CheckResult(cid, Status.WARN, f"NCCL version unknown ({source}): cannot tell", "", details)
    v = V(version)
    if version[:3] < NCCL_RECONFIGURE_MIN:
        return CheckResult(
            cid, Status.WARN,
            f"NCCL {v} has no ncclCommRevoke: nccl2 reports supports_reconfigure=False "
            f"(needs >= {V(NCCL_RECONFIGURE_MIN)}, pytorch#192275)",
            f"load NCCL >= {V(NCCL_SHRINK_GROW_MIN)} (the 2.15 wheel pins 2.30.7)", details,
        )
    if version[:3] < NCCL_SHRINK_GROW_MIN:
        if shrink == "1":
            return CheckResult(
                cid, Status.WARN,
                f"{SHRINK_GROW_VAR}=1 but NCCL {v} < {V(NCCL_SHRINK_GROW_MIN)}: no ncclCommShrink/Grow path, "
                "every reconfigure is a full re-init",
                f"load NCCL >= {V(NCCL_SHRINK_GROW_MIN)}", details,
            )
        return CheckResult(
            cid, Status.OK,
            f"NCCL {v}: reconfigure by full re-init; the shrink/grow fast path needs NCCL >= "
            f"{V(NCCL_SHRINK_GROW_MIN)}", "", details,
        )
    build = f.build_nccl
    if build is not None and build[:3] < NCCL_SHRINK_GROW_MIN:
        return CheckResult(
            cid, Status.WARN if shrink == "1" else Status.OK,
            f"torch was built against NCCL {V(build)}: the fast path is compiled only from "
            f"{V(NCCL_SHRINK_GROW_MIN)}", "", details,
        )
    if minor is not None and minor < (2, 15):
        status = Status.WARN if shrink is not None else Status.OK
        return CheckResult(cid, status, f"torch {f.torch_version}: nccl2 reconfigure by full re-init; "
                           f"no shrink/grow fast path before 2.15" + (f" ({SHRINK_GROW_VAR} is ignored)" if shrink else ""),
                           "upgrade to torch 2.15 for the fast path" if shrink else "", details)
    if shrink == "1":
        return CheckResult(cid, Status.OK, f"NCCL {v}: shrink/grow fast path on ({SHRINK_GROW_VAR}=1; it must be "
                           "set on every rank)", "", details)
    if shrink is None or shrink == "0":
        return CheckResult(
            cid, Status.OK,
            f"NCCL {v}: reconfigure available; the shrink/grow fast path is off",
            f"export {SHRINK_GROW_VAR}=1 on every rank to use ncclCommShrink/Grow", details,
        )
    return CheckResult(cid, Status.WARN, f"{SHRINK_GROW_VAR}={shrink!r} is not 0 or 1",
                       f"set {SHRINK_GROW_VAR}=1 (on every rank) or unset it", details)
