"""The compat helpers on real gloo groups (2-3 processes on loopback), torch 2.13-2.15."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import Script, run_ranks

pytestmark = [pytest.mark.torch, pytest.mark.slow]

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

# One pair of ranks runs every check below, in this order, and prints one JSON line with a
# part per check (or the traceback that ended it); each test asserts its own part.  The order
# matters: the flight-recorder check reads WORLD's entries before a later check adds its own,
# and the timeout check leaves the group unusable, so it comes last.  A second pair runs the
# is_nccl check alone under TORCH_DISTRIBUTED_DEBUG=DETAIL (read when torch.distributed is
# imported, so it needs processes of its own).
CHECKS = """
import json, os, sys, traceback
from datetime import timedelta
import torch
import torch.distributed as dist
from ncclx_migrate import backend as nb

rank, world, port = (int(a) for a in sys.argv[1:4])
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                        world_size=world, timeout=timedelta(seconds=60))
store = dist.distributed_c10d._get_default_store()
report = {}


def check(fn):
    out = report[fn.__name__] = {}
    try:
        fn(out)
    except Exception:
        out["raised"] = traceback.format_exc()


@check
def is_nccl(out):
    world_pg = dist.group.WORLD
    sub = dist.new_group([0, 1])
    be = world_pg._get_backend(torch.device("cpu"))
    out["world"] = nb.is_nccl(world_pg)
    out["sub"] = nb.is_nccl(sub)
    out["backend"] = nb.is_nccl(be)
    out["backend_type"] = type(be).__name__
    out["names"] = {n: nb.is_nccl(n) for n in ["nccl", "NCCL", "nccl2", "nccl-legacy", "nccl-lazy",
                                              "gloo", "cpu:gloo,cuda:nccl", "cpu:gloo", "mpi"]}
    out["enum"] = nb.is_nccl(dist.Backend.NCCL)
    # what isinstance said of them: not NCCL (no TypeError)
    out["others"] = [nb.is_nccl(x) for x in (None, 42, dist.ProcessGroupGloo)]
    out["backend_only"] = [nb.is_nccl_backend(x) for x in (world_pg, be, "nccl", None)]


if os.environ.get("TORCH_DISTRIBUTED_DEBUG") == "DETAIL":
    dist.barrier()
    dist.destroy_process_group()
    print(json.dumps(report))
    sys.exit(0)


@check
def dump_flight_recorder(out):
    sub = dist.new_group([0, 1])
    dist.all_reduce(torch.ones(1))
    dist.all_reduce(torch.ones(2), group=sub)
    dist.all_reduce(torch.ones(3), group=sub)
    world = nb.dump_flight_recorder(dist.group.WORLD)
    mine = nb.dump_flight_recorder(sub, stack_traces=True)
    out["recorders"] = sorted(mine)
    entries = mine["gloo"]["entries"]
    out["names"] = sorted({e["profiling_name"] for e in entries})
    out["sizes"] = [e["input_sizes"] for e in entries]
    out["groups"] = sorted({e["process_group"][0] for e in entries})
    out["sub_name"] = dist.distributed_c10d._get_process_group_name(sub)
    out["world_sizes"] = [e["input_sizes"] for e in world["gloo"]["entries"]
                          if e["profiling_name"] == "gloo:all_reduce"]
    out["frames"] = any(f["filename"].endswith("train.py") for e in entries for f in e["frames"])


@check
def coalescing(out):
    a = torch.full((2,), float(rank + 1))
    b = torch.full((3,), 10.0 * (rank + 1))
    with nb.coalescing():
        dist.all_reduce(a)
        dist.all_reduce(b)
    out["sums"] = [a.tolist(), b.tolist()]
    sub = dist.new_group([0, 1])
    try:
        with nb.coalescing(sub):
            dist.all_reduce(a, group=sub)
            raise KeyError("user error inside the block")
    except KeyError:
        pass
    c = torch.ones(1)
    with nb.coalescing(sub):  # torch's bare manager fails here: "non-empty op list"
        dist.all_reduce(c, group=sub)
    out["after"] = c.item()


@check
def nccl_versions(out):
    import ctypes

    for name in ("runtime_nccl_version", "build_nccl_version"):
        try:
            out[name] = list(getattr(nb, name)())
        except RuntimeError as exc:
            out[name] = str(exc)
    # independent reading: ncclGetVersion of the libnccl.so.2 mapped into this process
    libs = [line.split()[-1] for line in open("/proc/self/maps") if "libnccl.so" in line]
    if libs:
        v = ctypes.c_int()
        ctypes.CDLL(libs[0]).ncclGetVersion(ctypes.byref(v))
        code = v.value
        out["loaded"] = [code // 10000, code // 100 % 100, code % 100]
        out["cuda_nccl"] = list(torch.cuda.nccl.version()[:3])


dist.barrier()  # both ranks are done with every collective above before rank 0's lone one


@check
def set_timeout(out):
    # Rank 1 never joins the all_reduce; rank 0 must give up with the 2 s set by set_timeout,
    # not the 60 s the group was created with (gloo names the timeout in its error).
    nb.set_timeout(timedelta(seconds=2))
    if rank == 0:
        try:
            dist.all_reduce(torch.ones(1))
            out["error"] = None
        except RuntimeError as exc:
            out["error"] = str(exc)
        store.set("rank0-done", "1")
        store.wait(["rank1-done"], timedelta(seconds=60))  # rank 0 hosts the store: leave last
    else:
        store.wait(["rank0-done"], timedelta(seconds=60))
        store.set("rank1-done", "1")
    try:
        nb.set_timeout(5)
    except TypeError as exc:
        out["bad"] = str(exc)


print(json.dumps(report))
sys.stdout.flush()
os._exit(0)  # the group is unusable after the timeout
"""


@pytest.fixture(scope="module")
def checks(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    """Each rank's report: "plain" (every check), "detail" (is_nccl under DETAIL)."""
    path = tmp_path_factory.mktemp("compat") / "train.py"
    path.write_text(CHECKS)
    return {"plain": run_ranks(Script(path), 2),
            "detail": run_ranks(Script(path), 2, {"TORCH_DISTRIBUTED_DEBUG": "DETAIL"})}


def _part(checks: dict[str, list[dict[str, Any]]], name: str, run: str = "plain") -> list[dict[str, Any]]:
    """Each rank's part for check ``name``; one that raised fails the test with its traceback."""
    parts = [got[name] for got in checks[run]]
    for rank, part in enumerate(parts):
        assert "raised" not in part, f"rank {rank}: {part['raised']}"
    return parts


def test_is_nccl_on_gloo_groups_backends_names_and_the_debug_wrapper(checks) -> None:  # type: ignore[no-untyped-def]
    for run in ("plain", "detail"):
        results = _part(checks, "is_nccl", run)
        for got in results:
            assert got["world"] is False and got["sub"] is False and got["backend"] is False
            assert got["names"] == {
                "nccl": True, "NCCL": True, "nccl2": True, "nccl-legacy": True,
                "nccl-lazy": True, "gloo": False, "cpu:gloo,cuda:nccl": True,
                "cpu:gloo": False, "mpi": False,
            }
            assert got["enum"] is True
            assert got["others"] == [False, False, False]
            assert got["backend_only"] == [False, False, False, False]
        # under DETAIL torch wraps the backend; is_nccl unwraps it instead of failing
        expected = "_ProcessGroupWrapper" if run == "detail" else "ProcessGroupGloo"
        assert results[0]["backend_type"] == expected


def test_set_timeout_applies_to_the_group(checks) -> None:  # type: ignore[no-untyped-def]
    results = _part(checks, "set_timeout")
    assert "Timed out waiting 2000ms" in str(results[0]["error"])
    assert results[1]["bad"] == (
        "set_timeout() needs a datetime.timedelta or a float of seconds, not int")


def test_coalescing_batches_and_survives_an_exception(checks) -> None:  # type: ignore[no-untyped-def]
    for got in _part(checks, "coalescing"):
        assert got["sums"] == [[3.0, 3.0], [30.0, 30.0, 30.0]]
        assert got["after"] == 2.0


def test_dump_flight_recorder_returns_this_groups_entries(checks) -> None:  # type: ignore[no-untyped-def]
    for got in _part(checks, "dump_flight_recorder"):
        assert got["recorders"] == ["gloo"]
        assert got["names"] == ["gloo:all_reduce"]
        assert got["sizes"] == [[[2]], [[3]]]
        assert got["groups"] == [got["sub_name"]]
        assert [[1]] in got["world_sizes"] and [[2]] not in got["world_sizes"]
        assert got["frames"] is True


def test_nccl_versions_match_the_library_torch_loads(checks) -> None:  # type: ignore[no-untyped-def]
    for got in _part(checks, "nccl_versions"):
        if dist.is_nccl_available():
            assert got["runtime_nccl_version"] == got["loaded"]
            assert got["build_nccl_version"] == got["cuda_nccl"]
        else:
            expected = f"torch {torch.__version__.split('+')[0].rsplit('.', 1)[0]} was built without NCCL"
            assert got["runtime_nccl_version"].startswith(expected)
            assert got["build_nccl_version"].startswith(expected)
