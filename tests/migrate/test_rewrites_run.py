"""Rewritten code runs on the real torch installed here (scripts/test.sh reruns this on 2.13)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import run_ncclx

SCRIPT = '''
import datetime, os, socket, sys
import torch
import torch.distributed as dist
from torch.distributed import ProcessGroupGloo

s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
dist.init_process_group("gloo", rank=0, world_size=1)
pg = dist.group.WORLD
backend = pg._get_backend(torch.device("cpu"))
results = []
if hasattr(dist, "ProcessGroupNCCL"):
    results.append(isinstance(backend, dist.ProcessGroupNCCL))
results.append(isinstance(backend, (dist.ProcessGroupNCCL if hasattr(dist, "ProcessGroupNCCL") else int, ProcessGroupGloo)))
results.append(dist.get_backend(pg) == "nccl")
results.append(dist.get_backend(pg) != dist.Backend.NCCL)
try:
    dist.all_reduce(torch.ones(1), op=dist.ReduceOp.BAND)
except RuntimeError:
    results.append("caught")
print(results)
dist.destroy_process_group()
# torch 2.14.1 sometimes aborts at interpreter exit after this sequence ("terminate called
# without an active exception", seen in full -m torch runs only); teardown is not under test.
sys.stdout.flush()
os._exit(0)
'''


@pytest.mark.torch
@pytest.mark.timeout(120)
def test_rewritten_checks_run_and_keep_their_answers(tmp_path: Path) -> None:
    pytest.importorskip("torch.distributed")
    src = tmp_path / "check.py"
    src.write_text(SCRIPT)
    before = subprocess.run([sys.executable, str(src)], capture_output=True, text=True, timeout=90)
    assert before.returncode == 0, before.stderr[-2000:]
    proc = run_ncclx("migrate", "--write", "--target-torch", "2.13", str(src))
    text = src.read_text()
    assert 'hasattr(dist, _n)' in text and '"nccl-lazy")' in text, proc.stdout
    assert "except (RuntimeError, ValueError)" in text or "except (ValueError, RuntimeError)" in text
    after = subprocess.run([sys.executable, str(src)], capture_output=True, text=True, timeout=90)
    assert after.returncode == 0, after.stderr[-2000:]
    # gloo is not NCCL under any spelling: every answer is unchanged on this torch
    assert after.stdout == before.stdout
