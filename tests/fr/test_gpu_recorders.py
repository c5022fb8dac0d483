"""Which recorder each NCCL backend records into on a real GPU (one rank), and that the
dumps ncclx writes for them (two recorders for a mixed group) are read by `ncclx fr analyze`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ..conftest import run_ncclx
from .scenarios import PREFIX, free_port

pytestmark = [pytest.mark.gpu, pytest.mark.torch]

PROBE = Path(__file__).with_name("gpu_probe.py")


def _has_nccl2() -> bool:
    from importlib import metadata

    return "nccl2" in {ep.name for ep in metadata.entry_points(group="torch.distributed.backends")}


def _probe(tmp_path: Path, backend: str) -> dict:
    pytest.importorskip("torch")
    if backend != "legacy" and not _has_nccl2():
        pytest.skip("this torch has no nccl2 backend (2.14 and later)")
    if backend == "legacy":  # 2.15 and 2.14: "nccl-legacy"; before: plain "nccl"
        backend = "nccl-legacy" if _has_nccl2() else "nccl"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCH_", "NCCLX_"))}
    env["TORCH_FR_DUMP_TEMP_FILE"] = str(tmp_path / PREFIX)
    res = subprocess.run(
        [sys.executable, str(PROBE), backend, str(free_port())],
        capture_output=True, text=True, env=env, timeout=240,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    line = [x for x in res.stdout.splitlines() if x.startswith("{")][-1]
    print(line)
    return json.loads(line)


def _ops(entries: list[list[object]]) -> list[object]:
    return [e[0] for e in entries]


def test_nccl_is_nccl2_and_records_into_its_own_recorder(tmp_path: Path) -> None:
    out = _probe(tmp_path, "nccl")
    assert out["recorders_in_use"] == ["nccl2"]
    assert _ops(out["entries"]["nccl2"]) == ["nccl2:all_reduce"] * 3
    assert out["files"] == [f"{PREFIX}0"]
    res = run_ncclx("fr", "analyze", str(tmp_path), "--json")
    assert res.returncode == 0, res.stdout + res.stderr
    report = json.loads(res.stdout)
    assert [d["recorder"] for d in report["dumps"]] == ["nccl2"]


def test_legacy_records_into_the_nccl_trace(tmp_path: Path) -> None:
    out = _probe(tmp_path, "legacy")
    assert out["recorders_in_use"] == ["nccl-legacy"]
    assert _ops(out["entries"]["nccl-legacy"]) == ["nccl:all_reduce"] * 3
    assert all(e[2] == "completed" for e in out["entries"]["nccl-legacy"])
    res = run_ncclx("fr", "analyze", str(tmp_path), "--json")
    assert res.returncode == 0, res.stdout + res.stderr
    report = json.loads(res.stdout)
    assert [d["recorder"] for d in report["dumps"]] == ["nccl-legacy"]
    assert report["groups"][0]["last_completed"] == {"0": 3}


def test_mixed_group_dumps_both_recorders(tmp_path: Path) -> None:
    out = _probe(tmp_path, "cpu:gloo,cuda:nccl")
    assert sorted(out["recorders_in_use"]) == ["gloo", "nccl2"]
    assert _ops(out["entries"]["nccl2"]) == ["nccl2:all_reduce"] * 3
    assert _ops(out["entries"]["gloo"]) == ["gloo:all_reduce"]
    assert len(out["files"]) == 2 and f"{PREFIX}0" in out["files"]
    res = run_ncclx("fr", "analyze", str(tmp_path), "--json")
    assert res.returncode == 0, res.stdout + res.stderr
    report = json.loads(res.stdout)
    assert sorted(d["recorder"] for d in report["dumps"]) == ["gloo", "nccl2"]
    assert {g["recorder"] for g in report["groups"]} == {"gloo", "nccl2"}
