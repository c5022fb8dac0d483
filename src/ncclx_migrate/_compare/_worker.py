"""One arm of ``ncclx compare``: ``python -m ncclx_migrate._compare._worker PLAN.json``.

Started by ``_run`` once per arm, in a fresh interpreter that has the arm's environment from
its first instruction (so even what torch or libnccl read at load time is the arm's).  It
imports torch once and forks one process per local rank (a fork costs almost nothing; a
torch import costs seconds of CPU).  CUDA is never touched before the fork: each rank
initialises its own device.

Each rank builds the arm's process group on the plan's store, then, per collective, dtype
and size: a warm-up, timed iterations, and a check of the last result against what every
rank can compute itself.  It appends one JSON line per case to ``rank<R>.jsonl`` as it goes
(so a hang keeps what was measured) and writes what it is doing to ``rank<R>.stage`` (so a
hang is named with its collective).
"""

from __future__ import annotations

import inspect
import json
import os
import sys
import time
import traceback
from datetime import timedelta
from typing import Any

from ._spec import DTYPE_BYTES, human_size

SAMPLE = 32  # float-sum elements kept per case, for the arm-against-arm comparison
# Buffer bytes per rank kept from one block of a case to the next (first come, never evicted):
# building a case's inputs again every block cost more than the call itself at 1 MiB on CPU.
# The default CPU sweep needs about 90 MiB; on a GPU the largest cases are built per block.
KEEP_BYTES = 128 << 20


def _line(fh: Any, obj: dict[str, Any]) -> None:
    fh.write(json.dumps(obj) + "\n")
    fh.flush()


def _many(n: int, one: str, more: str) -> str:
    return f"{n} {one if n == 1 else more}"


def _stage(path: str, text: str) -> None:
    try:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
    except OSError:
        pass


class _Case:
    """Inputs, the call and the exact (or bounded) expected output of one collective."""

    def __init__(self, torch: Any, dist: Any, coll: str, dtype: str, nbytes: int, rank: int, world: int,
                 device: Any) -> None:
        self.torch, self.dist, self.coll, self.rank, self.world = torch, dist, coll, rank, world
        self.tdtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "int32": torch.int32}[dtype]
        self.float = dtype != "int32"
        self.device = device
        count = nbytes // DTYPE_BYTES[dtype]
        split = coll in ("all_gather", "reduce_scatter", "all_to_all")
        self.count = count - count % world if split else count
        self.chunk = self.count // world

    def values(self, rank: int, n: int, offset: int = 0) -> Any:
        """Rank ``rank``'s deterministic input: small integers, times 0.1 for floats (so that a
        float sum depends on the order it is added in, as real gradients do)."""
        t = self.torch
        idx = t.arange(offset, offset + n, device=self.device, dtype=t.int64)
        base = (idx * 7 + rank * 13) % 17 - 8
        if self.float:
            return (base.to(t.float64) * 0.1 + ((idx * 5 + rank * 3) % 8).to(t.float64) * 0.013).to(self.tdtype)
        return base.to(self.tdtype)

    def setup(self) -> None:
        t, r, c = self.torch, self.rank, self.coll
        if c.startswith("all_reduce"):
            self.src = self.values(r, self.count)
            self.buf = self.src.clone()
        elif c == "all_gather":
            self.src = self.values(r, self.chunk)
            self.buf = t.empty(self.count, dtype=self.tdtype, device=self.device)
        elif c in ("reduce_scatter", "all_to_all"):
            self.src = self.values(r, self.count)
            self.buf = t.empty(self.chunk if c == "reduce_scatter" else self.count, dtype=self.tdtype,
                               device=self.device)
        elif c == "broadcast":
            self.src = self.values(0, self.count) if r == 0 else t.zeros(self.count, dtype=self.tdtype,
                                                                          device=self.device)
            self.buf = self.src.clone()
        else:  # sendrecv
            self.src = self.values(r, self.count)
            self.buf = t.empty(self.count, dtype=self.tdtype, device=self.device)

    def prepare(self) -> None:
        """Before each iteration (untimed): all_reduce works in place."""
        if self.coll.startswith("all_reduce"):
            self.buf.copy_(self.src)

    def run(self) -> None:
        d, c = self.dist, self.coll
        if c == "all_reduce_sum":
            d.all_reduce(self.buf, op=d.ReduceOp.SUM)
        elif c == "all_reduce_max":
            d.all_reduce(self.buf, op=d.ReduceOp.MAX)
        elif c == "all_gather":
            d.all_gather_into_tensor(self.buf, self.src)
        elif c == "reduce_scatter":
            d.reduce_scatter_tensor(self.buf, self.src, op=d.ReduceOp.SUM)
        elif c == "all_to_all":
            d.all_to_all_single(self.buf, self.src)
        elif c == "broadcast":
            d.broadcast(self.buf, src=0)
        else:
            r, w = self.rank, self.world
            reqs = d.batch_isend_irecv([d.P2POp(d.isend, self.src, (r + 1) % w),
                                        d.P2POp(d.irecv, self.buf, (r - 1) % w)])
            for req in reqs:
                req.wait()

    def expected(self) -> tuple[Any, Any]:
        """(exact result, or None when the sum is a float; float64 sum and its error bound)."""
        t, r, w, c = self.torch, self.rank, self.world, self.coll
        if c in ("all_reduce_sum", "reduce_scatter"):
            n, off = (self.count, 0) if c == "all_reduce_sum" else (self.chunk, r * self.chunk)
            if not self.float:
                total = self.values(0, n, off)
                for q in range(1, w):  # one rank's input at a time: memory stays a few buffers
                    total += self.values(q, n, off)
                return total, None
            exact = t.zeros(n, dtype=t.float64, device=self.device)
            mag = t.zeros(n, dtype=t.float64, device=self.device)
            for q in range(w):
                part = self.values(q, n, off).to(t.float64)
                exact += part
                mag += part.abs()
            # Each of the world-1 additions rounds once: |error| <= world x u x sum|x|
            # (u: the dtype's unit roundoff), whatever order the backend adds in.
            u = 2.0 ** -24 if self.tdtype == t.float32 else 2.0 ** -8
            return None, (exact, mag * (w * u) + 1e-30)
        if c == "all_reduce_max":
            out = self.values(0, self.count)
            for q in range(1, w):
                out = t.maximum(out, self.values(q, self.count))
            return out, None
        if c == "all_gather":
            return t.cat([self.values(q, self.chunk) for q in range(w)]), None
        if c == "all_to_all":
            return t.cat([self.values(q, self.chunk, r * self.chunk) for q in range(w)]), None
        if c == "broadcast":
            return self.values(0, self.count), None
        return self.values((r - 1) % w, self.count), None

    def check(self) -> dict[str, Any]:
        t = self.torch
        exact, bounded = self.expected()
        got = self.buf
        if exact is not None:
            if bool(t.equal(got, exact)):
                return {"check": "ok"}
            bad = (got != exact).nonzero()
            i = int(bad[0].item())
            return {"check": f"wrong result: element {i} of {got.numel()} is {got[i].item()!r}, "
                             f"expected {exact[i].item()!r} ({_many(bad.numel(), 'element differs', 'elements differ')})"}
        want, tol = bounded
        err = (got.to(t.float64) - want).abs()
        over = (err > tol).nonzero()
        pick = t.linspace(0, max(got.numel() - 1, 0), min(SAMPLE, got.numel()), device=self.device).long()
        out = {"max_err": float(err.max().item()) if err.numel() else 0.0,
               "sample": got.to(t.float64)[pick].tolist(), "sample_tol": tol[pick].tolist()}
        if over.numel():
            i = int(over[0].item())
            out["check"] = (f"wrong result: element {i} of {got.numel()} is {got[i].item()!r}, expected "
                            f"{want[i].item():.6g} within {tol[i].item():.3g} "
                            f"({_many(over.numel(), 'element', 'elements')} outside)")
        else:
            out["check"] = "ok"
        return out


def _max_bytes(torch: Any, device: Any, world: int) -> int | None:
    """The largest message this device can hold with its copies and check (None on CPU)."""
    if device.type != "cuda":
        return None
    free, _total = torch.cuda.mem_get_info(device)
    # The input, its pristine copy, the output, and the check's int64 indices and float64 sum
    # and bound: up to ~20 bytes per byte of a bf16 message, ~24 with room; and both arms'
    # ranks share this GPU for the whole run (each holds its caching allocator's blocks), so
    # each arm may take half of what is free when it starts.
    return int(free // 48)


def _rank_main(plan: dict[str, Any], index: int) -> int:
    stores: list[Any] = []
    rank = plan["ranks"][index]
    try:
        return _rank_body(plan, index, stores)
    finally:
        if stores:
            _finish(stores[0], rank, plan)


def _finish(store: Any, rank: int, plan: dict[str, Any]) -> None:
    """Rank 0 hosts the store (locally): it stays up until every rank is done with it, or a
    rank that failed fast would take it away from ranks still starting (as the probe does)."""
    try:
        store.add("finished", 1)
        if rank == 0 and plan["host_store"]:
            deadline = time.monotonic() + plan["pg_timeout"]
            while store.add("finished", 0) < plan["world"] and time.monotonic() < deadline:
                time.sleep(0.02)
    except Exception:
        pass


class _Pipe:
    """The parent's orders (``run CASE ROUND``, ``quit``) in, one word per order out."""

    def __init__(self, fds: list[int]) -> None:
        self.orders = os.fdopen(fds[0], "r", encoding="utf-8")
        self.acks = os.fdopen(fds[1], "w", encoding="utf-8")

    def say(self, word: str) -> None:
        try:
            self.acks.write(word + "\n")
            self.acks.flush()
        except OSError:
            pass  # the parent is gone: it reads the records, not the acks


def _rank_body(plan: dict[str, Any], index: int, stores: list[Any]) -> int:
    import torch
    import torch.distributed as dist

    rank, local_rank = plan["ranks"][index], plan["local_ranks"][index]
    pipe = _Pipe(plan["fds"][index])
    out = plan["out"]
    stage = os.path.join(out, f"rank{rank}.stage")
    world = plan["world"]
    timeout = timedelta(seconds=plan["pg_timeout"])
    with open(os.path.join(out, f"rank{rank}.jsonl"), "w", encoding="utf-8") as fh:
        head: dict[str, Any] = {"rank": rank, "torch": torch.__version__, "pid": os.getpid()}
        try:
            _stage(stage, "connecting to the store")
            # Locally rank 0 hosts the store; under --cluster the job's store is already up.
            store = dist.TCPStore(plan["addr"], plan["port"], world, rank == 0 and plan["host_store"],
                                  timeout=timeout, wait_for_workers=False)
            store = dist.PrefixStore(plan["prefix"], store)
            stores.append(store)
            device = torch.device(plan["device"], local_rank) if plan["device"] == "cuda" else torch.device("cpu")
            kw: dict[str, Any] = {}
            if device.type == "cuda":
                torch.cuda.set_device(device)
                if "device_id" in inspect.signature(dist.init_process_group).parameters and plan["backend"] != "gloo":
                    kw["device_id"] = device
            if plan.get("fr_seconds"):
                from .._fr import enable_hang_dump

                enable_hang_dump(plan["fr_seconds"])
            _stage(stage, "init_process_group")
            start = time.perf_counter()
            dist.init_process_group(plan["backend"], store=store, rank=rank, world_size=world, timeout=timeout, **kw)
            head["init_ms"] = round((time.perf_counter() - start) * 1000, 1)
            pg = dist.group.WORLD
            impl = plan["backend"]
            try:
                impl = pg._get_backend(device).name()
            except Exception:
                pass
            head["impl"] = impl
            head["max_bytes"] = _max_bytes(torch, device, world)
        except Exception as exc:
            head["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:500]
            head["where"] = traceback.format_exc().splitlines()[-3:]
            _line(fh, head)
            pipe.say("error")
            return 0
        _line(fh, head)
        _stage(stage, "waiting for the first block")
        pipe.say("ready")
        timer = _Timer(torch, device)
        if device.type == "cpu" and "OMP_NUM_THREADS" not in os.environ:
            # One intra-op thread per rank, as torchrun sets for several ranks a node: ranks that
            # each spread a tensor op over every core wait on each other's threads.
            torch.set_num_threads(1)
        cells: dict[int, bool] = {}  # case index -> still measured (False: skipped or failed)
        kept: dict[int, _Case] = {}  # case index -> its buffers, while they fit in KEEP_BYTES
        for order in pipe.orders:
            words = order.split()
            if not words or words[0] != "run":
                break
            i, r = int(words[1]), int(words[2])
            coll, dtype, nbytes = plan["cases"][i]
            if i in cells and not cells[i]:
                pipe.say("ok")
                continue
            rec = _block(torch, dist, (coll, dtype, nbytes), rank, world, device, plan, stage, timer,
                         r, first=i not in cells, kept=kept, index=i)
            cells[i] = "us" in rec
            _line(fh, rec)
            check = str(rec.get("check", "")).lower()
            if check.startswith("error:") and any(w in check for w in plan["stop_words"]):
                # The group is broken (a peer timed out or went away): every later block would
                # wait its full timeout too.
                _stage(stage, f"stopped after {coll} {dtype} {human_size(nbytes)} failed")
                _line(fh, {"done": True, "stopped": rec["check"]})
                pipe.say("stop")
                return 0
            pipe.say("ok")
        _stage(stage, "destroy_process_group")
        dist.destroy_process_group()
        _stage(stage, "finished")
        _line(fh, {"done": True})
    return 0


class _Timer:
    """Microseconds of one call: CUDA events on the rank's stream on a GPU (what the GPU
    spent, not what the host waited), the host clock around a blocking call on CPU."""

    def __init__(self, torch: Any, device: Any) -> None:
        self.torch, self.cuda = torch, device.type == "cuda"
        self.device = device

    def sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize(self.device)

    def time(self, call: Any) -> float:
        if self.cuda:
            start = self.torch.cuda.Event(enable_timing=True)
            end = self.torch.cuda.Event(enable_timing=True)
            start.record()
            call()
            end.record()
            end.synchronize()
            return round(float(start.elapsed_time(end)) * 1000, 2)
        begin = time.perf_counter()
        call()
        return round((time.perf_counter() - begin) * 1e6, 2)


def _block(torch: Any, dist: Any, cell: tuple[str, str, int], rank: int, world: int, device: Any,
           plan: dict[str, Any], stage: str, timer: _Timer, round_: int, first: bool,
           kept: dict[int, _Case] | None = None, index: int = -1) -> dict[str, Any]:
    """One block of one case: (the first time: the warm-up), the block's timed calls; the
    first block also checks the result.  No untimed call lines the ranks up: the ranks of an
    arm hear the parent's order within microseconds of each other, and whatever that adds
    to a block's first call it adds to both arms' blocks alike."""
    coll, dtype, nbytes = cell
    rec: dict[str, Any] = {"c": coll, "t": dtype, "s": nbytes, "r": round_}
    limit = _max_bytes(torch, device, world) if first and device.type == "cuda" else None
    if limit is not None and nbytes > limit:
        rec["skip"] = "larger than free GPU memory allows"
        return rec
    case = (kept or {}).get(index) or _Case(torch, dist, coll, dtype, nbytes, rank, world, device)
    if case.count == 0:
        split = coll in ("all_gather", "reduce_scatter", "all_to_all")
        rec["skip"] = (f"fewer {dtype} elements than ranks in {human_size(nbytes)}" if split
                       else f"{human_size(nbytes)} holds no {dtype} element")
        return rec
    _stage(stage, f"{coll} {dtype} {human_size(nbytes)}")
    try:
        if not hasattr(case, "buf"):
            case.setup()
            held = sum(t.numel() * t.element_size() for k in (kept or {}).values() for t in (k.src, k.buf))
            if kept is not None and held + case.src.numel() * case.src.element_size() + (
                    case.buf.numel() * case.buf.element_size()) <= KEEP_BYTES:
                kept[index] = case
        for _ in range(plan["warmup"] if first else 0):
            case.prepare()
            case.run()
        timer.sync()
        times = []
        for _ in range(plan["block_iters"]):
            case.prepare()
            timer.sync()
            times.append(timer.time(case.run))
        rec["us"] = times
        if first:
            rec["n"] = case.count
            rec.update(case.check())
    except Exception as exc:  # the backend's own error, one line
        text = str(exc).splitlines()[0] if str(exc) else ""
        unsupported = isinstance(exc, NotImplementedError) or "not supported" in text.lower() or (
            "unsupported" in text.lower())
        rec["check"] = ("unsupported: " if unsupported else "error: ") + f"{type(exc).__name__}: {text}"[:300]
    return rec


def main() -> int:
    with open(sys.argv[1], encoding="utf-8") as fh:
        plan = json.load(fh)
    import torch
    import torch.distributed  # noqa: F401

    pids = []
    mine = [fd for pair in plan["fds"] for fd in pair]
    for index in range(len(plan["ranks"])):
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                for fd in mine:  # only this rank's ends stay open: the parent sees EOF when a rank dies
                    if fd not in plan["fds"][index]:
                        os.close(fd)
                code = _rank_main(plan, index)
            except BaseException:
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        pids.append(pid)
    for fd in mine:
        os.close(fd)
    code = 0
    for pid in pids:
        _, status = os.waitpid(pid, 0)
        code = code or os.waitstatus_to_exitcode(status)
    return 0 if code == 0 else 1


if __name__ == "__main__":
    from .._exit import skip_final_gc

    skip_final_gc()
    sys.exit(main())
