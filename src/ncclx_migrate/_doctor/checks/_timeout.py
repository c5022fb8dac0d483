"""default-timeout: the timeout a group of the job's backend gets when it passes no timeout=.

torch up to 2.14 gives NCCL's 10-minute default only to the name "nccl"
(``_get_default_timeout``); an explicitly named ``nccl2``, ``nccl-legacy`` or ``nccl-lazy``
group waits 30 minutes before a hang is reported.  2.15 lists all four names.
"""

from __future__ import annotations

from ..._torch.releases import (
    BACKEND_NAMES,
    GENERIC_TIMEOUT_MIN,
    NAME_BUILDS,
    NCCL_TIMEOUT_MIN,
    SUPPORTED_RELEASES,
    default_timeout_minutes,
    release_of,
)
from .._facts import NEEDS_TORCH, Facts
from .._model import CheckResult, Status

EVIDENCE = (
    "distributed_c10d.py:1387-1400 (2.14.1) tests backend == Backend.NCCL only; "
    ":1552-1565 (2.15.0) lists nccl, nccl-legacy, nccl2, nccl-lazy"
)


def _names(backend: str) -> list[str]:
    """The backend names of ``"nccl2"`` or ``"cpu:gloo,cuda:nccl2"``, lower-cased."""
    return [part.rpartition(":")[2].strip().lower() for part in backend.split(",") if part.strip()]


def default_timeout(f: Facts) -> CheckResult:
    cid = "default-timeout"
    target = f.options.target_torch
    if target is not None:
        release, where = release_of(target), f"torch {release_of(target)} (--target-torch)"
    elif f.torch_minor is not None:
        release, where = release_of(f.torch_minor), f"torch {release_of(f.torch_minor)}"
    else:
        return CheckResult(cid, Status.SKIP, f"{NEEDS_TORCH if f.before_torch else 'torch is not installed'} "
                           "(or give --target-torch X.Y)")
    backend = f.options.backend or "nccl"
    names = [n for n in _names(backend) if n in BACKEND_NAMES]
    details: dict[str, object] = {"release": release, "backend": backend, "evidence": EVIDENCE}
    if not names:
        return CheckResult(cid, Status.SKIP, f'backend "{backend}" has no NCCL part', "", details)
    if release not in SUPPORTED_RELEASES:
        major, minor = (int(p) for p in release.split("."))
        if (major, minor) > (2, 15):  # not measured: no such wheel yet
            return CheckResult(cid, Status.SKIP, f"not measured for {where}", "", details)
        release = "2.13"  # before 2.13 the rule was 2.13's: "nccl" only
    minutes = {n: default_timeout_minutes(release, n) for n in names}
    details["minutes"] = minutes
    slow = [n for n in names if minutes[n] == GENERIC_TIMEOUT_MIN]
    if not slow:
        shown = ", ".join(f'"{n}"' for n in names)
        return CheckResult(
            cid, Status.OK,
            f"{shown} gets NCCL's {NCCL_TIMEOUT_MIN}-minute default timeout on {where}", "", details,
        )
    name = slow[0]
    missing = NAME_BUILDS[release].get(name, name) is None
    if missing and name != "nccl-legacy":
        return CheckResult(
            cid, Status.FAIL,
            f'backend "{name}" does not exist on {where}: init_process_group fails '
            f'("Unknown backend type {name}")',
            'use backend="nccl" there, or require torch>=2.14', details,
        )
    via = (" (the name exists there only through ncclx_migrate's shim, install_legacy_shim())"
           if missing else "")
    return CheckResult(
        cid, Status.WARN,
        f'a group created with backend "{name}" and no timeout= waits {GENERIC_TIMEOUT_MIN} minutes '
        f'before a hang is reported on {where}, not NCCL\'s {NCCL_TIMEOUT_MIN}: its '
        f'_get_default_timeout gives NCCL\'s default to "nccl" only{via}',
        f"pass timeout=datetime.timedelta(minutes={NCCL_TIMEOUT_MIN}) (or the timeout you mean) to "
        'init_process_group/new_group, or use backend="nccl"'
        + (" (TORCH_DIST_USE_NCCL2=1 or ncclx_migrate.backend.use_nccl2() make it build nccl2)"
           if release == "2.14" else ""),
        details,
    )
