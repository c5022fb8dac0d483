"""The compat helpers on a real NCCL group (world size 1 on cuda:0): gpu marker only."""

from __future__ import annotations

import json

import pytest

from .conftest import free_port

pytestmark = [pytest.mark.gpu, pytest.mark.torch]

torch = pytest.importorskip("torch")
c10d = pytest.importorskip("torch.distributed.distributed_c10d")
VERSION = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2])

HELPERS = """
import json, sys
from datetime import timedelta
import torch, torch.distributed as dist
from ncclx_migrate import backend as nb

built = nb.use_nccl2()
store = dist.TCPStore("127.0.0.1", int(sys.argv[1]), 1, is_master=True, timeout=timedelta(seconds=60))
dev = torch.device("cuda", 0)
torch.cuda.set_device(dev)
dist.init_process_group("nccl", store=store, rank=0, world_size=1, device_id=dev)
be = dist.group.WORLD._get_backend(dev)
out = {"built": built, "type": type(be).__name__, "is_nccl": [nb.is_nccl(dist.group.WORLD), nb.is_nccl(be)],
       "is_nccl_backend": [nb.is_nccl_backend(be), nb.is_nccl_backend(dist.group.WORLD)]}
nb.set_timeout(timedelta(seconds=123))
nb.set_timeout(120.0)  # a float of seconds, as backend._set_default_timeout took
a, b = torch.ones(2, device=dev), torch.ones(3, device=dev)
with nb.coalescing():
    dist.all_reduce(a)
    dist.all_reduce(b)
torch.cuda.synchronize()
out["sums"] = [a.sum().item(), b.sum().item()]
dumps = nb.dump_flight_recorder(dist.group.WORLD)
out["recorders"] = {k: sorted({e["profiling_name"] for e in d["entries"]}) for k, d in dumps.items()}
out["versions"] = [list(nb.runtime_nccl_version()), list(nb.build_nccl_version())]
out["cuda_nccl"] = list(torch.cuda.nccl.version()[:3])
dist.destroy_process_group()
print(json.dumps(out))
"""


def test_gpu_helpers_on_a_real_nccl_group(user_script) -> None:  # type: ignore[no-untyped-def]
    res = user_script(HELPERS).run(args=(str(free_port()),), timeout=300)
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout.strip().splitlines()[-1])
    nccl2 = hasattr(c10d, "_create_nccl2_process_group")
    assert got["built"] == ("nccl2" if nccl2 else "legacy")
    assert got["type"] == ("ProcessGroupNCCL2" if nccl2 else "ProcessGroupNCCL")
    assert got["is_nccl"] == [True, True]
    assert got["is_nccl_backend"] == [True, False]  # the backend object, as isinstance: not the group
    assert got["sums"] == [2.0, 3.0]
    assert got["versions"][1] == got["cuda_nccl"]
    if not nccl2:
        # legacy records natively into its own recorder, which is torch's "nccl:" namespace
        assert any(n.startswith("nccl:") for n in got["recorders"]["nccl-legacy"])
    elif VERSION >= (2, 15):
        # nccl2 records through the auto-attached hook into its own per-backend recorder
        assert any(n.startswith("nccl2:") for n in got["recorders"]["nccl2"])
