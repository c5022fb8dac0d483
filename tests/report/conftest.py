"""A small fleet made once per session: two real git repositories scanned by the real
``ncclx migrate --format json``, three jobs' real ``ncclx doctor --format json`` reports (static
level: no torch process), and the inputs a nightly collection picks up by mistake."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import once, run_ncclx

ALPHA_RUN = '''\
import os

import torch.distributed as dist

os.environ["TORCH_DIST_USE_NCCL2"] = "0"
os.environ["NCCL_ASYNC_ERROR_HANDLING"] = "1"


def is_nccl(pg):
    return isinstance(pg, dist.ProcessGroupNCCL)
'''
ALPHA_LAUNCH = "#!/bin/sh\nexport TORCH_DIST_USE_NCCL2=0\nexport TORCH_NCCL_TRACE_BUFFER_SIZE=2000\ntorchrun train/run.py\n"
ALPHA_TOOL = 'import os\n\nos.environ["NCCL_BLOCKING_WAIT"] = "1"\n'
# GitHub's semantics: the last matching line wins; a line without owners leaves its paths unowned.
CODEOWNERS = """\
# default owners
*                @org/platform
*.sh             @org/ops  # launch scripts
/train/          @org/train
/train/legacy/
"""
BETA_RUN = 'import os\n\nos.environ["TORCH_NCCL_TRACE_BUFFER_SIZE"] = "2000"\n'


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.email=ci@example.invalid", "-c", "user.name=ci",
                           *args], check=True, capture_output=True, text=True).stdout.strip()


def write_repo(repo: Path, files: dict[str, str], remote: str | None) -> None:
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    if not (repo / ".git").exists():
        git(repo, "init", "-q")
        if remote:
            git(repo, "remote", "add", "origin", remote)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "change")


def migrate_json(repo: Path, out: Path) -> dict[str, Any]:
    proc = run_ncclx("migrate", "--format", "json", ".", cwd=repo)
    assert proc.returncode in (0, 1), proc.stderr
    out.write_text(proc.stdout)
    data: dict[str, Any] = json.loads(proc.stdout)
    return data


def _make(folder: Path) -> dict[str, Any]:
    repos, reports = folder / "repos", folder / "reports"
    reports.mkdir(parents=True, exist_ok=True)
    alpha = repos / "alpha"
    alpha.mkdir(parents=True, exist_ok=True)
    write_repo(alpha, {"train/run.py": ALPHA_RUN, "launch.sh": ALPHA_LAUNCH, "train/legacy/tool.py": ALPHA_TOOL,
                       ".github/CODEOWNERS": CODEOWNERS},
               "https://ci-bot:s3cret@git.example.invalid/org/alpha.git")
    beta = repos / "beta"
    beta.mkdir(parents=True, exist_ok=True)
    write_repo(beta, {"job.py": BETA_RUN}, None)
    (reports / "repos").mkdir(exist_ok=True)
    migrate_json(alpha, reports / "repos" / "alpha.json")
    migrate_json(beta, reports / "repos" / "beta.json")
    jobs = reports / "jobs"
    jobs.mkdir(exist_ok=True)
    legacy = run_ncclx("doctor", "--level", "static", "--format", "json",
                       env={"TORCH_DIST_USE_NCCL2": "0", "SLURM_JOB_ID": "4243"})
    (jobs / "legacy.json").write_text(legacy.stdout)
    plain = run_ncclx("doctor", "--level", "static", "--format", "json", "--label", "pretrain-b")
    (jobs / "plain.json").write_text(plain.stdout)
    merged = run_ncclx("doctor", "merge", str(jobs / "plain.json"), str(jobs / "legacy.json"), "--format", "json",
                       "--label", "two-nodes")
    (folder / "merged.json").write_text(merged.stdout)
    return {"alpha_commit": git(alpha, "rev-parse", "HEAD")}


@pytest.fixture(scope="session")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """(folder, facts): folder/repos/{alpha,beta}, folder/reports/{repos,jobs}/*.json, folder/merged.json."""
    return once(tmp_path_factory, "report-fleet", _make)
