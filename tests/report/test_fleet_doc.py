"""docs/fleet.md, run as written: every fenced block is tagged with where it runs, and each is
run there (the CI YAML is parsed as YAML and its commands run locally, all but `pip install`)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from markdown_it import MarkdownIt

from tests.conftest import ROOT, run_ncclx

from .conftest import git

DOC = ROOT / "docs" / "fleet.md"
TAGS = ("sh repository", "yaml github", "yaml gitlab", "yaml pre-commit", "sh nightly", "sh job")
NEW_FINDING = 'os.environ["TORCH_DIST_USE_NCCL2"] = "0"\n'


def blocks(tag: str) -> list[str]:
    return [t.content for t in MarkdownIt().parse(DOC.read_text(encoding="utf-8"))
            if t.type == "fence" and t.info.strip() == tag]


def env(**extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("TORCH_", "NCCL", "NCCLX_", "SLURM_"))}
    return {**base, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{base.get('PATH', '')}", "NO_COLOR": "1",
            "GIT_AUTHOR_NAME": "ci", "GIT_AUTHOR_EMAIL": "ci@example.invalid", "GIT_COMMITTER_NAME": "ci",
            "GIT_COMMITTER_EMAIL": "ci@example.invalid", **extra}


def sh(script: str, cwd: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(["bash", "-e", "-c", script], cwd=cwd, env=env(**extra), capture_output=True, text=True,
                          timeout=300)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def test_every_block_says_where_it_runs() -> None:
    infos = [t.info.strip() for t in MarkdownIt().parse(DOC.read_text(encoding="utf-8")) if t.type == "fence"]
    assert set(infos) == set(TAGS), infos


def _ratchet_flags() -> None:
    helptext = run_ncclx("migrate", "--help").stdout
    if "--baseline" not in helptext or "gitlab" not in helptext:
        pytest.skip("ncclx migrate has no --baseline / --format gitlab yet (issue 26 §1, §4)")


@pytest.mark.slow
def test_repository_ci_and_pre_commit_as_written(fleet: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    _ratchet_flags()
    folder, _ = fleet
    repo = tmp_path / "alpha"
    subprocess.run(["git", "clone", "--quiet", str(folder / "repos" / "alpha"), str(repo)], check=True)
    for script in blocks("sh repository"):
        proc = sh(script, repo)
        assert proc.returncode == 0, proc.stderr
    assert git(repo, "log", "-1", "--format=%s") == "ncclx: baseline of today's findings"
    assert ".ncclx-baseline.json" in git(repo, "ls-files")

    (workflow,) = (yaml.safe_load(b) for b in blocks("yaml github"))
    steps = workflow["jobs"]["migrate"]["steps"]
    runs = [s["run"] for s in steps if "run" in s]
    assert [r for r in runs if r.startswith("pip install")] == ["pip install ncclx-migrate"]
    (migrate,) = [r for r in runs if not r.startswith("pip install")]
    upload = next(s for s in steps if s.get("uses", "").startswith("github/codeql-action/upload-sarif"))
    assert migrate.endswith(f"> {upload['with']['sarif_file']}") and upload["if"] == "always()"
    assert workflow["permissions"]["security-events"] == "write"

    (gitlab,) = (yaml.safe_load(b) for b in blocks("yaml gitlab"))
    job = gitlab["ncclx-migrate"]
    (quality,) = [c for c in job["script"] if not c.startswith("pip install")]
    assert quality.endswith(f"> {job['artifacts']['reports']['codequality']}") and job["artifacts"]["when"] == "always"

    (precommit,) = (yaml.safe_load(b) for b in blocks("yaml pre-commit"))
    (hook,) = precommit["repos"][0]["hooks"]
    ours = {h["id"]: h for h in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())}
    command = f"{ours[hook['id']]['entry']} {' '.join(hook['args'])} train/run.py"

    def ci() -> tuple[int, list[str], int, list[Any], int]:
        sarif_run = sh(migrate, repo)
        sarif = json.loads((repo / upload["with"]["sarif_file"]).read_text())
        states = sorted(r.get("baselineState", "") for r in sarif["runs"][0]["results"])
        gl_run = sh(quality, repo)
        quality_report = json.loads((repo / job["artifacts"]["reports"]["codequality"]).read_text())
        hook_run = sh(command, repo)
        # The hook sees one file: the baseline's entries for the others are never "fixed".
        assert "fixed" not in hook_run.stdout + hook_run.stderr, hook_run.stdout
        return sarif_run.returncode, states, gl_run.returncode, quality_report, hook_run.returncode

    rc, states, gl_rc, quality_report, hook_rc = ci()
    assert (rc, gl_rc, quality_report, hook_rc) == (0, 0, [], 0) and set(states) == {"unchanged"}
    # A new rollback toggle in the changed file: each of the three fails and names it.
    with (repo / "train" / "run.py").open("a") as fh:
        fh.write(NEW_FINDING)
    rc, states, gl_rc, quality_report, hook_rc = ci()
    assert (rc, gl_rc, hook_rc) == (1, 1, 1) and states.count("new") == 1
    assert [q["check_name"] for q in quality_report] == ["NCX101"]


@pytest.mark.slow
def test_nightly_batch_as_written(fleet: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    folder, _ = fleet
    upstream, batch = tmp_path / "upstream", tmp_path / "batch"
    batch.mkdir()
    for name in ("alpha", "beta"):
        shutil.copytree(folder / "repos" / name, upstream / name, symlinks=True)
    (batch / "repos.txt").write_text("".join(f"{upstream / n}\n" for n in ("alpha", "beta")))
    collect, rollup = blocks("sh nightly")
    (job,) = blocks("sh job")

    def night() -> subprocess.CompletedProcess[str]:
        for script, extra in ((collect, {}), (job, {"SLURM_JOB_ID": "9001"}), (rollup, {})):
            proc = sh(script, batch, REPORTS="reports", **extra)
            assert proc.returncode == 0, proc.stderr
        return proc

    night()
    first = json.loads((batch / "rollup.json").read_text())
    assert (first["totals"]["repositories"], first["totals"]["jobs"], first["totals"]["findings"]) == (2, 1, 7)
    assert first["jobs"][0]["label"].endswith("/slurm-9001") and first["trend"] is None
    assert (batch / "fleet.html").read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    # Overnight alpha drops its launch script's toggle.
    launch = (upstream / "alpha" / "launch.sh").read_text().replace("export TORCH_DIST_USE_NCCL2=0\n", "")
    (upstream / "alpha" / "launch.sh").write_text(launch)
    git(upstream / "alpha", "commit", "-qam", "drop the rollback toggle")
    last = night()
    second = json.loads((batch / "rollup.json").read_text())
    assert (second["trend"]["fixed"], second["trend"]["new"]) == (1, 0)
    assert [h["findings"] for h in second["history"]] == [7, 6]
    assert second["trend"]["previous"] == first["generated"]
    assert "1 fixed, 0 new (open: 7 -> 6)" in last.stdout
    assert "1 rollback toggle still set in 1 repository: alpha" in last.stdout


@pytest.mark.slow
def test_readme_fleet_lines_as_written(fleet: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    _ratchet_flags()
    folder, _ = fleet
    tokens = MarkdownIt().parse((ROOT / "README.md").read_text(encoding="utf-8"))
    at = next(i for i, t in enumerate(tokens) if t.type == "inline" and t.content.startswith("A fleet, in three lines"))
    fence = next(t for t in tokens[at:] if t.type == "fence")
    lines = fence.content.splitlines()
    assert len(lines) == 3 and "docs/fleet.md" in tokens[at].content
    repo = tmp_path / "alpha"
    subprocess.run(["git", "clone", "--quiet", str(folder / "repos" / "alpha"), str(repo)], check=True)
    (tmp_path / "reports").mkdir()
    codes = [sh(line, repo).returncode for line in lines]
    assert codes == [0, 1, 0]  # the nightly report exits 1: findings are left (all in the baseline)
    doc = json.loads((tmp_path / "reports" / "alpha.json").read_text())
    assert doc["project"]["name"] == "alpha" and "baseline_state" not in doc["findings"][0]
    assert (repo / "fleet.html").read_text(encoding="utf-8").count("alpha") >= 1


def test_the_pre_commit_pin_is_a_commit_of_this_repository() -> None:
    """`rev:` in fleet.md's and migrate.md's snippets names what pre-commit can check out: the
    project has no release tags, so the pin is a commit of its history (issue 37)."""
    import re

    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    for page in ("fleet.md", "migrate.md"):
        revs = re.findall(r"^\s+rev: (\S+)", (ROOT / "docs" / page).read_text(), re.M)
        assert revs, page
        for rev in revs:
            assert re.fullmatch(r"[0-9a-f]{40}", rev), (page, rev)
            ok = subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", f"{rev}^{{commit}}"], timeout=30)
            assert ok.returncode == 0, (page, rev)


@pytest.mark.slow  # ~10 CPU s and 1-2 min: pre-commit builds the hook's virtualenv from the pinned commit
def test_pre_commit_runs_the_snippet_from_a_clone(tmp_path: Path) -> None:
    """fleet.md's `.pre-commit-config.yaml` as written, the repository URL pointing at a clone of
    this one: pre-commit checks out the pinned `rev:`, installs the hook and runs it (issue 37 §3)."""
    pre_commit = shutil.which("pre-commit", path=str(Path(sys.executable).parent))
    if pre_commit is None:
        pytest.skip("pre-commit is not installed in this venv (pip install pre-commit: the test extra has it)")
    clone = tmp_path / "ncclx-migrate"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True, timeout=120)
    (snippet,) = blocks("yaml pre-commit")
    assert "https://github.com/<org>/ncclx-migrate" in snippet
    project = tmp_path / "project"
    project.mkdir()
    (project / ".pre-commit-config.yaml").write_text(snippet.replace("https://github.com/<org>/ncclx-migrate",
                                                                      str(clone)))
    (project / "old.py").write_text(NEW_FINDING)
    quiet = {k: v for k, v in env().items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}  # the hook's own ncclx
    setup = ("git init -q && ncclx migrate --baseline .ncclx-baseline.json --update-baseline -q . ; "
             "git add -A && git commit -qm baseline")
    assert subprocess.run(["bash", "-c", setup], cwd=project, env=quiet, timeout=120).returncode == 0

    def hook(*files: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([pre_commit, "run", "--files", *files], cwd=project, capture_output=True, text=True,
                              timeout=900, env={**quiet, "PRE_COMMIT_HOME": str(tmp_path / "cache")})

    known = hook("old.py")  # the baseline's finding: no new one
    assert known.returncode == 0, known.stdout + known.stderr
    assert re.search(r"ncclx migrate \(legacy NCCL toggles and nccl2 hazards\)\.+Passed", known.stdout), known.stdout
    (project / "new.py").write_text(NEW_FINDING)
    subprocess.run(["git", "add", "new.py"], cwd=project, check=True, env=quiet)
    new = hook("new.py")
    assert new.returncode == 1, new.stdout + new.stderr
    assert "Failed" in new.stdout and "new.py:1:" in new.stdout and "NCX101" in new.stdout, new.stdout
