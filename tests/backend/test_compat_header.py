"""The shipped C++ header <ncclx/compat.h>: found without torch, shipped in the wheel, and a
real extension built with it (tests/fixtures/cxx_harness/compat_ext.cpp) answering on a real
gloo group on 127.0.0.1, and on a legacy NCCL group under the gpu marker.

The syntax of the header against 2.13/2.14/2.15 is tests/migrate_files/test_cpp_compile.py's.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests import cxx

from .conftest import free_port

EXT_SOURCE = Path(__file__).resolve().parents[1] / "fixtures" / "cxx_harness" / "compat_ext.cpp"
EXT_NAME = "ncclx_compat_ext"

CALL = """
import importlib.util, json, sys
from datetime import timedelta
import torch, torch.distributed as dist

spec = importlib.util.spec_from_file_location("{name}", sys.argv[1])
ext = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ext)
backend_name, device = sys.argv[3], torch.device(sys.argv[4])
store = dist.TCPStore("127.0.0.1", int(sys.argv[2]), 1, is_master=True, timeout=timedelta(seconds=60))
kwargs = {{"device_id": device}} if device.type == "cuda" else {{}}
dist.init_process_group(backend_name, store=store, rank=0, world_size=1, **kwargs)
t = torch.ones(2, device=device)
dist.all_reduce(t)
be = dist.group.WORLD._get_backend(device)
out = {{"type": type(be).__name__, "kind": ext.nccl_kind(be), "is_nccl": ext.is_nccl(be),
        "null_kind": ext.null_kind(), "sum": t.sum().item()}}
try:
    out["comm_ptr"] = ext.comm_ptr(be)
except RuntimeError as exc:
    out["comm_error"] = str(exc).splitlines()[0]
dist.destroy_process_group()
print(json.dumps(out))
"""


def test_get_include_needs_no_torch() -> None:
    code = ("import os, sys, ncclx_migrate.backend as b; d = b.get_include(); "
            "print(os.path.isfile(os.path.join(d, 'ncclx', 'compat.h')), 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "False"]


def test_the_wheel_ships_the_header(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(root / name, tmp_path / name)
    shutil.copytree(root / "src", tmp_path / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
         str(tmp_path / "dist"), str(tmp_path)],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (wheel,) = (tmp_path / "dist").glob("ncclx_migrate-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "ncclx_migrate/backend/include/ncclx/compat.h" in names


@pytest.fixture(scope="module")
def extension(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """compat_ext.cpp built once against this interpreter's torch (about 25 s of CPU, nearly all
    of it g++ reading the c10d and pybind11 headers)."""
    pytest.importorskip("torch")
    built = cxx.build_extension(EXT_SOURCE, tmp_path_factory.mktemp("ext"), EXT_NAME)
    if isinstance(built, str):
        pytest.skip(f"cannot build a torch extension here: {built}")
    return built


def _call(extension: Path, backend: str, device: str, env: dict[str, str] | None = None) -> dict[str, object]:
    script = extension.with_name("call.py")
    script.write_text(CALL.format(name=EXT_NAME))
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("TORCH_", "NCCL", "NCCLX_"))}
    proc = subprocess.run(
        [sys.executable, str(script), str(extension), str(free_port()), backend, device],
        capture_output=True, text=True, timeout=120, env={**clean, **(env or {})},
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    result: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.slow  # builds a real extension with g++ (25 s of CPU)
def test_extension_says_a_gloo_backend_is_not_nccl(extension: Path) -> None:
    got = _call(extension, "gloo", "cpu")
    assert got["type"] == "ProcessGroupGloo" and got["sum"] == 2.0
    assert got["kind"] == "not-nccl" and got["is_nccl"] is False and got["null_kind"] == "not-nccl"
    assert got["comm_error"] == "ncclx::comm_ptr: the backend is not NCCL (gloo)"


@pytest.mark.gpu
def test_gpu_extension_on_a_legacy_nccl_group(extension: Path) -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device visible")
    from torch.distributed import distributed_c10d as c10d

    # The legacy class: plain "nccl" before nccl2 is the default, the rollback on 2.15.
    env = {"TORCH_DIST_USE_NCCL2": "0"} if hasattr(c10d, "_create_nccl2_process_group") else {}
    got = _call(extension, "nccl", "cuda:0", env)
    assert got["type"] == "ProcessGroupNCCL" and got["sum"] == 2.0
    assert got["kind"] == "nccl" and got["is_nccl"] is True
    assert isinstance(got["comm_ptr"], int) and got["comm_ptr"] != 0
    if hasattr(c10d, "_create_nccl2_process_group"):
        nccl2 = _call(extension, "nccl", "cuda:0")
        assert nccl2["kind"] == "nccl2" and nccl2["is_nccl"] is True
        assert isinstance(nccl2["comm_ptr"], int) and nccl2["comm_ptr"] != 0


@pytest.mark.slow  # builds a real extension with g++ (25 s of CPU)
def test_doctor_sees_that_an_extension_built_with_the_header_knows_nccl2(extension: Path) -> None:
    """The built .so names both classes' typeinfo (its dynamic_casts), so compiled-extensions
    does not flag it."""
    from tests.conftest import run_ncclx

    pythonpath = os.pathsep.join(p for p in (str(extension.parent), os.environ.get("PYTHONPATH", "")) if p)
    proc = run_ncclx("doctor", "--level", "static", "--check", "compiled-extensions", "--json",
                     env={"PYTHONPATH": pythonpath}, timeout=60)
    check = json.loads(proc.stdout)["checks"][0]
    assert check["status"] == "ok", check
    assert str(extension) in check["details"]["both_classes"]
