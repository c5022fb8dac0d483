"""compiled-extensions: installed shared objects built for the legacy ProcessGroupNCCL alone.

Under nccl2 such an extension's ``dynamic_cast<c10d::ProcessGroupNCCL*>`` gives null and its
``static_cast`` is undefined behaviour (pytorch/TensorRT#4658). Found from the dynamic symbols
(``_elfsyms``) of every shared object on ``sys.path`` (``_sofiles``); no torch import.
"""

from __future__ import annotations

from typing import Any

from ..._torch import probe as ti
from ..._torch.envvars import TOGGLE_VAR
from ..._torch.releases import Phase, nccl_builds, phase_for_version
from .._elfsyms import read_refs
from .._facts import Facts
from .._model import CheckResult, Status
from .._sofiles import owner, walk

MAX_LISTED = 20  # unreadable files named in the details; the rest are counted


def _judged(f: Facts) -> tuple[str | None, str]:
    """(what the job's "nccl" builds, why), from the facts nccl-resolution reports."""
    if (f.options.backend or "").strip().lower() == "nccl-legacy":
        return ti.IMPL_LEGACY, "the job's backend is \"nccl-legacy\""
    target = f.options.target_torch
    if target is not None:
        return nccl_builds(phase_for_version(target), f.toggle), f"judged for torch {target[0]}.{target[1]}"
    res = f.nccl_resolution
    if res is None:
        return None, "torch is not installed"
    return res.implementation, res.reason


def compiled_extensions(f: Facts) -> CheckResult:
    cid = "compiled-extensions"
    found = walk()
    legacy_only: list[dict[str, Any]] = []
    both: list[str] = []
    unreadable: list[dict[str, str]] = []
    for so in found.files:
        refs = read_refs(so.path)
        if isinstance(refs, str):
            if refs != "not an ELF file":  # linker scripts named libfoo.so are text
                unreadable.append({"path": so.path, "reason": refs})
            continue
        if refs.legacy_only:
            ctor = refs.constructor
            legacy_only.append({"path": so.path, "package": owner(so), "symbol": ctor or refs.legacy[0],
                                "legacy_symbols": len(refs.legacy), "builds_own": ctor is not None})
        elif refs.legacy:
            both.append(so.path)
    packages = sorted({x["package"] for x in legacy_only})
    # A package casts when any of its files does; it only builds its own legacy group when
    # every legacy-only file of it calls a constructor and needs no typeinfo.
    builders = [p for p in packages if all(x["builds_own"] for x in legacy_only if x["package"] == p)]
    casters = [p for p in packages if p not in builders]
    impl, why = _judged(f)
    details: dict[str, Any] = {
        "shared_objects": len(found.files),
        "legacy_only": legacy_only,
        "legacy_only_packages": packages,
        "builds_own_legacy_packages": builders,
        "both_classes": both,
        "unreadable": unreadable[:MAX_LISTED],
        "unreadable_count": len(unreadable),
        "walk_stopped": found.stopped or None,
        "nccl_builds": impl,
    }
    # The count of files read stays in the details: ranks whose messages differ only in it
    # would split the merged report into groups.
    notes = ([f"{len(unreadable)} unreadable skipped"] if unreadable else []) + ([found.stopped] if found.stopped else [])
    tail = f" ({'; '.join(notes)})" if notes else ""
    if not legacy_only:
        msg = "no installed extension references the legacy ProcessGroupNCCL without nccl2's"
        if both:
            msg += f"; {len(both)} reference both classes"
        return CheckResult(cid, Status.OK, msg + tail, "", details)
    nccl2 = impl in (ti.IMPL_NCCL2, ti.IMPL_LAZY)
    target = f.options.target_torch
    rollback = (phase_for_version(target) if target else f.phase[0]) is not Phase.ROLLBACK_GONE
    cast_status = Status.FAIL if nccl2 else Status.WARN
    # Its own legacy group works while torch ships the class, whatever "nccl" builds.
    build_status = Status.WARN if rollback else Status.FAIL
    if nccl2:
        effect = '"nccl" builds nccl2 here, so their casts to it give null (or undefined behaviour)'
        short = '"nccl" builds nccl2 here: a cast to it gives null or crashes'
    elif impl == ti.IMPL_LEGACY:
        effect = ('they work while "nccl" builds the legacy class here and break on nccl2, '
                  "torch 2.15's default")
        short = 'works only while "nccl" builds the legacy class'
    else:
        effect = f"they break where \"nccl\" builds nccl2 (torch 2.15's default; here: {why})"
        short = 'breaks where "nccl" builds nccl2'
    own = ("it builds its own legacy group (a constructor, no cast): that works while torch ships the "
           "class" + ("" if rollback else ", and this torch has no legacy rollback"))
    problems = []
    for pkg in packages:
        builds = pkg in builders
        items = [x for x in legacy_only if x["package"] == pkg and (builds or not x["builds_own"])]
        first = items[0]
        more = f" and {len(items) - 1} more" if len(items) > 1 else ""
        problems.append({
            "status": (build_status if builds else cast_status).value,
            "message": f"{pkg}: {first['path']}{more} references the legacy ProcessGroupNCCL only "
                       f"({first['symbol']}); {own if builds else short}",
            "remedy": _remedy(pkg, nccl2, rollback, builds),
        })
    problems.sort(key=lambda p: p["status"] != Status.FAIL.value)
    details["problems"] = problems
    parts = []
    if casters:
        ev = next(x for x in legacy_only if x["package"] == casters[0] and not x["builds_own"])
        parts.append(f"built for the legacy ProcessGroupNCCL only: {', '.join(casters)}; {effect}; "
                     f"evidence: {ev['symbol']} in {ev['path']}")
    if builders:
        ev = next(x for x in legacy_only if x["package"] == builders[0])
        parts.append(f"{'builds' if len(builders) == 1 else 'build'} its own legacy ProcessGroupNCCL: "
                     f"{', '.join(builders)}; works while torch ships the class, which goes with the rollback; "
                     f"evidence: {ev['symbol']} in {ev['path']}")
    status = Status.FAIL if any(p["status"] == Status.FAIL.value for p in problems) else Status.WARN
    return CheckResult(cid, status, "; and ".join(parts) + tail, "; ".join(p["remedy"] for p in problems),
                       details)


def _remedy(package: str, nccl2: bool, rollback: bool, builds: bool = False) -> str:
    upgrade = f"upgrade {package} to a build that knows c10d::nccl2::ProcessGroupNCCL"
    if builds:  # the toggle changes nothing for a group the package constructs itself
        return (f"upgrade {package} to a build that constructs c10d::nccl2::ProcessGroupNCCL where torch has it"
                + (" (this torch has no legacy rollback)" if not rollback else
                   " before torch drops the legacy class (the rollback is announced for 2.15 only)"))
    if not rollback:
        return upgrade + " (this torch has no legacy rollback)"
    how = f'{TOGGLE_VAR}=0 or backend="nccl-legacy"'
    if nccl2:
        return f"{upgrade}, or roll back ({how}) until it does; the rollback is announced for 2.15 only"
    return (f"{upgrade} before the job runs nccl2; until then keep the legacy class ({how} on 2.15; "
            "the rollback is announced for 2.15 only)")
