"""What NCX201 says about a TORCH_DIST_USE_NCCL2 value is what the installed torch does."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys

import pytest

from ncclx_migrate._migrate._files import scan
from ncclx_migrate._migrate._model import Options

VALUES = ["0", "false", "False", "no", "off", "", "1", " 0", "00", "0.0"]

# torch reads the variable when "nccl" is registered; registering again (after dropping
# the plugin) reads it again, so one process can try every value.
_PROBE = """
import json, os, sys
from torch.distributed.distributed_c10d import Backend
if not hasattr(Backend, "_ensure_backend_registered"):
    print("NO-SWITCH"); sys.exit(0)
out = {}
for value in json.loads(sys.argv[1]):
    os.environ["TORCH_DIST_USE_NCCL2"] = value
    Backend._plugins.pop("NCCL", None)
    Backend._ensure_backend_registered("nccl")
    out[value] = Backend._plugins["NCCL"].creator_fn.__name__
print(json.dumps(out))
"""


@functools.cache
def _torch_builds() -> dict[str, str] | None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCH_")}
    proc = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(VALUES)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    last = proc.stdout.strip().splitlines()[-1]
    return None if last == "NO-SWITCH" else dict(json.loads(last))


@pytest.mark.torch
@pytest.mark.parametrize("value", VALUES)
def test_ncx201_message_matches_torch(value: str) -> None:
    pytest.importorskip("torch")
    builds = _torch_builds()
    if builds is None:
        pytest.skip("this torch registers 'nccl' without entry points: no TORCH_DIST_USE_NCCL2 "
                    "switch (torch < 2.14)")
    result = scan("run.sh", f"export TORCH_DIST_USE_NCCL2='{value}'\n", Options())
    assert result is not None
    (finding,) = result.findings
    import torch

    if torch.__version__.startswith("2.14."):
        # The messages speak of 2.15 except one claim about 2.14: only the literal "1" opts in.
        assert (builds[value] == "_create_nccl2_process_group") is (value == "1"), value
        if value not in ("0", "1"):
            assert 'only "1" opts in on 2.14' in finding.detail, value  # the why lives in detail
        return
    if builds[value] == "_create_nccl_process_group":  # legacy ProcessGroupNCCL
        assert "rolls back to legacy:" in finding.message, value
        assert 'makes "nccl" build the legacy ProcessGroupNCCL' in finding.detail, value
    else:
        assert builds[value] == "_create_nccl2_process_group"
        assert "does not roll back" in finding.message or "redundant" in finding.message, value
