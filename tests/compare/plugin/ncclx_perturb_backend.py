"""Test-only c10d backend "perturbed": real gloo underneath, one fault on top.

Registered through torch's ``torch.distributed.backends`` entry points by the dist-info
beside this file; tests/compare puts this folder on the arm's PYTHONPATH only, so the
``ncclx`` process and the other arm never see it.  ``NCCLX_PERTURB`` says what to do:

* ``wrong:COLLECTIVE:BYTES:RANK``: that rank's result of that collective at that size is off by one;
* ``slow:COLLECTIVE:SECONDS``: every call of that collective first sleeps SECONDS;
* ``slower:COLLECTIVE:FACTOR``: every call of that collective takes FACTOR times as long: it
  runs, waits for its result, then spins on the CPU for (FACTOR - 1) times what it took (a
  steady, real slowdown in proportion, as slower code would be);
* ``hang:COLLECTIVE:BYTES:RANK``: that rank never returns from that collective at that size;
* several of them joined by ``+``.

COLLECTIVE is an ``ncclx compare`` id (all_reduce_sum, all_gather, broadcast, ...; not sendrecv:
this backend has no point-to-point ops), BYTES the
case's message size as ncclx compare counts it.
"""

from __future__ import annotations

import os
import time
from typing import Any

import torch.distributed as dist
from torch._C._distributed_c10d import Backend


def _faults() -> dict[str, tuple[str, str, str]]:
    """COLLECTIVE -> (kind, argument, rank)."""
    out = {}
    for fault in os.environ.get("NCCLX_PERTURB", "").split("+"):
        kind, coll, arg, who = [*fault.split(":"), "0", "0", "0"][:4]
        out[coll] = (kind, arg, who)
    return out


class Perturbed(Backend):
    """A c10d Backend written in Python around a real ProcessGroupGloo.  torch 2.15 names the
    tensor collectives all_gather_single / reduce_scatter_single / all_to_all_single; 2.14
    _allgather_base / _reduce_scatter_base / alltoall_base: both spellings forward."""

    def __init__(self, inner: Any, rank: int, size: int) -> None:
        super().__init__(rank, size)
        self.inner = inner
        self.faults = _faults()

    def getBackendName(self) -> str:
        return "perturbed"

    def _around(self, coll: str, nbytes: int, out: Any, call: Any) -> Any:
        kind, arg, who = self.faults.get(coll, ("none", "0", "0"))
        here = kind in ("wrong", "hang") and nbytes == int(arg) and self.rank() == int(who)
        if kind == "slow":
            time.sleep(float(arg))
        elif kind == "slower":
            begin = time.perf_counter()
            work = call()
            work.wait()
            until = time.perf_counter() + (float(arg) - 1) * (time.perf_counter() - begin)
            while time.perf_counter() < until:
                pass
            return work
        elif kind == "hang" and here:
            while True:
                time.sleep(1)
        work = call()
        if kind == "wrong" and here:
            work.wait()
            out.view(-1)[0] += 1
        return work

    def allreduce(self, tensors: Any, opts: Any) -> Any:
        t = tensors[0]
        coll = "all_reduce_max" if opts.reduceOp == dist.ReduceOp.MAX else "all_reduce_sum"
        return self._around(coll, _bytes(t), t, lambda: self.inner.allreduce(tensors, opts))

    def all_gather_single(self, output: Any, input: Any, opts: Any) -> Any:
        return self._around("all_gather", _bytes(output), output,
                            lambda: self.inner.all_gather_single(output, input, opts))

    def _allgather_base(self, output: Any, input: Any, opts: Any) -> Any:
        return self._around("all_gather", _bytes(output), output,
                            lambda: self.inner._allgather_base(output, input, opts))

    def reduce_scatter_single(self, output: Any, input: Any, opts: Any) -> Any:
        return self._around("reduce_scatter", _bytes(input), output,
                            lambda: self.inner.reduce_scatter_single(output, input, opts))

    def _reduce_scatter_base(self, output: Any, input: Any, opts: Any) -> Any:
        return self._around("reduce_scatter", _bytes(input), output,
                            lambda: self.inner._reduce_scatter_base(output, input, opts))

    def all_to_all_single(self, output: Any, input: Any, *rest: Any) -> Any:
        return self._around("all_to_all", _bytes(input), output,
                            lambda: self.inner.all_to_all_single(output, input, *rest))

    def alltoall_base(self, output: Any, input: Any, *rest: Any) -> Any:
        return self._around("all_to_all", _bytes(input), output,
                            lambda: self.inner.alltoall_base(output, input, *rest))

    def broadcast(self, tensors: Any, opts: Any) -> Any:
        t = tensors[0]
        return self._around("broadcast", _bytes(t), t, lambda: self.inner.broadcast(tensors, opts))

    def barrier(self, opts: Any) -> Any:
        return self.inner.barrier(opts)


def _bytes(t: Any) -> int:
    return int(t.numel() * t.element_size())


def _create(store: Any, rank: int, size: int, timeout: Any) -> Perturbed:
    return Perturbed(dist.ProcessGroupGloo(store, rank, size, timeout), rank, size)


def register() -> None:
    dist.Backend.register_backend("perturbed", _create, devices=["cpu"])
