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
