"""Mistakes that used to pass without a word (issue 10): each is an error or a warning now."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_ncclx

TOGGLE = 'import os\nos.environ["TORCH_DIST_USE_NCCL2"] = "0"\n'
SHELL = "export TORCH_DIST_USE_NCCL2=0\n"


@pytest.mark.parametrize("name, content, why", [
    ("notes.md", "TORCH_DIST_USE_NCCL2=0\n", "not a kind of file ncclx migrate checks"),
    ("launch", SHELL, "not a kind of file ncclx migrate checks"),  # no shebang, no extension
])
def test_a_file_holding_nothing_checkable_is_an_error(tmp_path: Path, name: str, content: str, why: str) -> None:
    (tmp_path / name).write_text(content)
    proc = run_ncclx("migrate", name, cwd=tmp_path)
    assert proc.returncode == 2
    assert f"ncclx migrate: error: {name}: {why}" in proc.stderr
    assert "--ignore-unknown" in proc.stderr
    assert "Traceback" not in proc.stderr


from ncclx_migrate._migrate._files import kinds_checked  # noqa: E402

KINDS = kinds_checked()
NOTHING = (f"ncclx migrate: error: src: nothing to check (no file of the kinds it checks: {KINDS}; "
           "or --exclude/.gitignore left none)\n")


def test_the_kinds_listed_are_every_kind_checked(tmp_path: Path) -> None:
    """The list is made from the registry of kinds (_files.KINDS), so it names C++/CUDA, and
    every kind a file can be is in it (issue 37)."""
    from ncclx_migrate._migrate import _files

    samples = ["run.sh", "Dockerfile", "job.yaml", ".env", "nb.ipynb", "ext.cu", "ext.cpp"]
    assert {_files.file_kind(s) for s in samples} <= {k.name for k in _files._kinds.KINDS}
    assert KINDS.startswith("Python (.py, .pyw); C++ and CUDA extension sources (.cpp .cc .cxx .cu .cuh")
    assert "Makefiles" in KINDS and "Jenkinsfiles" in KINDS
    (tmp_path / "notes.md").write_text("x\n")
    proc = run_ncclx("migrate", "notes.md", cwd=tmp_path)
    assert f"notes.md: not a kind of file ncclx migrate checks ({KINDS}); pass --ignore-unknown" in proc.stderr


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_a_directory_whose_files_are_all_excluded_is_an_error(tmp_path: Path, fmt: str) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text(TOGGLE)
    proc = run_ncclx("migrate", "-q", "--format", fmt, "src", "--exclude", "*.py", cwd=tmp_path)
    # one line on stderr and no report of "0 files" on stdout
    assert (proc.returncode, proc.stdout, proc.stderr) == (2, "", NOTHING)


def test_an_empty_directory_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    proc = run_ncclx("migrate", "-q", "src", cwd=tmp_path)
    assert (proc.returncode, proc.stdout, proc.stderr) == (2, "", NOTHING)


@pytest.mark.parametrize("fmt", ["text", "sarif"])  # json: the next test
def test_a_missing_path_is_one_line_on_stderr_in_every_format(tmp_path: Path, fmt: str) -> None:
    proc = run_ncclx("migrate", "-q", "--format", fmt, "nope/", cwd=tmp_path)
    # no report of a "file" scanned, no summary: the error alone
    assert (proc.returncode, proc.stdout, proc.stderr) == (
        2, "", "ncclx migrate: error: nope/: no such file or directory\n")


def test_a_missing_path_beside_real_ones_is_not_counted_as_scanned(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(TOGGLE)
    proc = run_ncclx("migrate", "-q", "--format", "json", "nope.py", "train.py", cwd=tmp_path)
    assert proc.returncode == 2
    doc = json.loads(proc.stdout)
    assert (doc["files_scanned"], doc["errors"]) == (1, [])
    assert [f["code"] for f in doc["findings"]] == ["NCX101"]
    assert proc.stderr == "ncclx migrate: error: nope.py: no such file or directory\n"
    text = run_ncclx("migrate", "-q", "nope.py", "train.py", cwd=tmp_path)
    assert "nope" not in text.stdout and "in 1 file." in text.stdout


def test_the_other_paths_are_still_reported_and_ignore_unknown_skips(tmp_path: Path) -> None:
    (tmp_path / "notes.md").write_text("hi\n")
    (tmp_path / "train.py").write_text(TOGGLE)
    proc = run_ncclx("migrate", "notes.md", "train.py", cwd=tmp_path)
    assert proc.returncode == 2
    assert "train.py:2:1: NCX101" in proc.stdout
    assert "notes.md: not a kind of file" in proc.stderr
    skipped = run_ncclx("migrate", "--ignore-unknown", "notes.md", "train.py", cwd=tmp_path)
    assert skipped.returncode == 1  # the finding in train.py, nothing about notes.md
    assert "notes.md" not in skipped.stderr


def test_pre_commit_hooks_skip_unknown_files() -> None:
    hooks = (Path(__file__).parents[2] / ".pre-commit-hooks.yaml").read_text()
    entries = [line for line in hooks.splitlines() if line.strip().startswith("entry:")]
    assert entries and all("--ignore-unknown" in e for e in entries)


def test_unsafe_fixes_without_write_or_diff_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(TOGGLE)
    proc = run_ncclx("migrate", "--unsafe-fixes", "train.py", cwd=tmp_path)
    assert proc.returncode == 2
    assert "--unsafe-fixes applies fixes: add --diff to see them, or --write to apply them" in proc.stderr


@pytest.mark.parametrize("target", ["1.13", "2.17", "9.0"])
def test_target_torch_outside_the_known_range_names_it(tmp_path: Path, target: str) -> None:
    (tmp_path / "train.py").write_text(TOGGLE)
    proc = run_ncclx("migrate", "--target-torch", target, "train.py", cwd=tmp_path)
    assert proc.returncode == 2
    assert f"torch {target} is outside the releases this tool knows (2.0 to 2.16)" in proc.stderr
    assert run_ncclx("migrate", "--target-torch", "2.16", "train.py", cwd=tmp_path).returncode == 1


def test_an_ignore_comment_with_an_unknown_code_is_named(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(
        'import os\nos.environ["TORCH_DIST_USE_NCCL2"] = "0"  # ncclx: ignore[NCX999, NCX1]\n')
    (tmp_path / "run.sh").write_text("#!/bin/sh\nexport TORCH_DIST_USE_NCCL2=0  # ncclx: ignore[NCX2O1]\n")
    proc = run_ncclx("migrate", ".", cwd=tmp_path)
    assert "train.py:2: warning: unknown rule code NCX999" in proc.stderr
    assert "NCX1 " not in proc.stderr and "NCX1'" not in proc.stderr  # a prefix of real codes is fine
    assert "run.sh:2: warning: unknown rule code NCX2O1" in proc.stderr  # letter O, not zero
    assert "run.sh:2:" in proc.stdout  # it silenced nothing
    assert "train.py:2:" not in proc.stdout  # NCX1 did silence NCX101


def test_a_cpp_ignore_comment_with_an_unknown_code_is_named(tmp_path: Path) -> None:
    # C++ writes the comment after // or /*; a # there is the preprocessor's, never a comment.
    cast = "auto* pg = dynamic_cast<c10d::ProcessGroupNCCL*>(backend.get());"
    (tmp_path / "comm.cpp").write_text(
        "#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>\n"
        "void f(c10::intrusive_ptr<c10d::Backend> backend) {\n"
        f"  {cast}  // ncclx: ignore[NCX3O1]\n"
        f"  {cast}  /* ncclx: ignore[NCX301, NCX9] */\n"
        f"  {cast}  // ncclx: ignore[NCX3]\n}}\n")
    for args in (["."], ["--stdin-filename", "comm.cpp", "-"]):
        stdin = (tmp_path / "comm.cpp").read_text() if "-" in args else None
        proc = run_ncclx("migrate", *args, cwd=tmp_path, input=stdin)
        assert "comm.cpp:3: warning: unknown rule code NCX3O1 in '// ncclx: ignore[...]'" in proc.stderr
        assert "comm.cpp:4: warning: unknown rule code NCX9 " in proc.stderr
        assert "NCX301 " not in proc.stderr and "NCX3 " not in proc.stderr  # real codes and prefixes
        assert "comm.cpp:3:" in proc.stdout and "comm.cpp:4:" not in proc.stdout  # NCX3O1 silenced nothing


def test_shell_on_stdin_is_recognised_by_its_shebang() -> None:
    proc = run_ncclx("migrate", "-", input="#!/bin/bash\n" + SHELL)
    assert proc.returncode == 1
    assert "-:2:8: NCX201" in proc.stdout


def test_non_python_on_stdin_without_a_name_says_to_pass_stdin_filename() -> None:
    proc = run_ncclx("migrate", "-", input=SHELL)
    assert proc.returncode == 2
    assert "pass --stdin-filename NAME" in proc.stdout
    named = run_ncclx("migrate", "-", "--stdin-filename", "run.sh", input=SHELL)
    assert named.returncode == 1
