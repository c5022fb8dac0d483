"""`ncclx doctor --level cluster` under a real srun, as docs/doctor.md says to run it: all ranks
agree; a task with another environment (srun --multi-prog) is named; a task that dies makes srun
(--kill-on-bad-exit) stop the others, and rank 0's report says so and names who did not report."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from tests.conftest import run_ncclx
from tests.slurm.conftest import Slurm, script

pytestmark = [pytest.mark.slow, pytest.mark.slurm]


def flat(text: str) -> str:
    return " ".join(text.split())


def test_all_ranks_agree_under_srun(slurm: Slurm) -> None:
    proc = slurm.run("srun", "-n3", "ncclx", "doctor", "--level", "cluster")
    out = flat(proc.stdout)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "cluster-consistency 3 ranks on 1 host agree" in out
    assert "(all 3 ranks)" in out and "did not report" not in out


@pytest.mark.parametrize("form", ["text", "json"])
def test_odd_rank_and_a_dead_task_under_srun(slurm: Slurm, tmp_path: Path, form: str) -> None:
    """Rank 1 runs with TORCH_DIST_USE_NCCL2=0; rank 2 exits 3 once rank 1 has published (so the
    order is the same on a loaded machine): srun stops rank 0 with SIGTERM."""
    done = tmp_path / "rank1-done"
    doctor = f"ncclx doctor --level cluster --format {form}"
    odd = script(tmp_path / "odd.sh", f"TORCH_DIST_USE_NCCL2=0 {doctor}; rc=$?; touch {done}; exit $rc\n")
    die = script(tmp_path / "die.sh", f"i=0; while [ ! -e {done} ] && [ $i -lt 1200 ]; do sleep 0.1; "
                                      "i=$((i+1)); done; echo rank 2 dies >&2; exit 3\n")
    conf = tmp_path / "tasks.conf"
    conf.write_text(f"0 {doctor}\n1 {odd}\n2 {die}\n")
    proc = slurm.run("srun", "-n3", "--kill-on-bad-exit=1", "--multi-prog", str(conf))
    assert proc.returncode == 3, proc.stdout + proc.stderr  # srun passes on the first failure
    assert "task 2: Exited with exit code 3" in proc.stderr
    if form == "text":
        out = flat(proc.stdout)
        assert "FAIL cluster-consistency" in out
        assert "with 2 of 3 reports: the launcher stops every rank when one fails (srun: when a task " \
               "exits non-zero under --kill-on-bad-exit, or at the job's time limit)" in out
        assert "find the task that failed first in srun's output" in out
        assert "rank 2 did not report fix: they had not reported when the launcher stopped the job" in out
        assert f"rank 1 on {_host(out)} has TORCH_DIST_USE_NCCL2 = 0 (the others unset)" in out
        return
    doc = json.loads(proc.stdout)
    (check,) = [c for c in doc["checks"] if c["id"] == "cluster-consistency"]
    assert check["status"] == "fail"
    assert check["details"]["stopped_by"] == "SIGTERM" and check["details"]["launcher"] == "srun"
    problems = [p["message"] for p in check["details"]["problems"]]
    assert any("rank 2 did not report" in p for p in problems), problems
    assert any("rank 1" in p and "TORCH_DIST_USE_NCCL2" in p for p in problems), problems


def _host(out: str) -> str:
    return out.split("host ", 1)[1].split(",", 1)[0]


def test_static_reports_of_srun_tasks_merge_naming_the_odd_rank(slurm: Slurm, tmp_path: Path) -> None:
    """`srun ncclx doctor --level static --json`, one file per task (srun -o r%t.json), rank 2 with
    other NCCL/TORCH variables (--multi-prog), merged afterwards: the rank numbers are srun's."""
    doctor = "ncclx doctor --level static --check env-vars --json"
    conf = tmp_path / "tasks.conf"
    conf.write_text(f"0-1 {doctor}\n2 env NCCL_SOCKET_IFNAME=eth9 TORCH_NCCL_BLOCKING_WAIT=1 {doctor}\n")
    proc = slurm.run("srun", "-n3", "-o", str(tmp_path / "r%t.json"), "--multi-prog", str(conf),
                     NCCL_DEBUG="WARN")
    paths = sorted(str(p) for p in tmp_path.glob("r*.json"))
    assert len(paths) == 3, proc.stdout + proc.stderr
    merged = run_ncclx("doctor", "merge", *paths, "--json")
    (cc,) = [c for c in json.loads(merged.stdout)["checks"] if c["id"] == "cluster-consistency"]
    assert cc["status"] == "warn"
    host = socket.gethostname()
    assert f"rank 2 on {host} has NCCL_SOCKET_IFNAME=eth9 (the others NCCL_SOCKET_IFNAME unset)" in cc["message"]
    assert f"rank 2 on {host} has TORCH_NCCL_BLOCKING_WAIT=1 (the others TORCH_NCCL_BLOCKING_WAIT unset)" in cc["message"]
    assert "NCCL_DEBUG" not in cc["message"]  # the same on every rank
