"""use_nccl2(): "nccl" registered with torch's own nccl2 creator and BackendType.NCCL, checked
with torch's real registry in fresh interpreters (and on a GPU under the gpu marker)."""

from __future__ import annotations

import json

import pytest

from ..forked import Ran, run_forked
from .conftest import Script, clean_env, line_of, warnings_in

pytestmark = pytest.mark.torch

torch = pytest.importorskip("torch")
c10d = pytest.importorskip("torch.distributed.distributed_c10d")
MINOR = ".".join(torch.__version__.split("+")[0].split(".")[:2])  # "2.13"
HAS_NCCL2 = hasattr(c10d, "_create_nccl2_process_group")
HAS_FR_SET = hasattr(c10d, "_FR_SELF_RECORDING_BACKENDS")
needs_nccl2 = pytest.mark.skipif(not HAS_NCCL2, reason=f"torch {torch.__version__} has no nccl2")

INSPECT = """
import json, os, warnings
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d
from ncclx_migrate.backend import use_nccl2

first = use_nccl2()  # <- select
second = use_nccl2()
plugin = c10d.Backend._plugins["NCCL"]
fr = getattr(c10d, "_FR_SELF_RECORDING_BACKENDS", None)
print(json.dumps({
    "returned": [first, second],
    "creator_is_torchs_nccl2": plugin.creator_fn is c10d._create_nccl2_process_group,
    "extended_api": plugin.extended_api,
    "backend_type": str(c10d.Backend.backend_type_map["nccl"]),
    "devices": c10d.Backend.backend_capability["nccl"],
    "nccl_self_recording": None if fr is None else "nccl" in fr,
    "toggle_after": os.environ.get("TORCH_DIST_USE_NCCL2"),
}))
"""


TOGGLES = [None, "0", "false"]


@pytest.fixture(scope="module")
def inspected(tmp_path_factory: pytest.TempPathFactory) -> tuple[Script, dict[str | None, Ran]]:
    """INSPECT under each toggle: forks of one interpreter that imported torch, which reads
    the toggle only when "nccl" is first registered (tests/forked.py)."""
    script = Script(tmp_path_factory.mktemp("inspect") / "train.py")
    script.path.write_text(INSPECT)
    runs = run_forked(script.path, [[] for _ in TOGGLES], script.path.parent / "run", env=clean_env(),
                      run_env=[{} if t is None else {"TORCH_DIST_USE_NCCL2": t} for t in TOGGLES],
                      cwd=script.path.parent)
    return script, dict(zip(TOGGLES, runs, strict=True))


@needs_nccl2
@pytest.mark.parametrize("toggle", TOGGLES)
def test_nccl_registers_torchs_nccl2_creator_whatever_the_toggle(inspected, toggle) -> None:  # type: ignore[no-untyped-def]
    script, res = inspected[0], inspected[1][toggle]
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)
    assert got["returned"] == ["nccl2", "nccl2"]
    assert got["creator_is_torchs_nccl2"] is True
    assert got["extended_api"] is True
    assert got["backend_type"] == "BackendType.NCCL"
    assert got["devices"] == ["cuda"]
    # 2.15: nccl2 gets the auto-attached flight-recorder hook, so "nccl" must not be self-recording
    assert got["nccl_self_recording"] is (None if not HAS_FR_SET else False)
    assert got["toggle_after"] == toggle  # the process environment is left as it was
    overridden = [w for w in warnings_in(res.stderr) if "overridden by use_nccl2()" in w.text]
    if toggle == "0":
        (w,) = overridden
        assert w.code == "NCX101"
        assert (w.file, w.line) == (str(script.path), line_of(script, "<- select"))
    else:
        assert overridden == []


@needs_nccl2
def test_error_when_nccl_was_already_registered_as_legacy(user_script) -> None:  # type: ignore[no-untyped-def]
    script = user_script(
        """
        import sys
        from datetime import timedelta
        import torch.distributed as dist
        from ncclx_migrate.backend import BackendSelectionError, use_nccl2
        store = dist.TCPStore("127.0.0.1", int(sys.argv[1]), 1, is_master=True,
                              timeout=timedelta(seconds=30))
        try:  # registers "nccl" as torch reads the toggle (then fails without a GPU)
            dist.init_process_group("nccl", store=store, rank=0, world_size=1)
        except Exception as exc:
            print(type(exc).__name__)
        try:
            use_nccl2()
        except BackendSelectionError as exc:
            print(exc)
        """
    )
    from .conftest import free_port

    res = script.run({"TORCH_DIST_USE_NCCL2": "0"}, args=(str(free_port()),))
    assert res.returncode == 0, res.stderr
    assert '"nccl" is already registered to the legacy ProcessGroupNCCL in this process' in res.stdout
    assert "TORCH_DIST_USE_NCCL2='0' was read when the first process group" in res.stdout
    assert "call ncclx_migrate.backend.use_nccl2() before the first process group" in res.stdout


INIT = """
import os, sys
from datetime import timedelta
import torch, torch.distributed as dist
import torch.distributed.distributed_c10d as c10d
from ncclx_migrate.backend import is_nccl, use_nccl2

use_nccl2()
store = dist.TCPStore("127.0.0.1", int(sys.argv[1]), 1, is_master=True, timeout=timedelta(seconds=30))
try:
    dist.init_process_group("nccl", store=store, rank=0, world_size=1)  # 2.14: lazy, no GPU needed
    built = True
except Exception as exc:
    print("no-gpu:", type(exc).__name__, exc)
    built = False
if not built and tuple(int(x) for x in torch.__version__.split(".")[:2]) >= (2, 15):
    # enable_reconfigure defers the device, so torch's nccl2 constructor runs without a GPU
    dist.init_process_group("nccl", store=dist.PrefixStore("r", store), rank=0, world_size=1,
                            enable_reconfigure=True)
    built = True
if built:
    pg = dist.group.WORLD
    be = pg._get_backend(torch.device("cuda"))
    hooks = getattr(c10d._world, "pg_flight_recorder_hooks", None) or {}
    print("built:", type(be).__name__, be.name(), dist.get_backend(), str(pg._get_backend_name()),
          c10d._get_default_timeout(dist.get_backend()), pg in hooks, is_nccl(pg), is_nccl(be))
    sys.stdout.flush()
    os._exit(0)  # destroying an nccl2 group without a driver aborts (reference E4)
"""


@needs_nccl2
def test_init_reaches_torchs_nccl2_constructor(user_script) -> None:  # type: ignore[no-untyped-def]
    from .conftest import free_port

    if torch.cuda.is_available():
        pytest.skip("checks the no-GPU path; test_gpu.py covers a GPU")
    res = user_script(INIT).run({"TORCH_DIST_USE_NCCL2": "0"}, args=(str(free_port()),))
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    major_minor = tuple(int(x) for x in torch.__version__.split(".")[:2])
    if major_minor >= (2, 15):
        # torch's own _nccl2_device() raised: the nccl2 creator ran, not legacy's
        # ("ProcessGroupNCCL is only supported with GPUs" would be legacy).
        assert lines[0] == "no-gpu: RuntimeError nccl2 requires at least one CUDA device"
        assert lines[1] == "built: ProcessGroupNCCL2 nccl2 nccl nccl 0:10:00 True True True"
    else:  # 2.14: nccl2 is lazy and needs no device at init; no flight-recorder hook yet
        assert lines == ["built: ProcessGroupNCCL2 nccl2 nccl nccl 0:10:00 False True True"]


def test_torch_without_nccl2_falls_back_to_legacy_with_a_warning(user_script) -> None:  # type: ignore[no-untyped-def]
    if HAS_NCCL2:
        pytest.skip(f"torch {torch.__version__} has nccl2")
    script = user_script(
        """
        from ncclx_migrate.backend import use_nccl2
        print(use_nccl2())  # <- select
        """
    )
    # unset, "1", "yes": forks of one interpreter that imported torch (tests/forked.py)
    unset, one, yes = run_forked(script.path, [[], [], []], script.path.parent / "run", env=clean_env(),
                                 run_env=[{}, {"NCCLX_REQUIRE_NCCL2": "1"}, {"NCCLX_REQUIRE_NCCL2": "yes"}],
                                 cwd=script.path.parent)
    res = unset
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "legacy"
    (w,) = [w for w in warnings_in(res.stderr) if w.category == "LegacyNCCLWarning"]
    assert w.code == "NCX103"
    assert (w.file, w.line) == (str(script.path), line_of(script, "<- select"))
    assert "has no nccl2" in w.text and "NCCLX_REQUIRE_NCCL2=1" in w.text

    res = one
    assert res.returncode == 1
    assert f"BackendSelectionError: torch {MINOR} has no nccl2 and NCCLX_REQUIRE_NCCL2=1 requires it" in res.stderr

    # Only "1" requires nccl2 (as only "0"/"1" count for torch's toggle); another value says so.
    res = yes
    assert res.returncode == 0 and res.stdout.strip() == "legacy", res.stderr
    (w,) = [w for w in warnings_in(res.stderr) if w.category == "LegacyNCCLWarning"]
    assert "NCCLX_REQUIRE_NCCL2='yes' is not \"1\")" in w.text


GPU = """
import sys
from datetime import timedelta
import torch, torch.distributed as dist
from ncclx_migrate.backend import is_nccl, use_nccl2

assert use_nccl2() == "nccl2"
store = dist.TCPStore("127.0.0.1", int(sys.argv[1]), 1, is_master=True, timeout=timedelta(seconds=60))
dist.init_process_group("nccl", store=store, rank=0, world_size=1, device_id=torch.device("cuda", 0))
be = dist.group.WORLD._get_backend(torch.device("cuda"))
t = torch.ones(4, device="cuda:0")
dist.all_reduce(t)
torch.cuda.synchronize()
sub = dist.new_group([0])
print(type(be).__name__, dist.get_backend(), is_nccl(dist.group.WORLD), float(t.sum()),
      type(sub._get_backend(torch.device("cuda"))).__name__, dist.get_backend(sub))
dist.destroy_process_group()
"""


@pytest.mark.gpu
@needs_nccl2
def test_gpu_nccl_builds_process_group_nccl2_despite_rollback_toggle(user_script) -> None:  # type: ignore[no-untyped-def]
    from .conftest import free_port

    res = user_script(GPU).run({"TORCH_DIST_USE_NCCL2": "0"}, args=(str(free_port()),), timeout=300)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["ProcessGroupNCCL2", "nccl", "True", "4.0", "ProcessGroupNCCL2", "nccl"]


@pytest.mark.skipif(
    not hasattr(c10d, "_register_builtin_nccl_as_legacy"),
    reason=f"torch {torch.__version__} has no _register_builtin_nccl_as_legacy",
)
def test_a_registrar_that_ignores_the_toggle_still_gets_nccl2(user_script) -> None:  # type: ignore[no-untyped-def]
    # torch 2.15 ships a registrar that forces "nccl" to legacy whatever the toggle says
    # (_register_builtin_nccl_as_legacy, c10d.py:996-1004): stand it in for the "nccl" one.
    script = user_script(
        INSPECT.replace(
            "from ncclx_migrate.backend import use_nccl2",
            "c10d._register_builtin_nccl_backend = c10d._register_builtin_nccl_as_legacy\n"
            "from ncclx_migrate.backend import use_nccl2",
        )
    )
    res = script.run()
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)
    assert got["returned"] == ["nccl2", "nccl2"]
    assert got["creator_is_torchs_nccl2"] is True
    assert got["backend_type"] == "BackendType.NCCL"
    assert got["nccl_self_recording"] is False  # the forced registrar had added it
