"""Shared test helpers: run the installed `ncclx` command, find the other torch venvs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def ncclx_exe(python: str | None = None) -> str:
    """The installed `ncclx` console script next to ``python`` (default: this interpreter)."""
    bindir = Path(python or sys.executable).parent
    exe = bindir / "ncclx"
    if not exe.exists():
        found = shutil.which("ncclx")
        assert found, "the ncclx console script is not installed; run scripts/bootstrap.sh"
        return found
    return str(exe)


def run_ncclx(
    *args: str,
    python: str | None = None,
    env: dict[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    input: str | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """Run the real `ncclx` CLI in a subprocess, with a controlled environment."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("TORCH_", "NCCL", "NCCLX_"))}
    base["NO_COLOR"] = "1"
    if env:
        base.update(env)
    return subprocess.run(
        [ncclx_exe(python), *args],
        capture_output=True,
        text=True,
        env=base,
        cwd=cwd,
        input=input,
        timeout=timeout,
    )


def other_python(var: str) -> str:
    """The interpreter of another venv named by env ``var`` (set by scripts/test.sh)."""
    path = os.environ.get(var)
    if not path or not Path(path).exists():
        if os.environ.get("CI"):
            pytest.fail(f"{var} is not set in CI: scripts/test.sh must set it")
        pytest.skip(f"{var} not set (scripts/test.sh sets it)")
    return path


# The venv of each supported torch release: scripts/test.sh exports the variables.
RELEASE_PYTHON_VARS = {"2.13": "NCCLX_TEST_PY213", "2.14": "NCCLX_TEST_PY214", "2.15": "NCCLX_TEST_PY215"}


def torch_python(release: str) -> str:
    """An interpreter whose torch is ``release`` ("2.14"): its NCCLX_TEST_PY* variable, or
    this interpreter when its torch is that release (the main run: 2.15)."""
    from ncclx_migrate._torchfacts import installed_torch_version, release_of

    var = RELEASE_PYTHON_VARS[release]
    mine = installed_torch_version()
    if not os.environ.get(var) and mine is not None and release_of(mine) == release:
        return sys.executable
    return other_python(var)


def has_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if has_cuda():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run scripts/gpu-tests.sh on one)")
    for item in items:
        if item.get_closest_marker("gpu") is not None:  # not item.keywords: that also holds directory names
            item.add_marker(skip)
