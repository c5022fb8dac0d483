"""The cluster level under torchrun on loopback, the srun-style store, and offline merge."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import ncclx_exe, run_ncclx

from .conftest import check, doctor, doctor_json


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCH_", "NCCL", "NCCLX_"))}
    env.update(NO_COLOR="1", **extra)
    return env


@pytest.mark.torch
@pytest.mark.slow
def test_torchrun_four_gloo_ranks_one_divergent_one_missing(tmp_path: Path) -> None:
    timeout = 20
    wrapper = tmp_path / "rank.sh"
    wrapper.write_text(
        "#!/bin/sh\n"
        'if [ "$RANK" = "2" ]; then export TORCH_DIST_USE_NCCL2=0 TORCH_FR_BUFFER_SIZE=0; fi\n'
        f'if [ "$RANK" = "3" ]; then sleep {timeout + 4}; exit 0; fi\n'  # never reports
        f'exec {ncclx_exe()} doctor --level cluster --json --timeout {timeout}\n'
    )
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "4", "--master-addr", "127.0.0.1",
         "--master-port", str(_free_port()), "--no-python", "sh", str(wrapper)],
        capture_output=True, text=True, env=_clean_env(), timeout=240,
    )
    report = json.loads(proc.stdout)  # rank 0 alone writes stdout
    assert report["level"] == "cluster"
    assert report["rank"] == 0
    cc = check(report, "cluster-consistency")
    assert cc["status"] == "fail"
    assert cc["details"]["missing_ranks"] == [3]
    assert cc["details"]["reported_ranks"] == [0, 1, 2]
    host = socket.gethostname()
    assert f"rank 3 did not report within {timeout}s" in cc["message"]
    import torch
    import torch.distributed as dist

    from ncclx_migrate._torch.releases import NCCL_BUILDS, release_of

    builds = NCCL_BUILDS.get(release_of(torch.__version__))
    if dist.is_nccl_available() and builds is not None and builds["0"] != builds["unset"]:  # 2.15
        assert f'rank 2 on {host} builds "nccl" as nccl-legacy (the others nccl2)' in cc["message"]
    elif builds is not None:  # 2.14: "0" and unset both build legacy; 2.13: no switch
        assert 'builds "nccl"' not in cc["message"]
    assert f"rank 2 on {host} has TORCH_DIST_USE_NCCL2 = 0 (the others unset)" in cc["message"]
    assert f"rank 2 on {host} has a flight-recorder buffer of 0 (the others 2000)" in cc["message"]
    facts = {d["fact"]: d for d in cc["details"]["divergent"]}
    assert facts["legacy-toggle.value"]["minority"][0]["ranks"] == [2]
    toggle = check(report, "legacy-toggle")
    assert toggle["status"] == "warn"
    assert f"on rank 2 on {host}" in toggle["message"]
    assert proc.returncode != 0  # rank 0 exits 1 and torchrun passes it on


@pytest.mark.torch
@pytest.mark.slow
def test_srun_style_rank_0_hosts_the_store_and_all_agree(tmp_path: Path) -> None:
    port = str(_free_port())
    procs = [
        subprocess.Popen(
            [ncclx_exe(), "doctor", "--level", "cluster", "--json", "--timeout", "60"],
            env=_clean_env(RANK=str(r), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=port,
                           SLURM_JOB_ID="4242"),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for r in range(2)
    ]
    outs = [p.communicate(timeout=180) for p in procs]
    assert outs[1][0] == ""  # rank 1 prints nothing
    assert procs[1].returncode == 0
    report = json.loads(outs[0][0])
    cc = check(report, "cluster-consistency")
    assert cc["status"] == "ok", cc
    assert "2 ranks on 1 host agree" in cc["message"]
    assert cc["details"]["reported_ranks"] == [0, 1]


def test_cluster_level_outside_a_launcher_is_a_usage_error() -> None:
    proc = doctor("--level", "cluster", env={"RANK": "", "WORLD_SIZE": ""})
    assert proc.returncode == 2
    assert "RANK" in proc.stderr and "Traceback" not in proc.stderr
    missing = run_ncclx("doctor", "--level", "cluster", env={"RANK": "0", "WORLD_SIZE": "1"})
    assert missing.returncode == 2
    assert "MASTER_ADDR" in missing.stderr


# --- offline merge ---------------------------------------------------------------------


def test_merge_names_the_minority_report(tmp_path: Path, fake_lib: Callable[..., str]) -> None:
    old = fake_lib("2.28.3")
    paths = []
    plain = doctor_json("--level", "static")  # node-a and node-c: the same command, the same environment
    for name, report in (("node-a", plain), ("node-b", doctor_json("--level", "static",
                                                                   env={"NCCLX_NCCL_LIBRARY": old})),
                         ("node-c", plain)):
        report.pop("_rc", None)
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(report))
        paths.append(str(path))
    merged = run_ncclx("doctor", "merge", *paths, "--json")
    assert merged.returncode == 1
    report = json.loads(merged.stdout)
    assert report["schema"] == "ncclx.doctor/1"
    assert report["level"] == "merge"
    cc = check(report, "cluster-consistency")
    assert cc["status"] == "fail"
    host = socket.gethostname()
    assert f"{host} (node-b.json) runs NCCL 2.28.3" in cc["message"]
    nccl = check(report, "nccl-version")
    assert "node-b.json" in nccl["message"]
    human = run_ncclx("doctor", "merge", *paths)
    assert "cluster-consistency" in human.stdout and "FAIL" in human.stdout


def test_merge_of_agreeing_reports_is_ok(tmp_path: Path) -> None:
    report = doctor_json("--level", "static", "--check", "env-vars", "--check", "legacy-toggle")
    report.pop("_rc")
    for n in range(2):
        (tmp_path / f"r{n}.json").write_text(json.dumps(report))
    merged = json.loads(run_ncclx("doctor", "merge", str(tmp_path / "r0.json"), str(tmp_path / "r1.json"),
                                  "--json").stdout)
    assert check(merged, "cluster-consistency")["status"] == "ok"
    assert check(merged, "env-vars")["message"].endswith("(all 2 reports)")


@pytest.mark.parametrize(
    ("content", "needle"),
    [("{not json", "not JSON"), ('{"schema": "other/9"}', "not an ncclx doctor report"), (None, "cannot read"),
     ("\x80binary", "not JSON")],  # e.g. a flight-recorder pickle passed by mistake
)
def test_merge_bad_input_is_a_usage_error_naming_the_file(tmp_path: Path, content: str | None, needle: str) -> None:
    path = tmp_path / "bad.json"
    if content is not None:
        path.write_bytes(content.encode("latin-1"))
    proc = run_ncclx("doctor", "merge", str(path))
    assert proc.returncode == 2
    assert str(path) in proc.stderr and needle in proc.stderr
    assert "Traceback" not in proc.stderr


def test_merge_of_per_rank_reports_names_ranks_and_hosts(tmp_path: Path, fake_lib: Callable[..., str]) -> None:
    # What `srun ncclx doctor --level static --json > rank$SLURM_PROCID.json` leaves on two
    # nodes; the host name is set per node since every report here comes from one machine.
    libs = {"node-a": fake_lib("2.30.7"), "node-b": fake_lib("2.28.3")}
    paths = []
    for rank in range(8):
        host = "node-a" if rank < 4 else "node-b"
        report = doctor_json("--level", "static", "--check", "nccl-version", "--check", "legacy-toggle",
                             env={"NCCLX_NCCL_LIBRARY": libs[host], "SLURM_PROCID": str(rank)})
        report.pop("_rc")
        assert report["rank"] == rank
        report["host"] = host
        path = tmp_path / f"rank{rank}.json"
        path.write_text(json.dumps(report))
        paths.append(str(path))
    merged = json.loads(run_ncclx("doctor", "merge", *paths, "--json").stdout)
    cc = check(merged, "cluster-consistency")
    assert cc["status"] == "fail"
    assert "ranks 4-7 on node-b run NCCL 2.28.3 (the others 2.30.7)" in cc["message"]
    assert cc["details"]["hosts"] == ["node-a", "node-b"]
    assert check(merged, "legacy-toggle")["message"].endswith("(all 8 ranks)")


# A rank with other NCCL/TORCH variables, merged from per-rank files: under a real srun in
# tests/slurm/test_doctor_srun.py (test_static_reports_of_srun_tasks_merge_naming_the_odd_rank).
