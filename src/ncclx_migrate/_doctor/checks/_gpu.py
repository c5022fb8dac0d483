"""gpu-binding: the GPUs this rank sees and the one nccl2 will bind.

nccl2 in 2.15 binds ``cuda:(LOCAL_RANK % device_count)`` (or ``RANK % count`` without
LOCAL_RANK) at group creation and ignores ``torch.cuda.set_device`` (docs/torch-versions.md, "Device binding";
``distributed_c10d.py:820-849`` 2.15.0).  Two ranks on one GPU make NCCL fail with
"Duplicate GPU detected" (torchrec PR #4666).
"""

from __future__ import annotations

from ..._torch import probe as ti
from ..._words import count as counted
from .._facts import Facts
from .._model import CheckResult, Status


def _int(env: dict[str, str], name: str) -> tuple[int | None, str | None]:
    raw = env.get(name)
    if raw is None:
        return None, None
    try:
        return int(raw), None
    except ValueError:
        return None, f"{name}={raw!r} is not an integer"


def gpu_binding(f: Facts) -> CheckResult:
    cid = "gpu-binding"
    env = dict(f.environ)
    count = f.gpu_count
    visible = env.get("CUDA_VISIBLE_DEVICES")
    local_rank, bad_lr = _int(env, "LOCAL_RANK")
    local_world, bad_lw = _int(env, "LOCAL_WORLD_SIZE")
    rank, bad_r = _int(env, "RANK")
    impl, _ = f.job_backend
    details: dict[str, object] = {
        "device_count": count, "CUDA_VISIBLE_DEVICES": visible, "LOCAL_RANK": env.get("LOCAL_RANK"),
        "LOCAL_WORLD_SIZE": env.get("LOCAL_WORLD_SIZE"), "RANK": env.get("RANK"),
    }
    world, bad_w = _int(env, "WORLD_SIZE")
    # Slurm's own names: ncclx (and many launch scripts) derive RANK/WORLD_SIZE from them.
    slurm = {name: _int(env, name) for name in ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID")}
    bad = [b for b in (bad_lr, bad_lw, bad_r, bad_w, *(e for _, e in slurm.values())) if b]
    if bad:
        return CheckResult(cid, Status.FAIL, "; ".join(bad) + ": init_process_group and the nccl2 device choice "
                           "raise ValueError", "let the launcher (torchrun/srun) set these, or fix the script", details)
    # A rank outside its world: init_process_group waits for ranks that never come.
    pairs = (("RANK", rank, "WORLD_SIZE", world), ("LOCAL_RANK", local_rank, "LOCAL_WORLD_SIZE", local_world),
             ("SLURM_PROCID", slurm["SLURM_PROCID"][0], "SLURM_NTASKS", slurm["SLURM_NTASKS"][0]))
    out_of_range = [f"{r}={rv} is negative" if rv < 0 else f"{r}={rv} is not below {w}={wv}"
                    for r, rv, w, wv in pairs
                    if rv is not None and (rv < 0 or (wv is not None and 0 < wv <= rv))]
    out_of_range += [f"{w}={wv} is not positive" for _, _, w, wv in pairs if wv is not None and wv <= 0]
    if out_of_range:
        return CheckResult(cid, Status.FAIL, "; ".join(out_of_range) + ": init_process_group rejects the rank "
                           "or waits for ranks that never join", "let the launcher (torchrun/srun) set these, "
                           "or fix the script that exports them", details)
    if count is None:
        return CheckResult(cid, Status.SKIP, "cannot count GPUs at this level", "", details)
    vis = f" (CUDA_VISIBLE_DEVICES={visible!r})" if visible is not None else ""
    if count == 0:
        return _no_gpu(f, impl, vis, details)
    nccl_like = impl in (ti.IMPL_NCCL2, ti.IMPL_LAZY, ti.IMPL_LEGACY)
    msg = f"{counted(count, 'GPU')} visible{vis}"
    if local_rank is not None:
        device = local_rank % count
        msg += f"; LOCAL_RANK={local_rank}"
    elif rank is not None:
        device = rank % count
        msg += f"; LOCAL_RANK unset, RANK={rank}"
    else:
        device = None
    if device is not None:
        details["nccl2_device"] = f"cuda:{device}"
        if impl in (ti.IMPL_NCCL2, ti.IMPL_LAZY):
            msg += f" -> nccl2 binds cuda:{device} (set_device is not consulted)"
    if local_world is not None and local_world > count and nccl_like:
        return CheckResult(
            cid, Status.FAIL,
            msg + f"; LOCAL_WORLD_SIZE={local_world} ranks share {counted(count, 'GPU')}: NCCL fails with "
            '"Duplicate GPU detected"',
            f"start at most {counted(count, 'rank')} per node (torchrun --nproc-per-node {count}), or expose one "
            "GPU per rank", details,
        )
    if local_rank is not None and local_rank >= count and nccl_like and local_world is None:
        return CheckResult(
            cid, Status.WARN, msg + f"; LOCAL_RANK {local_rank} >= {count} GPUs: ranks wrap onto shared GPUs",
            "check the per-node rank count against the GPUs", details,
        )
    if local_rank is None and rank is not None and impl in (ti.IMPL_NCCL2, ti.IMPL_LAZY):
        return CheckResult(
            cid, Status.WARN, msg + ": without LOCAL_RANK the device follows the GLOBAL rank, which is "
            "wrong unless ranks are packed node by node",
            "launch with torchrun/srun so LOCAL_RANK is set, or pass device_id= to init_process_group",
            details,
        )
    if local_world is not None and local_world < count:
        msg += f"; {counted(count - local_world, 'GPU')} left idle by LOCAL_WORLD_SIZE={local_world}"
    return CheckResult(cid, Status.OK, msg, "", details)


def _no_gpu(f: Facts, impl: str | None, vis: str, details: dict[str, object]) -> CheckResult:
    """The one place that says "no GPU visible"; the other checks refer here."""
    cid = "gpu-binding"
    named = f.options.backend is not None
    status = Status.FAIL if f.options.require_gpu else Status.WARN
    where = ("run on a GPU node (check the driver with nvidia-smi, and CUDA_VISIBLE_DEVICES)"
             if f.options.require_gpu or vis else "")
    if f.before_torch and not f.options.require_gpu:  # a node or image checked before torch
        return CheckResult(cid, Status.OK, f"no GPU visible{vis}: no job to bind here yet (no torch); "
                           "--require-gpu makes a missing GPU fail", "", details)
    if impl == ti.IMPL_GLOO and named:
        if not f.options.require_gpu:
            return CheckResult(cid, Status.OK, f"no GPU visible{vis}; gloo needs none", "", details)
        return CheckResult(cid, status, f"no GPU visible{vis} (--require-gpu)", where, details)
    if named:  # the job's NCCL backend, judged on a login node
        return CheckResult(
            cid, status,
            f"no GPU visible{vis}: the NCCL job cannot start here (init_process_group raises); "
            "the other checks judge it as it will run on a GPU node",
            where or "run the job, and ncclx doctor --level probe, on a GPU node", details)
    return CheckResult(
        cid, status,
        f"no GPU visible{vis}: a job here gets gloo, which the other checks judge; "
        'init_process_group("nccl") raises here',
        where or "on a login node, judge the GPU job with ncclx doctor --backend nccl", details)
