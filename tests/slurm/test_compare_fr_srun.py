"""`ncclx compare --cluster` and a hang's flight-recorder dumps under a real srun."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import ROOT, run_ncclx
from tests.slurm.conftest import Slurm

pytestmark = [pytest.mark.slow, pytest.mark.slurm]


def test_compare_cluster_under_srun_as_the_docs_show(slurm: Slurm) -> None:
    """docs/compare.md's command (MASTER_ADDR from scontrol), on gloo, one small case per
    collective; numbers are not judged (an absurd --threshold), only that it runs and reports."""
    cmd = ("MASTER_ADDR=$(scontrol show hostnames $SLURM_NODELIST | head -1) ncclx compare --cluster "
           "--arm gloo --arm gloo --sizes 4K --warmup 1 --iters 2 --collectives all_reduce_sum,sendrecv "
           "--dtypes int32 --threshold 1000000000")
    proc = slurm.run("srun", "-n2", "bash", "-c", cmd)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = " ".join(proc.stdout.split())
    assert out.startswith("ncclx compare: 2 ranks on cpu") and "result: the arms agree" in out, out
    assert "all_reduce_sum" in out and "sendrecv" in out
    assert out.count("ncclx compare:") == 1, out  # rank 0 reports; the other task prints nothing


def test_hang_under_srun_dumps_every_rank_and_fr_analyze_names_the_culprit(slurm: Slurm, tmp_path: Path) -> None:
    """tests/fr/worker.py's `skip` hang (rank 1 stays out of all_reduce #3) as srun tasks, with the
    hang watchdog at 2 s (no stack traces: they cost seconds of CPU per rank here)."""
    dumps = tmp_path / "dumps"
    dumps.mkdir()
    worker = ROOT / "tests" / "fr" / "worker.py"
    cmd = f'python {worker} "$SLURM_PROCID" "$SLURM_NTASKS" "$PORT" skip 1 watchdog'
    proc = slurm.run("srun", "-n3", "bash", "-c", cmd, PORT=slurm.env()["MASTER_PORT"], HANG_DUMP="2",
                     HANG_DUMP_STACKS="0", TORCH_FR_DUMP_TEMP_FILE=str(dumps / "fr_trace_"),
                     XDG_CACHE_HOME=str(tmp_path / "xdg"), PYTHONUNBUFFERED="1")
    # the waiting ranks end on gloo's timeout (an uncaught RuntimeError); srun passes exit 1 on
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert sorted(p.name for p in dumps.iterdir()) == ["fr_trace_0", "fr_trace_1", "fr_trace_2"]
    assert "ncclx hang dump (rank 1): rank " in proc.stderr  # the culprit dumped when asked
    report = run_ncclx("fr", "analyze", str(dumps))
    assert report.returncode == 1, report.stderr
    assert "rank 1 never entered all_reduce #3 of group default_pg; ranks 0 and 2 waited" in report.stdout
    assert report.stdout.rstrip().endswith("verdict: culprit rank 1")


def test_slurms_time_limit_sigterm_dumps_every_rank(slurm: Slurm, tmp_path: Path) -> None:
    """The same hang with the watchdog's deadline far off (600 s) under `srun --time=1`: at the
    time limit slurmstepd sends SIGTERM to every task, each rank dumps (the one waiting inside
    all_reduce too: the watchdog thread reads the signal) and then ends as SIGTERM ends it (issue
    36). About a minute of waiting; little CPU."""
    dumps = tmp_path / "dumps"
    dumps.mkdir()
    worker = ROOT / "tests" / "fr" / "worker.py"
    cmd = f'exec python {worker} "$SLURM_PROCID" "$SLURM_NTASKS" "$PORT" skip 1 watchdog'
    proc = slurm.run("srun", "-n2", "--time=1", "bash", "-c", cmd, timeout=240, PORT=slurm.env()["MASTER_PORT"],
                     HANG_DUMP="600", HANG_DUMP_STACKS="0", GLOO_TIMEOUT="600", SKIP_SLEEP="600",
                     TORCH_FR_DUMP_TEMP_FILE=str(dumps / "fr_trace_"), PYTHONUNBUFFERED="1")
    assert "DUE TO TIME LIMIT" in proc.stderr, proc.stdout + proc.stderr
    assert proc.returncode != 0
    for rank in (0, 1):
        assert f"ncclx hang dump (rank {rank}): SIGTERM: the job is being stopped" in proc.stderr, proc.stderr
    assert sorted(p.name for p in dumps.iterdir()) == ["fr_trace_0", "fr_trace_1"]
    report = run_ncclx("fr", "analyze", str(dumps))
    assert "rank 1 never entered all_reduce #3 of group default_pg; rank 0 waited" in report.stdout, report.stdout
    assert report.stdout.rstrip().endswith("verdict: culprit rank 1")
