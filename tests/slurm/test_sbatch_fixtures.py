"""The launch-script fixes, run for real: each srun/sbatch fixture of the shell codemod is submitted
with `sbatch --wait` before and after `ncclx migrate --write --unsafe-fixes` (every fix to these
lines is unsafe: it changes what the job runs), with every program the script starts (python,
torchrun, docker, ...) replaced by a stub that records its TORCH_*/NCCL* environment.  The two jobs
may differ only as the fixes say: the rollback toggle gone, a new name added beside the old one
with its value."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_ncclx
from tests.slurm.conftest import Slurm

pytestmark = [pytest.mark.slow, pytest.mark.slurm]

SHELL = ROOT / "tests" / "fixtures" / "files" / "shell"
# The fixtures whose srun lines or #SBATCH directives the codemod rewrites.
CASES = ["directives.in.sbatch", "script_strings.in.sh", "suppress_continued.in.sh"]
STUBS = ("python", "torchrun", "docker", "kubectl", "ssh", "mpirun")
Records = dict[str, list[dict[str, str]]]

STUB = """#!/bin/sh
# what this program would have seen: one line per call, keyed by step and task
{ printf '%s|%s|%s|' "${SLURM_STEP_ID:-batch}" "${SLURM_PROCID:-0}" "$(basename "$0")"
  env | grep -E '^(TORCH_|NCCL)' | sort | tr '\\n' ';'; echo; } >> "$RECORD"
"""


def _job(text: str, stubs: Path, record: Path, conf: str) -> str:
    """The fixture as a job on this one node: the stubs first on PATH (and as exported functions,
    which a `bash -l` whose profile resets PATH still calls), and SLURM_CONF for the inner srun
    (a directive `--export=` without ALL does not pass it on)."""
    lines = text.replace("--nodes=2", "--nodes=1").splitlines(keepends=True)
    head = next(i for i, line in enumerate(lines) if not line.startswith("#"))
    funcs = "".join(f'{s}() {{ "{stubs}/{s}" "$@"; }}; export -f {s}\n' for s in STUBS)
    pre = f"export PATH={stubs}:$PATH SLURM_CONF={conf} RECORD={record}\n{funcs}"
    return "".join([*lines[:head], pre, *lines[head:]])


def _submit(slurm: Slurm, job: Path) -> subprocess.Popen[str]:
    # as many tasks as the script's own srun asks for (one node: --nodes=2 became 1)
    tasks = max([1, *(int(n) for n in re.findall(r"--ntasks[= ](\d+)", job.read_text()))])
    return subprocess.Popen(["sbatch", "--wait", "--parsable", f"--ntasks={tasks}", f"--chdir={job.parent}",
                             "-o", f"{job}.out", str(job)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=slurm.env(), stdin=subprocess.DEVNULL)


def _records(job: Path, proc: subprocess.Popen[str], record: Path) -> Records:
    output, _ = proc.communicate(timeout=180)
    log = Path(f"{job}.out").read_text() if Path(f"{job}.out").exists() else ""
    assert proc.returncode == 0, output + log
    out: Records = defaultdict(list)
    for line in record.read_text().splitlines():
        step, task, name, env = line.split("|", 3)
        out[f"{step}/{task}/{name}"].append(dict(kv.split("=", 1) for kv in env.split(";") if kv))
    return out


def _allowed(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """What differs beyond the fixes: anything but the toggle removed and new names added
    with the value of an old name the job still has."""
    bad = [f"{k} removed" for k in before.keys() - after.keys() if k != "TORCH_DIST_USE_NCCL2"]
    bad += [f"{k}: {before[k]!r} -> {after[k]!r}" for k in before.keys() & after.keys() if before[k] != after[k]]
    old = {v for k, v in before.items() if k.startswith(("TORCH_NCCL_", "NCCL_"))}
    bad += [f"{k}={after[k]} added" for k in after.keys() - before.keys()
            if not (k.startswith("TORCH_") and after[k] in old)]
    return bad


@pytest.mark.parametrize("case", CASES)
def test_the_fixed_launch_script_runs_the_same_job_but_the_fixes(slurm: Slurm, tmp_path: Path, case: str) -> None:
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    for name in STUBS:
        (stubs / name).write_text(STUB)
        (stubs / name).chmod(0o755)
    fixed = tmp_path / "fixed" / case
    fixed.parent.mkdir()
    shutil.copy(SHELL / case, fixed)
    migrated = run_ncclx("migrate", "--write", "--unsafe-fixes", str(fixed))
    assert fixed.read_text() != (SHELL / case).read_text(), migrated.stdout + migrated.stderr
    jobs = []  # both jobs at once: most of a job's time is sbatch --wait polling its state
    for label, text in (("before", (SHELL / case).read_text()), ("after", fixed.read_text())):
        folder = tmp_path / label
        folder.mkdir()
        job = folder / re.sub(r"\.in\.", ".", case)
        job.write_text(_job(text, stubs, folder / "record", str(slurm.conf)))
        jobs.append((job, _submit(slurm, job), folder / "record"))
    before, after = (_records(*job) for job in jobs)
    assert any(not key.startswith("batch/") for key in before), before  # the srun step ran
    assert before.keys() == after.keys()
    assert {k: len(v) for k, v in before.items()} == {k: len(v) for k, v in after.items()}
    problems = [f"{key} call {i}: {p}" for key in before for i, (b, a) in enumerate(zip(before[key], after[key], strict=True))
                for p in _allowed(b, a)]
    assert problems == [], problems
    assert before != after  # the fixes did reach the job
