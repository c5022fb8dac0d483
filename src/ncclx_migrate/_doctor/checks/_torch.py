"""torch-version, nccl-resolution, legacy-toggle."""

from __future__ import annotations

import sys

from ..._torch import probe as ti
from ..._torch.envvars import TOGGLE_VAR, lookup
from ..._torch.releases import Phase, phase_for_version
from .._facts import NEEDS_TORCH, Facts
from .._model import CheckResult, Status

IMPL_CLASS = {
    ti.IMPL_NCCL2: "ProcessGroupNCCL2",
    ti.IMPL_LEGACY: "legacy ProcessGroupNCCL",
    ti.IMPL_LAZY: "ProcessGroupNCCLLazy",
    ti.IMPL_GLOO: "ProcessGroupGloo",
}

PHASE_TEXT = {
    Phase.NO_NCCL2: 'no nccl2: "nccl" is the legacy ProcessGroupNCCL',
    Phase.OPT_IN: f'nccl2 opt-in: "nccl" is legacy unless {TOGGLE_VAR}=1',
    Phase.DEFAULT: f'nccl2 is the default "nccl"; {TOGGLE_VAR}=0 or "nccl-legacy" roll back',
    Phase.ROLLBACK_GONE: 'nccl2 is the only "nccl"; no legacy rollback',
}

INSTALL_REMEDY = (
    "run ncclx from the job's own Python environment (pip install ncclx-migrate into the "
    f"venv/container that trains); this one is {sys.executable}"
)


def describe(impl: str | None) -> str:
    if impl is None:
        return "nothing (not available)"
    return f"{impl} ({IMPL_CLASS[impl]})" if impl in IMPL_CLASS else impl


def torch_version(f: Facts) -> CheckResult:
    cid = "torch-version"
    version = f.torch_version
    if version is None:
        if f.before_torch:  # the header says what such a run is for
            return CheckResult(cid, Status.SKIP, f"not in this Python ({sys.executable})")
        return CheckResult(cid, Status.FAIL, "torch is not installed in this Python", INSTALL_REMEDY)
    phase, source = f.phase
    flavor = f.flavor or "unknown"
    build = f.build
    build_text = {"cuda": "CUDA", "rocm": "ROCm", "cpu": "CPU-only"}.get(flavor, "unknown")
    info = {"cuda": build.cuda, "hip": build.hip} if build is not None else (f.static_build or {})
    if info.get("cuda") or info.get("hip"):
        build_text += f" {info.get('hip') or info.get('cuda')}"
    details: dict[str, object] = {
        "version": version,
        "flavor": f.flavor,
        "phase": phase.value if phase else None,
        "phase_source": source,
        "backend_entry_points": {name: dists for name, dists in sorted(f.providers.items())},
    }
    if build is not None:
        details.update(cuda=build.cuda, hip=build.hip, distributed=build.distributed,
                       nccl_available=build.nccl_available)
        if not build.distributed:
            return CheckResult(
                cid, Status.FAIL,
                f"torch {version} ({build_text}) was built without torch.distributed",
                "install a torch wheel with distributed support (the PyPI Linux wheels have it)",
                details,
            )
    msg = f"torch {version} ({build_text} build); {PHASE_TEXT[phase] if phase else 'phase unknown'}"
    msg += f" (from the {source})"
    status, remedy = Status.OK, ""
    if phase is not None and f.torch_minor is not None and source == "backend registry":
        by_version = phase_for_version(f.torch_minor)
        details["phase_by_version"] = by_version.value
        if by_version is not phase:
            status = Status.WARN
            msg += f"; the version number says {by_version.value}, the registry says {phase.value}"
            remedy = "this build's backend registry differs from its release; trust the registry"
    if f.options.target_torch is not None:
        target = f.options.target_torch
        details["target_torch"] = f"{target[0]}.{target[1]}"
        msg += f"; judged for torch {target[0]}.{target[1]}: {PHASE_TEXT[phase_for_version(target)]}"
    return CheckResult(cid, status, msg, remedy, details)


def nccl_resolution(f: Facts) -> CheckResult:
    cid = "nccl-resolution"
    if f.torch_version is None:
        return CheckResult(cid, Status.SKIP, NEEDS_TORCH if f.before_torch else "torch is not installed",
                           "" if f.before_torch else INSTALL_REMEDY)
    res = f.nccl_resolution
    if res is None:
        return CheckResult(cid, Status.SKIP, "cannot tell what \"nccl\" builds without a torch version")
    toggle = f.toggle
    details: dict[str, object] = {
        "implementation": res.implementation,
        "reason": res.reason,
        TOGGLE_VAR: toggle,
    }
    if res.implementation is None:
        return CheckResult(
            cid, Status.WARN, f'"nccl" is not available: {res.reason}',
            'use backend="gloo" on this machine, or install a CUDA/ROCm build of torch',
            details,
        )
    msg = f'"nccl" builds {describe(res.implementation)}: {res.reason}'
    if f.build is not None and f.target_release is None:
        mixed = ti.resolve_backend("cpu:gloo,cuda:nccl", f.environ)
        details["cpu:gloo,cuda:nccl"] = {r.device: r.implementation for r in mixed}
        msg += '; "cpu:gloo,cuda:nccl" builds ' + ", ".join(
            f"{r.device}: {r.implementation or 'n/a'}" for r in mixed
        )
    # This says what the NCCL job gets; that this node has no GPU is gpu-binding's finding.
    return CheckResult(cid, Status.OK, msg, "", details)


def legacy_toggle(f: Facts) -> CheckResult:
    cid = "legacy-toggle"
    value = f.toggle
    meaning = f.toggle_meaning
    phase, _ = f.phase
    target = f.options.target_torch
    target_phase = phase_for_version(target) if target else None
    judged = target_phase or phase
    providers = f.providers.get("nccl-legacy", [])
    legacy_available = bool(providers)
    details: dict[str, object] = {
        "value": value,
        "meaning": meaning,
        "nccl_legacy_available": legacy_available if f.torch_version else None,
        "nccl_legacy_providers": providers,
    }
    row = lookup(TOGGLE_VAR)
    evidence = row.evidence if row else ""
    details["evidence"] = evidence
    if f.torch_version is None:
        if value is None:
            return CheckResult(cid, Status.OK, f"{TOGGLE_VAR} is not set", "", details)
        return CheckResult(cid, Status.WARN, f"{TOGGLE_VAR}={value!r} is set; torch is not installed here",
                           INSTALL_REMEDY, details)
    if "torch" in providers:
        avail = "nccl-legacy is available"
    elif legacy_available:
        avail = "nccl-legacy comes from ncclx-migrate's shim (torch has none; it warns when used)"
    else:
        avail = "nccl-legacy is not available"
    if (f.options.backend or "").strip().lower() == "nccl-legacy" and meaning != "rollback":
        # The job names the rollback itself (--backend nccl-legacy): judged like the toggle.
        if judged is Phase.ROLLBACK_GONE:
            where = f"torch {target[0]}.{target[1]}" if target else "this torch"
            return CheckResult(
                cid, Status.FAIL,
                f'the job\'s backend "nccl-legacy" is the legacy rollback, which {where} no longer has '
                "(announced for 2.15 only); only ncclx-migrate's shim keeps the name, with a warning",
                'use backend="nccl" and fix what needed legacy (ncclx migrate PATH lists the code '
                "patterns); or pin torch<2.16",
                details,
            )
        if phase is Phase.DEFAULT:
            return CheckResult(
                cid, Status.WARN,
                f'the job\'s backend "nccl-legacy" builds the legacy ProcessGroupNCCL, a rollback '
                f"announced for 2.15 only; {avail}",
                'move to backend="nccl" once the job runs on nccl2 (check with ncclx doctor '
                "--target-torch 2.16); ncclx migrate PATH finds code that needs legacy",
                details,
            )
    if meaning == "unset":
        return CheckResult(cid, Status.OK, f"{TOGGLE_VAR} is not set; {avail}", "", details)
    shown = f"{TOGGLE_VAR}={value!r}"
    if judged is Phase.ROLLBACK_GONE and meaning == "rollback":
        where = f"torch {target[0]}.{target[1]}" if target else "this torch"
        return CheckResult(
            cid, Status.FAIL,
            f"{shown} asks for the legacy ProcessGroupNCCL, which {where} no longer has "
            "(the rollback was announced for 2.15 only); it is silently ignored",
            f"unset {TOGGLE_VAR} and fix what needed legacy (ncclx migrate PATH lists the code "
            "patterns); or pin torch<2.16",
            details,
        )
    if phase is Phase.DEFAULT and meaning == "rollback":
        return CheckResult(
            cid, Status.WARN,
            f'{shown} rolls "nccl" back to the legacy ProcessGroupNCCL; a rollback announced '
            f"for 2.15 only; {avail}",
            f"unset {TOGGLE_VAR} once the job runs on nccl2 (check with "
            "ncclx doctor --target-torch 2.16); ncclx migrate PATH finds code that needs legacy",
            details,
        )
    if phase is Phase.DEFAULT and meaning == "no-effect":
        return CheckResult(
            cid, Status.WARN,
            f'{shown} has no effect: only the literal "0" rolls back, so "nccl" still builds nccl2',
            f'set {TOGGLE_VAR}=0 if you meant the rollback, or unset it',
            details,
        )
    if phase is Phase.OPT_IN and meaning in ("rollback", "no-effect"):
        return CheckResult(
            cid, Status.WARN,
            f'{shown} has no effect on torch 2.14: only the literal "1" opts in to nccl2; '
            '"nccl" builds the legacy ProcessGroupNCCL',
            f'set {TOGGLE_VAR}=1 to try nccl2 on 2.14, or unset it',
            details,
        )
    if phase is Phase.NO_NCCL2:
        return CheckResult(
            cid, Status.WARN, f"{shown} has no effect on this torch (no nccl2 before 2.14)",
            f"unset {TOGGLE_VAR}, or upgrade torch", details,
        )
    if meaning == "opt-in" and phase in (Phase.DEFAULT, Phase.ROLLBACK_GONE):
        return CheckResult(cid, Status.OK, f"{shown} is redundant: nccl2 is already the default",
                           f"unset {TOGGLE_VAR} (harmless)", details)
    if judged is Phase.ROLLBACK_GONE:
        return CheckResult(cid, Status.WARN, f"{shown} is set and has no effect on torch without the rollback",
                           f"unset {TOGGLE_VAR}", details)
    return CheckResult(cid, Status.OK, f"{shown}: {meaning}", "", details)
