"""The "nccl-legacy" shim on each torch: entry-point discovery, mapping, warning + attribution."""

from __future__ import annotations

import json

import pytest

from ..forked import Ran, run_forked
from .conftest import Script, clean_env, free_port, line_of, warnings_in

pytestmark = pytest.mark.torch

torch = pytest.importorskip("torch")
c10d = pytest.importorskip("torch.distributed.distributed_c10d")
MINOR = ".".join(torch.__version__.split("+")[0].split(".")[:2])  # "2.13"
TORCH_HAS_NAME = hasattr(c10d, "_register_builtin_nccl_legacy_backend")
HAS_NCCL2 = hasattr(c10d, "_create_nccl2_process_group")
ENTRY = "ncclx_migrate.backend._legacy:register_nccl_legacy"

INIT_LEGACY = """
import sys
from datetime import timedelta
import torch.distributed as dist
from ncclx_migrate.backend import install_legacy_shim

print(install_legacy_shim())
store = dist.TCPStore("127.0.0.1", int(sys.argv[1]), 1, is_master=True, timeout=timedelta(seconds=30))
for i in range(2):
    try:
        dist.init_process_group("nccl-legacy", store=dist.PrefixStore(str(i), store),  # <- init
                                rank=0, world_size=1)
    except Exception as exc:
        print(type(exc).__name__, exc)
"""


ENTRY_POINTS = """
import json
from importlib.metadata import entry_points
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

eps = [e.value for e in entry_points(group="torch.distributed.backends")
       if e.name == "nccl-legacy"]
ok = dist.is_backend_available("cpu:gloo,cuda:nccl-legacy")  # torch's own discovery
fn = c10d.Backend._plugins["NCCL-LEGACY"].creator_fn
print(json.dumps({
    "eps": eps, "ok": ok, "shim": getattr(fn, "_ncclx_shim", None),
    "wraps_torchs": getattr(fn, "__wrapped__", fn) is getattr(c10d, "_create_nccl_process_group", None),
}))
"""

NO_ROLLBACK = """
import os, sys
from datetime import timedelta
import torch, torch.distributed as dist
import torch.distributed.distributed_c10d as c10d
del c10d._register_builtin_nccl_legacy_backend, c10d._create_nccl_process_group
from ncclx_migrate.backend import install_legacy_shim

print(install_legacy_shim(), "nccl-legacy" in c10d._FR_SELF_RECORDING_BACKENDS)
store = dist.TCPStore("127.0.0.1", int(sys.argv[1]), 1, is_master=True,
                      timeout=timedelta(seconds=30))
dist.init_process_group("nccl-legacy", store=store, rank=0, world_size=1,  # <- init
                        enable_reconfigure=True)
pg = dist.group.WORLD
print(type(pg._get_backend(torch.device("cuda"))).__name__, dist.get_backend(),
      pg in c10d._world.pg_flight_recorder_hooks)
sys.stdout.flush()
os._exit(0)
"""

NO_CODE_CHANGE = """
import sys
from datetime import timedelta
import torch.distributed as dist
store = dist.TCPStore("127.0.0.1", int(sys.argv[1]), 1, is_master=True,
                      timeout=timedelta(seconds=30))
try:
    dist.init_process_group("nccl-legacy", store=store, rank=0, world_size=1)  # <- init
except ValueError as exc:
    print(exc)
"""

NO_GPU = not torch.cuda.is_available()
DISCOVERS = hasattr(c10d.Backend, "_ensure_backend_registered")  # entry points (2.14+)
VERSION = tuple(int(x) for x in torch.__version__.split(".")[:2])


def _ours_listed_first() -> bool:
    from importlib.metadata import entry_points

    eps = [e.value for e in entry_points(group="torch.distributed.backends") if e.name == "nccl-legacy"]
    return bool(eps) and eps[0] == ENTRY


# The scripts of the tests below: (source, argv takes a port, own environment, whether the
# test runs on this torch and host -- the test's own conditions).
RUNS = {
    "shim": (INIT_LEGACY, True, {}, NO_GPU),
    "entry": (ENTRY_POINTS, False, {}, DISCOVERS),
    "rollback": (NO_ROLLBACK, True, {}, HAS_NCCL2 and NO_GPU and VERSION >= (2, 15)),
    "nochange": (NO_CODE_CHANGE, True, {"TORCH_NCCL_ENABLE_MONITORING": "1"},
                 DISCOVERS and NO_GPU and _ours_listed_first()),
}


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Script, Ran]]:
    """Each script the tests run here, run once: forks of one interpreter that imported torch
    (tests/forked.py); TORCH_NCCL_ENABLE_MONITORING is read when a group is built."""
    tmp = tmp_path_factory.mktemp("legacy")
    names = [name for name, (*_, runs) in RUNS.items() if runs]
    scripts = []
    for name in names:
        scripts.append(Script(tmp / name / "train.py"))
        scripts[-1].path.parent.mkdir()
        scripts[-1].path.write_text(RUNS[name][0])
    got = run_forked([s.path for s in scripts], [[str(free_port())] if RUNS[n][1] else [] for n in names],
                     tmp / "run", env=clean_env(), run_env=[RUNS[n][2] for n in names], cwd=tmp)
    return dict(zip(names, zip(scripts, got, strict=True), strict=True))


def test_shim_name_builds_legacy_and_warns_once_at_the_users_line(ran) -> None:  # type: ignore[no-untyped-def]
    if torch.cuda.is_available():
        pytest.skip("checks the no-GPU error; test_gpu_* cover a GPU")
    script, res = ran["shim"]
    assert res.returncode == 0, res.stderr
    kind, first, second = res.stdout.splitlines()
    if TORCH_HAS_NAME:  # 2.14/2.15: torch's own rollback name, wrapped
        assert kind == "torch"
        # torch's legacy creator ran (nccl2 would say "nccl2 requires at least one CUDA device")
        assert first == "ValueError ProcessGroupNCCL is only supported with GPUs, no GPUs found!"
    else:  # 2.13 CPU wheel: mapped to what "nccl" does there
        assert kind == "legacy"
        assert first == "RuntimeError Distributed package doesn't have NCCL built in"
    assert second == first
    (w,) = [w for w in warnings_in(res.stderr) if w.category == "LegacyNCCLWarning"]
    assert w.code == "NCX103"
    assert (w.file, w.line) == (str(script.path), line_of(script, "<- init"))
    assert ': use "nccl" (`ncclx explain NCX103`)' in w.text
    if TORCH_HAS_NAME:
        assert "rollback name, announced for 2.15 only" in w.text
    else:
        assert f'is not in torch {MINOR}; ncclx_migrate maps it to legacy NCCL' in w.text


def test_entry_point_is_discovered_by_torch_in_a_fresh_interpreter(ran) -> None:  # type: ignore[no-untyped-def]
    if not hasattr(c10d.Backend, "_ensure_backend_registered"):
        pytest.skip(f"torch {torch.__version__} does not discover backends through entry points")
    _, res = ran["entry"]
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)
    assert ENTRY in got["eps"]
    assert got["ok"] is True
    assert got["wraps_torchs"] is TORCH_HAS_NAME
    # torch takes the first entry point listed under the name: ours wraps torch's registrar
    assert got["shim"] == ("torch" if got["eps"][0] == ENTRY else None)


@pytest.mark.skipif(not HAS_NCCL2 or torch.cuda.is_available(), reason="needs torch 2.15 nccl2 on a host without GPU")
def test_a_torch_without_the_rollback_maps_the_name_to_nccl2(ran) -> None:  # type: ignore[no-untyped-def]
    if tuple(int(x) for x in torch.__version__.split(".")[:2]) < (2, 15):
        pytest.skip("builds nccl2 without a GPU only on 2.15 (enable_reconfigure)")
    # A torch after the announced removal cannot be installed here: remove the rollback
    # from the real 2.15 module (name registrar, legacy creator) and let the shim decide.
    script, res = ran["rollback"]
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == ["nccl2 False", "ProcessGroupNCCL2 nccl-legacy True"]
    (w,) = [w for w in warnings_in(res.stderr) if w.category == "LegacyNCCLWarning"]
    assert w.code == "NCX103" and w.line == line_of(script, "<- init")
    assert '"nccl-legacy" is gone in torch 2.15; ncclx_migrate maps it to nccl2: use "nccl"' in w.text


@pytest.mark.gpu
def test_gpu_nccl_legacy_builds_process_group_nccl(user_script) -> None:  # type: ignore[no-untyped-def]
    script = user_script(
        """
        import sys
        from datetime import timedelta
        import torch, torch.distributed as dist
        from ncclx_migrate.backend import install_legacy_shim, is_nccl
        install_legacy_shim()
        store = dist.TCPStore("127.0.0.1", int(sys.argv[1]), 1, is_master=True,
                              timeout=timedelta(seconds=60))
        torch.cuda.set_device(0)
        dist.init_process_group("nccl-legacy", store=store, rank=0, world_size=1)
        t = torch.ones(2, device="cuda:0")
        dist.all_reduce(t)
        be = dist.group.WORLD._get_backend(torch.device("cuda"))
        print(type(be).__name__, is_nccl(be), is_nccl(dist.group.WORLD), float(t.sum()))
        dist.destroy_process_group()
        """
    )
    res = script.run(args=(str(free_port()),), timeout=300)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["ProcessGroupNCCL", "True", "True", "2.0"]
    assert [w.code for w in warnings_in(res.stderr) if w.category == "LegacyNCCLWarning"] == ["NCX103"]


def test_no_code_change_entry_point_path_blames_the_users_line(ran) -> None:  # type: ignore[no-untyped-def]
    if not hasattr(c10d.Backend, "_ensure_backend_registered"):
        pytest.skip(f"torch {torch.__version__} does not discover backends through entry points")
    if not _ours_listed_first():
        pytest.skip("torch's own nccl-legacy entry point is listed first on this install")
    if torch.cuda.is_available():
        pytest.skip("checks the no-GPU path")
    # The script never imports ncclx_migrate: torch's discovery loads our registrar, which
    # imports the package (import-time findings) and wraps the creator (NCX103).  Both
    # warnings must name the user's line, not importlib's EntryPoint.load / import_module.
    script, res = ran["nochange"]
    assert res.returncode == 0, res.stderr
    found = [w for w in warnings_in(res.stderr) if w.category == "LegacyNCCLWarning"]
    assert [w.code for w in found] == ["NCX122", "NCX103"]
    for w in found:
        assert (w.file, w.line) == (str(script.path), line_of(script, "<- init"))


def test_torchfacts_reports_torchs_registry_not_our_shim() -> None:
    from ncclx_migrate._torch.probe import backend_entry_points

    eps = backend_entry_points()
    assert ENTRY not in eps.values()
    if hasattr(c10d.Backend, "_ensure_backend_registered"):  # 2.14+: torch's own rollback name
        assert eps["nccl-legacy"].startswith("torch.distributed.distributed_c10d:")
