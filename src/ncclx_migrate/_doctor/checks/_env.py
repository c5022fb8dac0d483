"""env-vars: deprecated TORCH_NCCL_* names and those nccl2 ignores (rows of _torch.envvars.ENV_VARS)."""

from __future__ import annotations

import os

from ..._fr._env import ENV_VAR as HANG_DUMP_VAR
from ..._torch import probe as ti
from ..._torch.envvars import (
    FR_BUFFER_NAMES,
    FR_DUMP_FILE_NAMES,
    FR_DUMP_ON_TIMEOUT_NAMES,
    SHRINK_GROW_VAR,
    TOGGLE_VAR,
    EnvKind,
    EnvVar,
    env_findings,
)
from ..._torch.releases import legacy_can_run, release_of
from .._facts import Facts
from .._model import CheckResult, Status

# Variables the cluster comparison already reports through their own checks.
COMPARED_ELSEWHERE = frozenset(
    (TOGGLE_VAR, SHRINK_GROW_VAR, HANG_DUMP_VAR, *FR_BUFFER_NAMES, *FR_DUMP_FILE_NAMES, *FR_DUMP_ON_TIMEOUT_NAMES)
)


def _remedy(row: EnvVar, release: tuple[int, int] | None) -> str:
    """The fix, for the release the job is judged on (--target-torch, else the installed one)."""
    gone = None if release is None or legacy_can_run(release) else release_of(release)
    if row.kind is EnvKind.DEPRECATED and row.replacement:
        if gone is None:
            return f"add {row.replacement} next to {row.name} (keep the old name while legacy can run)"
        return f"rename {row.name} to {row.replacement} (torch {gone} has no legacy backend)"
    if row.kind is EnvKind.IGNORED and row.replacement:
        return f"use {row.replacement} under nccl2"
    if row.kind is EnvKind.OBSOLETE:
        return f"delete {row.name}"
    if gone is None:
        return f"drop {row.name} once no job runs legacy"
    return f"drop {row.name} (torch {gone} has no legacy backend to read it)"


# After a remedy that may already end in a parenthesis: a clause of its own, not a second one.
_TOOL = "; ncclx migrate --write PATH rewrites scripts"


def env_vars(f: Facts) -> CheckResult:
    cid = "env-vars"
    rows = [r for r in env_findings(f.environ) if r.kind is not EnvKind.TOGGLE]
    impl, _ = f.job_backend
    items = []
    notes = []
    for row in rows:
        value = f.environ.get(row.name, "")
        if row.kind is EnvKind.IGNORED and impl == ti.IMPL_LEGACY:
            notes.append(f"{row.name} (read: this job runs legacy)")
            continue
        if row.kind is EnvKind.DEPRECATED and row.replacement and row.replacement in f.environ:
            notes.append(f"{row.name} (next to {row.replacement})")
            continue
        what = {
            EnvKind.DEPRECATED: f"deprecated, use {row.replacement}",
            EnvKind.IGNORED: "ignored by nccl2",
            EnvKind.OBSOLETE: "read by nothing in 2.15",
        }.get(row.kind, row.kind.value)
        items.append({
            "name": row.name, "value": value, "kind": row.kind.value, "replacement": row.replacement,
            "finding": what, "remedy": _remedy(row, f.options.target_torch or f.torch_minor), "code": row.py_code, "evidence": row.evidence,
        })
    # The rest of the communication environment, for the cluster comparison (a rank with
    # another NCCL_SOCKET_IFNAME or TORCH_* setting behaves differently from its peers).
    nccl_env = {k: v for k, v in sorted(f.environ.items()) if k.startswith(("NCCL_", "RCCL_"))}
    torch_env = {k: v for k, v in sorted(f.environ.items())
                 if k.startswith(("TORCH_", "NCCLX_")) and k not in COMPARED_ELSEWHERE}
    conf = [p for p in (f.environ.get("NCCL_CONF_FILE"), os.path.expanduser("~/.nccl.conf"), "/etc/nccl.conf")
            if p and os.path.isfile(p)]
    details: dict[str, object] = {"findings": items, "fine": notes, "nccl_env": nccl_env,
                                  "torch_env": torch_env, "nccl_conf_files": conf}
    extra = ""
    if nccl_env or conf:
        extra = "; NCCL settings: " + ", ".join([*nccl_env, *conf])
    if not items:
        msg = "no deprecated or ignored TORCH_NCCL_* variables set"
        if notes:
            msg += " (" + ", ".join(notes) + ")"
        return CheckResult(cid, Status.OK, msg + extra, "", details)
    msg = "; ".join(f"{i['name']}: {i['finding']}" for i in items) + extra
    problems = [{"status": "warn", "message": f"{i['name']}: {i['finding']}", "remedy": str(i["remedy"])}
                for i in items]
    problems[-1]["remedy"] += _TOOL
    if extra:
        problems.append({"status": "ok", "message": extra[2:], "remedy": ""})
    details["problems"] = problems
    remedy = "; ".join(str(i["remedy"]) for i in items) + _TOOL
    return CheckResult(cid, Status.WARN, msg, remedy, details)
