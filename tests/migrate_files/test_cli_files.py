"""`ncclx migrate` (the real CLI, in subprocesses) over shell, Dockerfile, YAML, .env and
notebook files: report, JSON, --diff, --write, --unsafe-fixes, idempotence, CRLF,
file mode, suppression and errors."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from tests.conftest import run_ncclx

from ._cases import FIXTURES

# One fixture per kind, copied under the names the scanners recognise.
FILES = {
    "launch.sh": FIXTURES / "shell" / "toggle.in.sh",
    "jobs/train.sbatch": FIXTURES / "shell" / "directives.in.sbatch",
    "Dockerfile": FIXTURES / "dockerfile" / "env.in.Dockerfile",
    "k8s/job.yaml": FIXTURES / "yaml" / "k8s.in.yaml",
    "compose.yml": FIXTURES / "yaml" / "compose.in.yml",
    ".env": FIXTURES / "dotenv" / "basic.in.env",
    "nb/explore.ipynb": FIXTURES / "notebook" / "basic.in.ipynb",
}


def _expected(src: Path, kind: str) -> bytes:
    stem, ext = src.name.split(".in.", 1)
    for k in ((kind, "out") if kind == "unsafe" else (kind,)):
        p = src.with_name(f"{stem}.{k}.{ext}")
        if p.exists():
            return p.read_bytes()
    return src.read_bytes()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    for rel, src in FILES.items():
        dst = tmp_path / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)
    (tmp_path / "requirements.txt").write_text("torch>=2.15\n")
    os.chmod(tmp_path / "launch.sh", 0o755)
    return tmp_path


def _json(proc: object) -> dict:  # type: ignore[type-arg]
    return json.loads(proc.stdout)  # type: ignore[attr-defined,no-any-return]


def test_report_json_covers_every_kind(project: Path) -> None:
    proc = run_ncclx("migrate", "--format", "json", "-q", ".", cwd=project)
    assert proc.returncode == 1, proc.stderr
    doc = _json(proc)
    assert doc["errors"] == []
    by_path: dict[str, set[str]] = {}
    for f in doc["findings"]:
        by_path.setdefault(f["path"], set()).add(f["code"])
        assert f["applied"] is False
    assert set(by_path) == set(FILES)
    assert by_path[".env"] == {"NCX201", "NCX202", "NCX203"}
    assert "NCX110" in by_path["nb/explore.ipynb"]  # Python rules run on notebook cells
    # Every reported position exists in the file.
    for f in doc["findings"]:
        lines = (project / f["path"]).read_text().splitlines()
        assert 1 <= f["line"] <= len(lines) and 1 <= f["column"] <= len(lines[f["line"] - 1]) + 1
    # Report mode writes nothing.
    for rel, src in FILES.items():
        assert (project / rel).read_bytes() == src.read_bytes()


def test_text_format_line(project: Path) -> None:
    proc = run_ncclx("migrate", "-q", "launch.sh", cwd=project)
    assert proc.returncode == 1
    assert "launch.sh:4:8: NCX201 TORCH_DIST_USE_NCCL2=0" in proc.stdout


def test_diff_shows_what_write_applies(project: Path) -> None:
    proc = run_ncclx("migrate", "--diff", "-q", ".env", "Dockerfile", cwd=project)
    assert proc.returncode == 1
    # .env and Dockerfile ENV cannot keep torch's new-then-old reading: unsafe there.
    assert "+export TORCH_FR_BUFFER_SIZE" not in proc.stdout
    assert "+ENV TORCH_FR_BUFFER_SIZE" not in proc.stdout
    assert "-TORCH_DIST_USE_NCCL2=0" not in proc.stdout  # unsafe: not without --unsafe-fixes
    unsafe = run_ncclx("migrate", "--diff", "--unsafe-fixes", "-q", ".env", "Dockerfile", cwd=project)
    assert "-TORCH_DIST_USE_NCCL2=0" in unsafe.stdout
    assert "+export TORCH_FR_BUFFER_SIZE=\"2000\"" in unsafe.stdout
    assert "+ENV TORCH_FR_BUFFER_SIZE 2000" in unsafe.stdout
    assert (project / ".env").read_bytes() == FILES[".env"].read_bytes()


def _each(project: Path, *args: str) -> list[dict]:  # type: ignore[type-arg]
    """The findings of one run per file, each in a project of its own: the fixtures are
    unrelated files, and a name that two files of one project set gets no safe add, whichever
    files a run is given (test_shared_names_across_kinds).  What a run writes comes back."""
    found = []
    for k, rel in enumerate(FILES):
        alone = project.parent / f"{project.name}-alone" / str(k)
        (alone / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(project / rel, alone / rel)
        (alone / "requirements.txt").write_text("torch>=2.15\n")
        proc = run_ncclx(*args, rel, cwd=alone)
        assert proc.returncode in (0, 1), (rel, proc.stdout, proc.stderr)
        found += _json(proc)["findings"]
        shutil.copyfile(alone / rel, project / rel)
        shutil.copymode(alone / rel, project / rel)
    return found


@pytest.mark.slow
@pytest.mark.parametrize("unsafe", [False, True], ids=["safe", "unsafe"])
def test_write_matches_the_fixtures_and_is_idempotent(project: Path, unsafe: bool) -> None:
    args = ["migrate", "--write", "-q", "--format", "json", *(["--unsafe-fixes"] if unsafe else [])]
    first = _each(project, *args)
    assert any(f["applied"] for f in first) and not all(f["applied"] for f in first)  # flag-only remain
    for rel, src in FILES.items():
        assert (project / rel).read_bytes() == _expected(src, "unsafe" if unsafe else "out"), rel
    assert stat.S_IMODE((project / "launch.sh").stat().st_mode) == 0o755
    second = run_ncclx(*args, ".", cwd=project)
    assert not any(f["applied"] for f in _json(second)["findings"])
    for rel, src in FILES.items():
        assert (project / rel).read_bytes() == _expected(src, "unsafe" if unsafe else "out"), rel


def test_crlf_files_keep_crlf(tmp_path: Path) -> None:
    src = (FIXTURES / "shell" / "envnames.in.sh").read_bytes().replace(b"\n", b"\r\n")
    (tmp_path / "run.sh").write_bytes(src)
    proc = run_ncclx("migrate", "--write", "-q", "run.sh", cwd=tmp_path)
    assert proc.returncode == 1
    out = (tmp_path / "run.sh").read_bytes()
    assert out != src and b"\n" not in out.replace(b"\r\n", b"")
    assert b'export TORCH_FR_DUMP_TEMP_FILE="${TORCH_FR_DUMP_TEMP_FILE-$TORCH_NCCL_DEBUG_INFO_TEMP_FILE}"\r\n' in out


def test_select_ignore_and_suppression(project: Path) -> None:
    only = _json(run_ncclx("migrate", "--format", "json", "--select", "NCX202", ".", cwd=project))
    assert {f["code"] for f in only["findings"]} == {"NCX202"}
    none = run_ncclx("migrate", "--ignore", "NCX2,NCX1", "-q", ".", cwd=project)
    assert none.returncode == 0, none.stdout
    doc = _json(run_ncclx("migrate", "--format", "json", "launch.sh", cwd=project))
    lines = (project / "launch.sh").read_text().splitlines()
    assert not any("ncclx: ignore" in lines[f["line"] - 1] and "NCX203" not in lines[f["line"] - 1]
                   for f in doc["findings"])


def test_target_2_14_keeps_the_opt_in(tmp_path: Path) -> None:
    (tmp_path / "run.sh").write_text("export TORCH_DIST_USE_NCCL2=1\n")
    assert run_ncclx("migrate", "-q", "--target-torch", "2.14", "run.sh", cwd=tmp_path).returncode == 0
    proc = run_ncclx("migrate", "-q", "--target-torch", "2.15", "run.sh", cwd=tmp_path)
    assert proc.returncode == 1 and "redundant" in proc.stdout


def test_broken_notebook_is_an_error_and_others_still_run(tmp_path: Path) -> None:
    (tmp_path / "bad.ipynb").write_text('{"cells": [')
    (tmp_path / "run.sh").write_text("export TORCH_DIST_USE_NCCL2=0\n")
    proc = run_ncclx("migrate", "--format", "json", ".", cwd=tmp_path)
    assert proc.returncode == 2
    doc = _json(proc)
    assert [e["path"] for e in doc["errors"]] == ["bad.ipynb"]
    assert [f["path"] for f in doc["findings"]] == ["run.sh"]


def test_clean_files_are_untouched(tmp_path: Path) -> None:
    files = {
        "run.sh": (FIXTURES / "shell" / "clean.in.sh").read_bytes(),
        "cm.yaml": (FIXTURES / "yaml" / "clean.in.yaml").read_bytes(),
        "nb.ipynb": (FIXTURES / "notebook" / "clean.in.ipynb").read_bytes(),
    }
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    proc = run_ncclx("migrate", "--write", "--unsafe-fixes", "-q", ".", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout
    for name, data in files.items():
        assert (tmp_path / name).read_bytes() == data


def test_shell_script_from_stdin() -> None:
    proc = run_ncclx("migrate", "--write", "--unsafe-fixes", "--stdin-filename", "run.sh", "-",
                     input="export TORCH_DIST_USE_NCCL2=0\necho ok\n")
    assert proc.stdout == "echo ok\n", proc.stderr


@pytest.mark.slow
@pytest.mark.parametrize("unsafe", [False, True], ids=["safe", "unsafe"])
def test_findings_left_after_write_point_into_the_written_file(project: Path, unsafe: bool) -> None:
    """Each finding that --write leaves points at the same text in the written file as the
    report-only run pointed at in the original (lines added above it move it down)."""
    before = {rel: (project / rel).read_text().splitlines() for rel in FILES}
    report = _each(project, "migrate", "--format", "json", "-q")
    written = _each(project, "migrate", "--write", "--format", "json", "-q", *(["--unsafe-fixes"] if unsafe else []))
    assert len(report) == len(written)
    # a notebook finding's line in its cell moves with it (checked in test_cli.py)
    key = lambda f: (f["path"], f["code"], f["message"], (f["cell"] or {}).get("number"))  # noqa: E731
    moved = 0
    for old, new in zip(sorted(report, key=key), sorted(written, key=key), strict=True):
        assert key(old) == key(new)
        if new["applied"]:
            continue
        after = (project / new["path"]).read_text().splitlines()
        was = before[old["path"]][old["line"] - 1][old["column"] - 1 :][:12]
        now = after[new["line"] - 1][new["column"] - 1 :][:12]
        assert was == now, (new, was, now)
        moved += (old["line"], old["column"]) != (new["line"], new["column"])
    assert moved > 0  # the fixture set has findings below an added line


def test_diff_reports_what_write_would_leave(project: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    """--diff reports every finding at the position --write then reports (findings left point
    into the written file), and its diff, applied with `git apply`, gives the written files."""
    copy = tmp_path_factory.mktemp("copy")
    shutil.copytree(project, copy, dirs_exist_ok=True)
    proc = run_ncclx("migrate", "--diff", "--unsafe-fixes", "--format", "json", "-q", ".", cwd=project)
    diffed = json.loads(proc.stderr)["findings"]
    written = _json(run_ncclx("migrate", "--write", "--unsafe-fixes", "--format", "json", "-q", ".", cwd=copy))
    assert diffed == written["findings"]
    assert any(not f["applied"] for f in diffed)
    subprocess.run(["git", "apply", "-"], input=proc.stdout, text=True, cwd=project, check=True)
    for rel in FILES:
        assert (project / rel).read_bytes() == (copy / rel).read_bytes(), rel


@pytest.mark.slow
def test_shared_names_across_kinds(project: Path) -> None:
    """One run over the whole tree: a deprecated name that two files set (the launch script,
    the Dockerfile, the k8s job, .env ...) gets no safe add anywhere, and says why."""
    alone = {(f["path"], f["line"], f["code"]): f["fix"] for f in _each(project, "migrate", "--format", "json", "-q")}
    together = _json(run_ncclx("migrate", "--format", "json", "-q", ".", cwd=project))["findings"]
    downgraded = [f for f in together if f["fix"] == "unsafe" and alone[(f["path"], f["line"], f["code"])] == "safe"]
    assert downgraded, together
    assert all("Another file of this project also sets" in f["detail"] for f in downgraded), downgraded
    assert "nb/explore.ipynb" in {f["path"] for f in downgraded}  # its `!export` line


def test_unreadable_shell_region_is_a_warning_naming_the_line(tmp_path: Path) -> None:
    (tmp_path / "run.sh").write_text("export NCCL_BLOCKING_WAIT=1\nNCCL_DEBUG=1# x\n")
    proc = run_ncclx("migrate", str(tmp_path / "run.sh"))
    assert proc.returncode == 1, proc.stderr
    assert f"{tmp_path / 'run.sh'}:2: warning: cannot parse shell from column 1 (tree-sitter-bash)" in proc.stderr
    assert "run.sh:1:8: NCX203" in proc.stdout
