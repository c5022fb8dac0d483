"""env-vars: deprecated TORCH_NCCL_* names and those nccl2 ignores (rows of _envvars.ENV_VARS)."""

from __future__ import annotations

from ... import _torchinfo as ti
from ..._envvars import EnvKind, EnvVar, env_findings
from .._facts import Facts
from .._model import CheckResult, Status


def _remedy(row: EnvVar) -> str:
    if row.kind is EnvKind.DEPRECATED and row.replacement:
        return f"add {row.replacement} next to {row.name} (keep the old name while legacy can run)"
    if row.kind is EnvKind.IGNORED and row.replacement:
        return f"use {row.replacement} under nccl2"
    if row.kind is EnvKind.OBSOLETE:
        return f"delete {row.name}"
    return f"drop {row.name} once no job runs legacy"


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
            "finding": what, "remedy": _remedy(row), "code": row.py_code, "evidence": row.evidence,
        })
    details: dict[str, object] = {"findings": items, "fine": notes}
    if not items:
        msg = "no deprecated or ignored TORCH_NCCL_* variables set"
        if notes:
            msg += " (" + ", ".join(notes) + ")"
        return CheckResult(cid, Status.OK, msg, "", details)
    msg = "; ".join(f"{i['name']}: {i['finding']}" for i in items)
    remedy = "; ".join(str(i["remedy"]) for i in items) + " (ncclx migrate --fix rewrites scripts)"
    return CheckResult(cid, Status.WARN, msg, remedy, details)
