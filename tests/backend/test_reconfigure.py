"""reconfigure() on real gloo groups: 3 ranks, one dies, the survivors re-form, a new process
joins; stale handles and a reused uuid fail on EVERY member (torch fails only on new rank 0)."""

from __future__ import annotations

import json

import pytest

from ..forked import run_forked
from .conftest import clean_env, free_port

pytestmark = [pytest.mark.torch, pytest.mark.slow]

torch = pytest.importorskip("torch")
c10d = pytest.importorskip("torch.distributed.distributed_c10d")
MINOR = ".".join(torch.__version__.split("+")[0].split(".")[:2])  # "2.13"
HAS_RECONFIGURE = hasattr(c10d, "_reconfigure")

MEMBER = r"""
import json, os, sys, time
from datetime import timedelta
import torch
import torch.distributed as dist
from ncclx_migrate import backend as nb

role, port = sys.argv[1], int(sys.argv[2])
T = timedelta(seconds=30)
store = dist.TCPStore("127.0.0.1", port, None, role == "0", T, wait_for_workers=False)
out = {"role": role}

def publish(step, key):
    store.set(f"t/{step}/{key}", nb.reconfigure_handle())

def collect(step, keys):
    store.wait([f"t/{step}/{k}" for k in keys], T)
    return [store.get(f"t/{step}/{k}").decode() for k in keys]

def total():
    t = torch.ones(1)
    dist.all_reduce(t)
    return int(t.item())

def refused(**kw):
    try:
        nb.reconfigure(**kw)
    except nb.ReconfigureError as exc:
        return str(exc)
    return None

if role == "join":
    # a brand-new process: its own 1-rank group on the same store prefix and group name
    dist.init_process_group("gloo", store=dist.PrefixStore("main", store), rank=0, world_size=1,
                            enable_reconfigure=True, timeout=T)
    publish("grow", "join")
    handles = collect("grow", ["0", "1", "join"])
    nb.reconfigure(handles=handles)
    out["grow"] = [dist.get_rank(), dist.get_world_size(), total()]
else:
    rank = int(role)
    dist.init_process_group("gloo", store=dist.PrefixStore("main", store), rank=rank, world_size=3,
                            enable_reconfigure=True, timeout=T)
    publish("first", role)
    first = collect("first", ["0", "1", "2"])
    out["uuid_first"] = nb.reconfigure(handles=first)
    out["first"] = [dist.get_rank(), dist.get_world_size(), total()]
    if rank == 2:
        print(json.dumps(out)); sys.stdout.flush()
        os._exit(0)  # dies
    # survivors: fresh handles, in old-rank order
    publish("shrink", role)
    shrink = collect("shrink", ["0", "1"])
    used = nb.reconfigure(handles=shrink)
    out["shrink"] = [dist.get_rank(), dist.get_world_size(), total()]
    # the list from before the last reconfigure is stale now, on every member
    out["stale"] = refused(handles=shrink)
    # the same uuid again with fresh handles: torch would refuse only on new rank 0
    publish("reuse", role)
    out["reuse"] = refused(uuid=used, handles=collect("reuse", ["0", "1"]))
    fresh = collect("reuse", ["0", "1"])
    # members passing different orders are refused together, before torch is called
    out["disagree"] = refused(handles=fresh if rank == 0 else fresh[::-1])
    try:
        nb.reconfigure(handles=set(shrink))
    except TypeError as exc:
        out["set"] = str(exc)
    out["after_refusals"] = total()  # the refusals left the group working
    nb.reconfigure(handles=fresh)  # the same members retry: a new attempt, a new uuid
    out["retry"] = [dist.get_rank(), dist.get_world_size(), total()]
    publish("grow", role)
    nb.reconfigure(handles=collect("grow", ["0", "1", "join"]))
    out["grow"] = [dist.get_rank(), dist.get_world_size(), total()]
print(json.dumps(out))
sys.stdout.flush()
os._exit(0)
"""


@pytest.mark.skipif(not HAS_RECONFIGURE, reason=f"torch {torch.__version__} has no reconfigure API")
def test_shrink_after_a_death_then_grow_with_a_new_process(tmp_path) -> None:  # type: ignore[no-untyped-def]
    script = tmp_path / "member.py"
    script.write_text(MEMBER)
    roles, port = ("0", "1", "2", "join"), str(free_port())
    # forks of one interpreter that imported torch (tests/forked.py)
    ran = run_forked(script, [[role, port] for role in roles], tmp_path / "out", env=clean_env())
    results = {}
    for role, res in zip(roles, ran, strict=True):
        assert res.returncode == 0, f"{role}: {res.stderr[-3000:]}"
        results[role] = json.loads(res.stdout.strip().splitlines()[-1])
    r0, r1, r2, rj = results["0"], results["1"], results["2"], results["join"]
    assert [r0["first"], r1["first"], r2["first"]] == [[0, 3, 3], [1, 3, 3], [2, 3, 3]]
    assert r0["uuid_first"] == r1["uuid_first"] == r2["uuid_first"]
    assert [r0["shrink"], r1["shrink"]] == [[0, 2, 2], [1, 2, 2]]
    for r in (r0, r1):
        assert "is not in handles: they are stale" in r["stale"]
        assert "was already used" in r["reuse"]  # on both members, not just the new rank 0
        assert "members disagree on this reconfigure" in r["disagree"]
        assert r["set"].startswith("reconfigure() needs handles as a list")
        assert r["after_refusals"] == 2
    assert [r0["retry"], r1["retry"]] == [[0, 2, 2], [1, 2, 2]]
    # ordered handles: survivors keep ranks 0 and 1, the joiner becomes rank 2
    assert [r0["grow"], r1["grow"], rj["grow"]] == [[0, 3, 3], [1, 3, 3], [2, 3, 3]]


@pytest.mark.skipif(HAS_RECONFIGURE, reason=f"torch {torch.__version__} has the reconfigure API")
def test_a_torch_without_reconfigure_gets_a_clear_error(user_script) -> None:  # type: ignore[no-untyped-def]
    res = user_script(
        """
        from ncclx_migrate.backend import ReconfigureError, reconfigure
        try:
            reconfigure(handles=["gloo:0:-1:0:127.0.0.1:1"])
        except ReconfigureError as exc:
            print(exc)
        """
    ).run()
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == (
        f"torch {MINOR} has no reconfigure API: it arrived in torch 2.14 "
        "(init_process_group(..., enable_reconfigure=True))"
    )
