"""One rank of the doctor's probe: ``python -m ncclx_migrate._doctor._probe_worker``.

Runs in its own process (started by ``_probe.run_probe``) so a crash or a hang in the
backend under test costs only this process.  Builds a real process group with the backend
the job would get, runs a small collective suite and checks every result, asks the flight
recorder what it recorded, and times ``_reconfigure`` against destroy + re-init where the
backend supports it.  Writes one JSON object to ``$NCCLX_PROBE_OUT``.
"""

from __future__ import annotations

import inspect
import json
import os
import pickle
import sys
import time
import traceback
from datetime import timedelta
from typing import Any


def _stage(name: str) -> None:
    """Tell the parent what this rank is doing (shown on a terminal as the probe's progress)."""
    path = os.environ.get("NCCLX_PROBE_STAGE")
    if path:
        try:
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(name)
        except OSError:
            pass


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 2)


def _suite(dist: Any, torch: Any, device: Any, rank: int, world: int) -> dict[str, str]:
    """Run each collective and compare with the value every rank can compute."""
    ops: dict[str, str] = {}

    def run(name: str, fn: Any) -> None:
        _stage(name)
        try:
            problem = fn()
            ops[name] = "ok" if problem is None else f"wrong result: {problem}"
        except Exception as exc:  # the backend's own error, one line
            text = str(exc).splitlines()[0] if str(exc) else ""
            unsupported = isinstance(exc, NotImplementedError) or "not supported" in text.lower()
            ops[name] = ("unsupported: " if unsupported else "error: ") + f"{type(exc).__name__}: {text}"[:300]

    def all_reduce() -> str | None:
        t = torch.full((4,), float(rank + 1), device=device)
        dist.all_reduce(t)
        want = world * (world + 1) / 2
        return None if bool((t == want).all()) else f"{t.tolist()} != {want}"

    def broadcast() -> str | None:
        t = torch.arange(4, dtype=torch.float32, device=device) + 100 if rank == 0 else torch.zeros(4, device=device)
        dist.broadcast(t, src=0)
        want = [100.0, 101.0, 102.0, 103.0]
        return None if t.tolist() == want else f"{t.tolist()} != {want}"

    def all_gather() -> str | None:
        out = [torch.zeros(2, device=device) for _ in range(world)]
        dist.all_gather(out, torch.full((2,), float(rank), device=device))
        got = [o.tolist() for o in out]
        want = [[float(r)] * 2 for r in range(world)]
        return None if got == want else f"{got} != {want}"

    def reduce_scatter() -> str | None:
        out = torch.zeros(2, device=device)
        dist.reduce_scatter_tensor(out, torch.ones(2 * world, device=device))
        return None if out.tolist() == [float(world)] * 2 else f"{out.tolist()} != {[float(world)] * 2}"

    def barrier() -> str | None:
        dist.barrier()
        return None

    def send_recv() -> str | None:
        if world < 2:
            return None
        send = torch.full((3,), float(rank), device=device)
        recv = torch.zeros(3, device=device)
        reqs = dist.batch_isend_irecv([
            dist.P2POp(dist.isend, send, (rank + 1) % world),
            dist.P2POp(dist.irecv, recv, (rank - 1) % world),
        ])
        for r in reqs:
            r.wait()
        want = float((rank - 1) % world)
        return None if recv.tolist() == [want] * 3 else f"{recv.tolist()} != {[want] * 3}"

    for name, fn in (("all_reduce", all_reduce), ("broadcast", broadcast), ("all_gather", all_gather),
                     ("reduce_scatter", reduce_scatter), ("barrier", barrier), ("send_recv", send_recv)):
        run(name, fn)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return ops


def _flight_recorder(dist: Any, impl: str) -> dict[str, Any]:
    import importlib

    c10d: Any = importlib.import_module("torch._C._distributed_c10d")
    fr: dict[str, Any] = {"recorder": impl}
    try:
        if impl == "nccl":  # legacy ProcessGroupNCCL keeps its own recorder
            raw = c10d._dump_nccl_trace()
        elif "backend" in (c10d._dump_fr_trace.__doc__ or ""):
            raw = c10d._dump_fr_trace(backend=impl)
        else:
            raw = c10d._dump_fr_trace()  # 2.13/2.14: one generic recorder
        dump = pickle.loads(raw)
    except Exception as exc:
        fr["error"] = f"{type(exc).__name__}: {exc}"[:300]
        return fr
    names = [str(e.get("profiling_name", "")) for e in dump.get("entries", [])]
    fr["entries"] = len(names)
    fr["ops"] = sorted({n.split(":", 1)[-1] for n in names})
    return fr


def _reconfigure(dist: Any, torch: Any, backend: str, store: Any, rank: int, world: int,
                 timeout: timedelta, device: Any, kw: dict[str, Any]) -> dict[str, Any]:
    c10d = dist.distributed_c10d
    out: dict[str, Any] = {}
    # destroy + re-init, then one all_reduce: what recovery costs without reconfigure.
    dist.destroy_process_group()
    start = time.perf_counter()
    dist.init_process_group(backend, store=dist.PrefixStore("reinit", store), rank=rank, world_size=world,
                            timeout=timeout, **kw)
    t = torch.ones(1, device=device)
    dist.all_reduce(t)
    out["reinit_ms"] = _ms(start)
    if "enable_reconfigure" not in inspect.signature(dist.init_process_group).parameters or not hasattr(
        c10d, "_reconfigure"
    ):
        out.update(supported=False, why="this torch has no reconfigure API (2.14+)")
        return out
    dist.destroy_process_group()
    dist.init_process_group(backend, store=dist.PrefixStore("reconf", store), rank=rank, world_size=world,
                            timeout=timeout, enable_reconfigure=True)
    if not c10d._supports_reconfigure():
        out.update(supported=False, why=f"{backend} reports supports_reconfigure=False")
        return out
    ok = True
    for uuid in (1, 2):  # the first connects; the second is what a recovery costs
        store.set(f"handle/{uuid}/{rank}", c10d._get_reconfigure_handle())
        handles = [store.get(f"handle/{uuid}/{r}").decode() for r in range(world)]
        start = time.perf_counter()
        c10d._reconfigure(uuid=uuid, handles=handles, timeout=timeout).wait()
        t = torch.ones(1, device=device)
        dist.all_reduce(t)
        out[f"reconfigure{uuid}_ms"] = _ms(start)
        ok = ok and float(t.item()) == world
    out["supported"] = True
    out["result_ok"] = ok
    return out


def main() -> int:
    env = os.environ
    rank, world = int(env["RANK"]), int(env["WORLD_SIZE"])
    backend = env["NCCLX_PROBE_BACKEND"]
    timeout = timedelta(seconds=float(env["NCCLX_PROBE_TIMEOUT"]))
    result: dict[str, Any] = {"rank": rank, "world": world, "backend": backend}
    out_path = env["NCCLX_PROBE_OUT"]
    store = None
    try:
        import torch
        import torch.distributed as dist

        result["torch"] = torch.__version__
        store = dist.TCPStore(env["MASTER_ADDR"], int(env["MASTER_PORT"]), world, rank == 0, timeout=timeout)
        use_cuda = backend != "gloo"
        device = torch.device("cuda", int(env["LOCAL_RANK"])) if use_cuda else torch.device("cpu")
        kw: dict[str, Any] = {}
        # Without a visible GPU, let init_process_group raise torch's own error for this backend.
        if use_cuda and torch.cuda.device_count() > 0:
            torch.cuda.set_device(device)
            if "device_id" in inspect.signature(dist.init_process_group).parameters:
                kw["device_id"] = device
        _stage("init_process_group")
        start = time.perf_counter()
        dist.init_process_group(backend, store=dist.PrefixStore("probe", store), rank=rank, world_size=world,
                                timeout=timeout, **kw)
        result["init_ms"] = _ms(start)
        pg = dist.group.WORLD
        impl = backend
        try:
            impl = pg._get_backend(device).name()
        except Exception:
            pass
        result["impl"] = impl
        start = time.perf_counter()
        result["ops"] = _suite(dist, torch, device, rank, world)
        result["suite_ms"] = _ms(start)
        _stage("flight recorder")
        result["fr"] = _flight_recorder(dist, impl)
        _stage("reconfigure")
        try:
            result["reconfigure"] = _reconfigure(dist, torch, backend, store, rank, world, timeout, device, kw)
        except Exception as exc:
            result["reconfigure"] = {"supported": None, "error": f"{type(exc).__name__}: {exc}"[:300]}
        if dist.is_initialized():
            dist.destroy_process_group()
    except Exception as exc:
        result["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:500]
        result["where"] = traceback.format_exc().splitlines()[-3:]
    with open(out_path, "w", encoding="utf-8") as fh:
        json.dump(result, fh)
    if store is not None:
        # Rank 0 hosts the store: keep it up until every rank has finished with it.
        try:
            store.add("finished", 1)
            if rank == 0:
                deadline = time.monotonic() + timeout.total_seconds()
                while store.add("finished", 0) < world and time.monotonic() < deadline:
                    time.sleep(0.02)
        except Exception:
            pass
    return 0


if __name__ == "__main__":
    from .._exit import skip_final_gc

    skip_final_gc()
    sys.exit(main())
