"""Helpers for the doctor tests: the real CLI in subprocesses, and real fake libraries.

Old NCCL, RCCL and broken libraries cannot be installed here, so tests compile
``data/fake_nccl.c`` with the system C compiler into a real shared library that exports
``ncclGetVersion`` (what the doctor, and torch, ask a library for).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import once, run_ncclx

DATA = Path(__file__).parent / "data"


def doctor(*args: str, env: dict[str, str] | None = None, python: str | None = None,
           timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return run_ncclx("doctor", *args, env=env, python=python, timeout=timeout)


def doctor_json(*args: str, env: dict[str, str] | None = None, python: str | None = None,
                expect_rc: int | None = None, timeout: float = 120) -> dict[str, Any]:
    proc = doctor("--json", *args, env=env, python=python, timeout=timeout)
    assert "Traceback" not in proc.stderr, proc.stderr
    if expect_rc is not None:
        assert proc.returncode == expect_rc, (proc.returncode, proc.stdout, proc.stderr)
    report: dict[str, Any] = json.loads(proc.stdout)  # stdout is exactly one JSON document
    report["_rc"] = proc.returncode
    return report


def check(report: dict[str, Any], check_id: str) -> dict[str, Any]:
    found = [c for c in report["checks"] if c["id"] == check_id]
    assert found, f"{check_id} not in {[c['id'] for c in report['checks']]}"
    result: dict[str, Any] = found[0]
    return result


def nccl_code(version: str) -> int:
    major, minor, patch = (int(p) for p in version.split("."))
    return major * 10000 + minor * 100 + patch


@pytest.fixture(scope="session")
def fake_lib(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., str]:
    """``fake_lib("2.27.3", name="libnccl.so.2", flags=())`` -> path of a compiled library."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler (cc/gcc) to build the fake NCCL library")
    root = tmp_path_factory.mktemp("fakelibs")
    built: dict[tuple[str, str, tuple[str, ...], tuple[str, ...]], str] = {}

    def build(version: str = "2.30.7", name: str = "libnccl.so.2", flags: tuple[str, ...] = (),
              link: tuple[str, ...] = ()) -> str:
        key = (version, name, flags, link)
        if key not in built:
            out = root / f"{len(built)}" / name
            out.parent.mkdir()
            subprocess.run(
                [cc, "-shared", "-fPIC", f"-DFAKE_VERSION_CODE={nccl_code(version)}", *flags,
                 "-o", str(out), str(DATA / "fake_nccl.c"), *link],
                check=True, capture_output=True, text=True,
            )
            built[key] = str(out)
        return built[key]

    return build


@pytest.fixture(scope="session")
def nccl_probe_without_a_gpu(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """``ncclx doctor --level probe --check probe --backend nccl`` with no GPU visible, run once
    for the tests that read it (test_probe, test_text_output): its rank starts torch."""
    def run(_: Path) -> dict[str, Any]:
        return doctor_json("--level", "probe", "--check", "probe", "--backend", "nccl", "--timeout", "60",
                           env={"CUDA_VISIBLE_DEVICES": ""}, expect_rc=1)

    report: dict[str, Any] = once(tmp_path_factory, "doctor-nccl-probe-without-a-gpu", run)[1]
    return report


@pytest.fixture(scope="session")
def rolled_back(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """``ncclx doctor --check nccl-resolution --check fast-reconfigure --backend nccl`` under
    TORCH_DIST_USE_NCCL2=0, run once for test_local_checks and test_text_output (nccl-resolution
    does not read --backend: the same result as without it)."""
    def run(_: Path) -> dict[str, Any]:
        return doctor_json("--check", "nccl-resolution", "--check", "fast-reconfigure", "--backend", "nccl",
                           env={"TORCH_DIST_USE_NCCL2": "0"})

    report: dict[str, Any] = once(tmp_path_factory, "doctor-rolled-back", run)[1]
    return report
