"""Local-level checks on the real torch of this venv (2.15 CUDA build here; 2.13 CPU and 2.14
CUDA in test.sh)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
from collections.abc import Callable
from typing import Any

import pytest

from ncclx_migrate._torch.releases import NCCL_BUILDS, release_of
from tests.conftest import once

from .conftest import check, doctor_json

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

pytestmark = pytest.mark.torch

MINOR = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2])
HAS_NCCL = bool(dist.is_available() and dist.is_nccl_available())
HAS_REGISTRY = MINOR >= (2, 14)

# The checks several tests read from one `ncclx doctor --json` in the clean environment (a
# check's result does not depend on which others run beside it; each is its own function).
PLAIN_CHECKS = ("torch-version", "nccl-version", "legacy-toggle", "nccl-resolution")


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """That report, made once per session (starting torch is most of a doctor run's cost)."""
    args = [a for c in PLAIN_CHECKS for a in ("--check", c)]
    report: dict[str, Any] = once(tmp_path_factory, "doctor-local-plain", lambda _: doctor_json(*args))[1]
    return report


def test_torch_version_reads_the_phase_from_the_registry(plain: dict[str, Any]) -> None:
    report = plain
    tv = check(report, "torch-version")
    assert report["torch"] == torch.__version__
    assert tv["status"] == "ok"
    assert tv["details"]["phase_source"] == "backend registry"
    expected = {(2, 13): "no-nccl2", (2, 14): "opt-in", (2, 15): "default"}.get(MINOR)
    if expected:
        assert tv["details"]["phase"] == expected
    assert tv["details"]["flavor"] == ("rocm" if torch.version.hip else "cuda" if torch.version.cuda else "cpu")


TOGGLES = (None, "0", "false")
# torch reads the toggle when "nccl" is first registered, not at import: one interpreter imports
# torch, and a child forked before anything registered "nccl" registers it under each value.
_CREATORS = textwrap.dedent("""
    import gc, json, os, traceback
    import torch.distributed.distributed_c10d as c
    gc.freeze()  # no collection at exit walks torch's objects (a third of this script's CPU)
    out = {}
    for toggle in %r:
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child never returns into this loop
            try:
                if toggle is not None:
                    os.environ["TORCH_DIST_USE_NCCL2"] = toggle
                c.Backend._ensure_backend_registered("nccl")
                os.write(w, c.Backend._plugins["NCCL"].creator_fn.__name__.encode())
            except BaseException:
                traceback.print_exc()
                os._exit(1)
            os._exit(0)
        os.close(w)
        with os.fdopen(r) as f:
            out[str(toggle)] = f.read()
        assert os.waitpid(pid, 0)[1] == 0, toggle
    print(json.dumps(out))
""") % (TOGGLES,)


def _registered_creators(folder: object) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "TORCH_DIST_USE_NCCL2"}
    out = subprocess.run([sys.executable, "-c", _CREATORS], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    creators: dict[str, str] = json.loads(out.stdout)
    return creators


@pytest.fixture(scope="module")
def registered_creator(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """What torch itself registers for "nccl" under each toggle value (str(value) -> creator)."""
    creators: dict[str, str] = once(tmp_path_factory, "doctor-nccl-creators", _registered_creators)[1]
    return creators


CREATOR = {"_create_nccl2_process_group": "nccl2", "_create_nccl_process_group": "nccl-legacy"}


@pytest.mark.skipif(not (HAS_NCCL and HAS_REGISTRY),
                    reason="needs a torch with NCCL and backend entry points (2.14+ CUDA build)")
@pytest.mark.parametrize("toggle", TOGGLES)
def test_nccl_resolution_matches_what_torch_registers(
    toggle: str | None, plain: dict[str, Any], rolled_back: dict[str, Any], registered_creator: dict[str, str]
) -> None:
    shared = {None: plain, "0": rolled_back}  # runs other tests read too
    report = shared.get(toggle) or doctor_json("--check", "nccl-resolution", env={"TORCH_DIST_USE_NCCL2": str(toggle)})
    res = check(report, "nccl-resolution")
    assert res["details"]["implementation"] == CREATOR[registered_creator[str(toggle)]]
    assert res["details"]["cpu:gloo,cuda:nccl"] == {"cpu": "gloo", "cuda": res["details"]["implementation"]}


@pytest.mark.skipif(HAS_NCCL, reason="this torch has NCCL")
def test_cpu_torch_says_nccl_is_not_available(plain: dict[str, Any]) -> None:
    res = check(plain, "nccl-resolution")
    assert res["status"] == "warn"
    assert res["details"]["implementation"] is None
    assert "has no NCCL" in res["message"]
    assert check(plain, "nccl-version")["status"] == "skip"


@pytest.mark.skipif(MINOR >= (2, 14), reason="torch 2.14+ reads the toggle")
def test_toggle_has_no_effect_before_2_14() -> None:
    toggle = check(doctor_json("--check", "legacy-toggle", env={"TORCH_DIST_USE_NCCL2": "0"}), "legacy-toggle")
    assert toggle["status"] == "warn"
    assert "no effect on this torch" in toggle["message"]


@pytest.mark.skipif(not HAS_NCCL, reason="a CPU build of torch loads no libnccl")
def test_build_and_runtime_nccl_and_where_it_was_loaded_from(plain: dict[str, Any]) -> None:
    nccl = check(plain, "nccl-version")
    assert nccl["status"] == "ok"
    assert nccl["details"]["build"] == ".".join(map(str, torch.cuda.nccl.version()[:3]))
    assert nccl["details"]["runtime"] == ".".join(map(str, dist.ProcessGroupNCCL.get_runtime_nccl_version()[:3]))
    assert os.path.basename(nccl["details"]["library"]).startswith("libnccl")


@pytest.mark.skipif(not HAS_NCCL or not sys.platform.startswith("linux"), reason="needs torch's libnccl on Linux")
def test_an_old_nccl_interposed_with_ld_preload_is_the_runtime_version(
    fake_lib: Callable[..., str], plain: dict[str, Any]
) -> None:
    # A real shared library that takes over ncclGetVersion and forwards everything else to
    # torch's own libnccl: what an old libnccl in LD_PRELOAD does to a job.
    real = check(plain, "nccl-version")["details"]["library"]
    shim = fake_lib("2.27.3", name="libnccl-interpose.so",
                    link=(real, f"-Wl,-rpath,{os.path.dirname(real)}"))
    report = doctor_json("--backend", "nccl", "--check", "nccl-version", "--check", "fast-reconfigure",
                         env={"LD_PRELOAD": shim})
    nccl = check(report, "nccl-version")
    assert nccl["details"]["runtime"] == "2.27.3"
    assert nccl["details"]["library"] == shim
    assert nccl["status"] == "warn"
    assert "OLDER than the build" in nccl["message"]
    fast = check(report, "fast-reconfigure")
    assert fast["status"] == "warn"
    if NCCL_BUILDS[release_of(torch.__version__)]["unset"] == "nccl2":  # 2.15
        assert "2.27.3 has no ncclCommRevoke" in fast["message"]
    else:  # 2.14: "nccl" is legacy unless TORCH_DIST_USE_NCCL2=1
        assert "the legacy ProcessGroupNCCL does not support enable_reconfigure" in fast["message"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
@pytest.mark.parametrize("value", ["abc", ""])
def test_the_fr_buffer_claim_holds_on_this_torch(value: str) -> None:
    """The doctor fails a non-integer buffer size because torch really dies at init."""
    report = doctor_json("--check", "flight-recorder", env={"TORCH_FR_BUFFER_SIZE": value})
    assert check(report, "flight-recorder")["status"] == "fail"
    code = ("import sys, torch.distributed as d; print('imported', flush=True);"
            f"d.init_process_group('gloo', init_method='tcp://127.0.0.1:{_free_port()}', rank=0, world_size=1);"
            "print('initialised')")
    env = {**os.environ, "TORCH_FR_BUFFER_SIZE": value}
    with subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, text=True) as proc:
        assert proc.stdout is not None
        # The clock starts once torch is imported (tens of seconds on a busy machine), so a
        # hang is told from a slow start without waiting out one long timeout.
        assert proc.stdout.readline() == "imported\n"
        try:
            out, _ = proc.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            return  # a hang is a failure of the job too
    assert proc.returncode != 0
    assert "initialised" not in out


@pytest.mark.gpu
def test_on_a_gpu_binding_resolution_and_nccl_are_ok() -> None:
    count = torch.cuda.device_count()
    report = doctor_json("--check", "gpu-binding", "--check", "nccl-resolution", "--check", "nccl-version",
                         env={"LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1"})
    gpu = check(report, "gpu-binding")
    assert gpu["status"] == "ok", gpu
    assert gpu["details"]["device_count"] == count
    assert gpu["details"]["nccl2_device"] == "cuda:0"
    assert check(report, "nccl-resolution")["status"] == "ok"
    assert check(report, "nccl-version")["status"] == "ok"


@pytest.mark.gpu
def test_more_local_ranks_than_gpus_fails_before_nccl_does() -> None:
    count = torch.cuda.device_count()
    report = doctor_json("--check", "gpu-binding",
                         env={"LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": str(count + 1)}, expect_rc=1)
    gpu = check(report, "gpu-binding")
    assert gpu["status"] == "fail"
    assert "Duplicate GPU detected" in gpu["message"]


def test_legacy_toggle_says_who_provides_nccl_legacy(plain: dict[str, Any]) -> None:
    toggle = check(plain, "legacy-toggle")
    providers = toggle["details"]["nccl_legacy_providers"]
    if "torch" in providers:  # 2.14/2.15 register the rollback name themselves
        assert "nccl-legacy is available" in toggle["message"]
    elif providers:  # 2.13: only ncclx-migrate's entry point provides it
        assert providers == ["ncclx-migrate"]
        assert "ncclx-migrate's shim" in toggle["message"]
    else:
        assert "nccl-legacy is not available" in toggle["message"]
    assert ("torch" in providers) == (MINOR in ((2, 14), (2, 15)))
