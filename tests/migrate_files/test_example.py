"""The shipped demo repo stays a real project with findings in every file kind."""

from __future__ import annotations

from pathlib import Path

import pytest

from ncclx_migrate._migrate._files import scan
from ncclx_migrate._migrate._model import Options

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "legacy-trainer"

# File -> rule codes the non-Python scanners must report there.
EXPECTED = {
    "launch.sh": {"NCX201", "NCX202", "NCX203"},
    "launch.sbatch": {"NCX201", "NCX202", "NCX203"},
    "Dockerfile": {"NCX201", "NCX202", "NCX203"},
    ".env": {"NCX201", "NCX202", "NCX203"},
    "k8s/job.yaml": {"NCX201", "NCX202", "NCX203"},
    "csrc/comm.cpp": {"NCX301"},
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_example_file_findings(name: str) -> None:
    path = EXAMPLE / name
    result = scan(str(path), path.read_text(encoding="utf-8"), Options())
    assert result is not None and result.error is None
    assert {f.code for f in result.findings} == EXPECTED[name]


@pytest.mark.parametrize("name", ["train.py", "dist_utils.py", "setup.py"])
def test_example_python_compiles(name: str) -> None:
    source = (EXAMPLE / name).read_text(encoding="utf-8")
    compile(source, name, "exec")


def test_example_suppression_is_honoured() -> None:
    path = EXAMPLE / "launch.sh"
    result = scan(str(path), path.read_text(encoding="utf-8"), Options())
    assert result is not None
    lines = path.read_text(encoding="utf-8").splitlines()
    flagged = {lines[f.line - 1] for f in result.findings}
    assert not any("ncclx: ignore" in line for line in flagged)


def test_example_notebook_findings() -> None:
    path = EXAMPLE / "notebooks" / "collective_check.ipynb"
    result = scan(str(path), path.read_text(encoding="utf-8"), Options())
    assert result is not None and result.error is None
    assert {f.code for f in result.findings} >= {"NCX101", "NCX110", "NCX201", "NCX202", "NCX203"}


def test_demo_write_on_a_copy_keeps_every_file_valid(tmp_path: Path) -> None:
    """`ncclx migrate --write --unsafe-fixes` on a copy of the demo: every file still
    compiles/parses, a second run changes nothing, and the original is untouched."""
    import json
    import shutil
    import subprocess

    import yaml

    from tests.conftest import run_ncclx

    before = {p: p.read_bytes() for p in EXAMPLE.rglob("*") if p.is_file()}
    work = tmp_path / "legacy-trainer"
    shutil.copytree(EXAMPLE, work, ignore=shutil.ignore_patterns("__pycache__"))
    first = run_ncclx("migrate", "--write", "--unsafe-fixes", "-q", "--format", "json", str(work))
    assert first.returncode == 1, first.stderr  # flag-only findings remain
    doc = json.loads(first.stdout)
    assert doc["errors"] == [] and any(f["applied"] for f in doc["findings"])
    for py in work.glob("*.py"):
        compile(py.read_text(encoding="utf-8"), str(py), "exec")
    for sh in (work / "launch.sh", work / "launch.sbatch"):
        assert subprocess.run(["bash", "-n", str(sh)], capture_output=True, timeout=30).returncode == 0
    yaml.safe_load((work / "k8s" / "job.yaml").read_text(encoding="utf-8"))
    json.loads((work / "notebooks" / "collective_check.ipynb").read_text(encoding="utf-8"))
    assert "TORCH_DIST_USE_NCCL2" not in (work / "launch.sh").read_text(encoding="utf-8")
    comm = (work / "csrc" / "comm.cpp").read_text(encoding="utf-8")
    assert "dynamic_cast<c10d::nccl2::ProcessGroupNCCL*>(backend.get())" in comm  # the second branch
    def files() -> dict[Path, bytes]:  # the project's files; its cache (setup.py marks the root) is not
        return {p: p.read_bytes() for p in work.rglob("*") if p.is_file() and ".ncclx_cache" not in p.parts}

    snapshot = files()
    second = run_ncclx("migrate", "--write", "--unsafe-fixes", "-q", "--format", "json", str(work))
    assert not any(f["applied"] for f in json.loads(second.stdout)["findings"])
    assert files() == snapshot
    assert {p: p.read_bytes() for p in EXAMPLE.rglob("*") if p.is_file()} == before


@pytest.mark.torch
@pytest.mark.slow
def test_example_trains_on_gloo(tmp_path: Path) -> None:
    """The demo is a working trainer: two gloo ranks on CPU run a few steps."""
    import socket
    import subprocess
    import sys

    torch = pytest.importorskip("torch")
    if not hasattr(torch.distributed, "ProcessGroupNCCL"):
        pytest.skip("this torch build has no ProcessGroupNCCL (CPU wheel), which dist_utils imports")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("TORCH_")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # leave the demo directory as shipped
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
         "--master-addr", "127.0.0.1", "--master-port", str(port),
         "train.py", "--dist-backend", "gloo", "--steps", "11", "--trace-dir", str(tmp_path)],
        cwd=EXAMPLE, env=env, capture_output=True, text=True, timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "step 10 loss" in proc.stdout


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.timeout(1500)  # one translation unit over the c10d headers: minutes on a loaded machine
def test_example_builds_with_its_setup_py_after_use_shim(tmp_path: Path) -> None:
    """`--use-shim` includes <ncclx/compat.h> and adds its folder to setup.py's include_dirs:
    the demo's extension then builds with its own setup.py (torch.utils.cpp_extension)."""
    import os
    import shutil
    import subprocess
    import sys

    from tests import cxx
    from tests.conftest import run_ncclx

    flags = cxx.extension_flags()  # the CUDA/NCCL headers a CPU-only machine lacks, or why not
    if isinstance(flags, str):
        pytest.skip(flags)
    work = tmp_path / "legacy-trainer"
    shutil.copytree(EXAMPLE, work, ignore=shutil.ignore_patterns("__pycache__"))
    fixed = run_ncclx("migrate", "--write", "--unsafe-fixes", "--use-shim", "-q", "setup.py", "csrc/comm.cpp",
                      cwd=work)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert "#include <ncclx/compat.h>" in (work / "csrc" / "comm.cpp").read_text(encoding="utf-8")
    setup_py = (work / "setup.py").read_text(encoding="utf-8")
    assert "include_dirs=[ncclx_migrate.backend.get_include()]" in setup_py
    compile(setup_py, "setup.py", "exec")
    # The headers torch's CPU-less machine lacks come in through the compiler's environment, so
    # that the include path of the shim is setup.py's own.
    import sysconfig

    from torch.utils import cpp_extension

    own = {str(cxx.SHIPPED_INCLUDE), *cpp_extension.include_paths(), sysconfig.get_paths()["include"]}
    extra = [f[2:] for f in flags if f.startswith("-I") and f[2:] not in own]
    # CFLAGS as a user may set them: without Python's -O3 -g the build costs half the CPU
    # (48 against 97 s), and whether the code compiles does not depend on them.
    env = {**os.environ, "CPLUS_INCLUDE_PATH": os.pathsep.join([*extra, str(cxx.generated_include())]),
           "MAX_JOBS": "1", "CFLAGS": "-O0 -g0"}
    proc = subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace"], cwd=work, env=env,
                          capture_output=True, text=True, timeout=1400)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    assert list(work.glob("legacy_trainer_comm*.so"))
