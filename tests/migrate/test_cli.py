"""The real `ncclx migrate` CLI in subprocesses: every flag, format and exit status."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import ncclx_exe, on_a_terminal, other_python, run_ncclx

TOGGLE = 'import os\nos.environ["TORCH_DIST_USE_NCCL2"] = "0"\n'
# A safe fix (NCX120): the new name is added so that it takes the old one's value only
# where the job does not already set it (removing TORCH_DIST_USE_NCCL2=1 is not safe).
REDUNDANT = 'import os\nos.environ["TORCH_NCCL_TRACE_CPP_STACK"] = "1"\n'
FIXED = REDUNDANT + 'os.environ.setdefault("TORCH_FR_CPP_STACK", os.environ["TORCH_NCCL_TRACE_CPP_STACK"])\n'
CLEAN = "import torch\nprint(torch.__version__)\n"


def tree(tmp_path: Path, files: dict[str, str | bytes]) -> Path:
    for rel, content in files.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_bytes(content.encode())
    return tmp_path


def test_report_only_exit_1_and_text_format(tmp_path: Path) -> None:
    tree(tmp_path, {"a.py": TOGGLE, "b.py": CLEAN})
    proc = run_ncclx("migrate", ".", cwd=tmp_path)
    assert proc.returncode == 1
    assert "a.py:2:1: NCX101" in proc.stdout
    assert (tmp_path / "a.py").read_text() == TOGGLE  # report only: never writes


def test_clean_tree_exit_0(tmp_path: Path) -> None:
    tree(tmp_path, {"b.py": CLEAN})
    proc = run_ncclx("migrate", str(tmp_path))
    assert proc.returncode == 0, proc.stdout
    assert proc.stdout == "No findings in 1 file.\n"


def test_json_schema(tmp_path: Path) -> None:
    tree(tmp_path, {"a.py": TOGGLE, "bad.py": "import torch.distributed as dist\ndist.init_process_group(\"nccl-legacy\"\ndef (:\n"})
    proc = run_ncclx("migrate", "--format", "json", ".", cwd=tmp_path)
    assert proc.returncode == 2  # one file could not be parsed
    doc = json.loads(proc.stdout)  # stdout holds JSON and nothing else
    assert doc["schema"] == "ncclx.migrate/1" and doc["files_scanned"] == 2
    (f,) = doc["findings"]
    assert f == {"path": "a.py", "line": 2, "column": 1, "code": "NCX101", "message": f["message"],
                 "detail": f["detail"], "fix": "unsafe", "applied": False, "cell": None}
    # message: one short sentence; detail: the why, per-version facts
    assert len(f["message"]) <= 100 and "2.15 only" in f["detail"] and len(f["detail"]) > len(f["message"])
    assert doc["errors"][0]["path"] == "bad.py" and "cannot parse" in doc["errors"][0]["message"]


def test_sarif_and_github(tmp_path: Path) -> None:
    tree(tmp_path, {"a.py": TOGGLE})
    sarif = json.loads(run_ncclx("migrate", "--format", "sarif", ".", cwd=tmp_path).stdout)
    assert sarif["version"] == "2.1.0"
    run = sarif["runs"][0]
    assert {r["id"] for r in run["tool"]["driver"]["rules"]} >= {"NCX101", "NCX201"}
    # helpUri: the page `ncclx explain` prints, as the installed package holds it
    for rule in run["tool"]["driver"]["rules"]:
        assert rule["helpUri"].startswith("file:///"), rule
        page = Path(urllib.request.url2pathname(urllib.parse.urlparse(rule["helpUri"]).path))
        explained = run_ncclx("explain", rule["id"]).stdout if rule["id"] == "NCX101" else None
        assert page.read_text(encoding="utf-8").startswith(f"# {rule['id']} ")
        assert explained is None or explained == page.read_text(encoding="utf-8").rstrip("\n") + "\n"
    assert "informationUri" not in run["tool"]["driver"]  # no made-up home page
    res = run["results"][0]
    assert res["ruleId"] == "NCX101"
    assert res["locations"][0]["physicalLocation"]["artifactLocation"] == {"uri": "a.py", "uriBaseId": "%SRCROOT%"}
    absolute = json.loads(run_ncclx("migrate", "--format", "sarif", str(tmp_path / "a.py"), cwd=tmp_path).stdout)
    loc = absolute["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert loc == {"uri": "a.py", "uriBaseId": "%SRCROOT%"}
    (tmp_path / "elsewhere").mkdir()
    outside = json.loads(run_ncclx("migrate", "--format", "sarif", str(tmp_path / "a.py"), cwd=tmp_path / "elsewhere").stdout)
    uri = outside["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    assert uri.startswith("file:///") and uri.endswith("/a.py")
    assert res["locations"][0]["physicalLocation"]["region"] == {"startLine": 2, "startColumn": 1}
    gh = run_ncclx("migrate", "--format", "github", ".", cwd=tmp_path)
    assert gh.stdout.startswith("::warning title=NCX101,file=a.py,line=2,col=1::NCX101 ")


def test_write_safe_then_noop(tmp_path: Path) -> None:
    tree(tmp_path, {"a.py": REDUNDANT, "t.py": TOGGLE})
    os.chmod(tmp_path / "a.py", 0o750)
    proc = run_ncclx("migrate", "--write", ".", cwd=tmp_path)
    assert proc.returncode == 1  # the unsafe NCX101 is left
    assert (tmp_path / "a.py").read_text() == FIXED
    assert stat.S_IMODE((tmp_path / "a.py").stat().st_mode) == 0o750  # mode kept
    assert (tmp_path / "t.py").read_text() == TOGGLE
    again = run_ncclx("migrate", "--write", "--format", "json", ".", cwd=tmp_path)
    assert not any(f["applied"] for f in json.loads(again.stdout)["findings"])
    unsafe = run_ncclx("migrate", "--write", "--unsafe-fixes", ".", cwd=tmp_path)
    assert unsafe.returncode == 0, unsafe.stdout  # everything fixed: nothing left
    assert (tmp_path / "t.py").read_text().strip() == ""  # the set and the import it used are gone


def test_diff_writes_nothing(tmp_path: Path) -> None:
    tree(tmp_path, {"a.py": REDUNDANT})
    proc = run_ncclx("migrate", "--diff", ".", cwd=tmp_path)
    assert proc.returncode == 1
    assert proc.stdout.startswith("--- a/a.py\n+++ b/a.py\n")
    assert '+os.environ.setdefault("TORCH_FR_CPP_STACK", os.environ["TORCH_NCCL_TRACE_CPP_STACK"])' in proc.stdout
    assert (tmp_path / "a.py").read_text() == REDUNDANT
    # The summary on stderr says what --write would do, not that anything was fixed.
    assert "NCX120 [would fix]" in proc.stderr and "[fixed]" not in proc.stderr
    assert "would be fixed by --write" in proc.stderr
    assert run_ncclx("migrate", "--diff", "--write", ".", cwd=tmp_path).returncode == 2


def test_diff_with_json_keeps_stdout_a_diff_and_the_report_parseable(tmp_path: Path) -> None:
    # The diff alone on stdout (so it can be piped to `git apply`), the JSON report on stderr.
    tree(tmp_path, {"a.py": REDUNDANT})
    proc = run_ncclx("migrate", "--diff", "--format", "json", ".", cwd=tmp_path)
    assert proc.returncode == 1
    assert proc.stdout.startswith("--- a/a.py\n") and "schema" not in proc.stdout
    doc = json.loads(proc.stderr)
    assert [(f["code"], f["applied"]) for f in doc["findings"]] == [("NCX120", True)]


def test_diff_points_findings_left_into_the_text_it_leads_to(tmp_path: Path) -> None:
    # A finding the diff leaves points at its line in the file as --write would write it (the
    # `+` side of the diff): the fix adds a line above it, so it moves from line 3 to line 4.
    # A fixed finding keeps its line in the file as it is (the `-` side), and has no code frame.
    src = REDUNDANT + 'os.environ["TORCH_DIST_USE_NCCL2"] = "0"\n'
    tree(tmp_path, {"a.py": src})
    proc = run_ncclx("migrate", "--diff", "--show-source", ".", cwd=tmp_path)
    assert proc.returncode == 1
    assert "a.py:2:1: NCX120 [would fix]" in proc.stderr
    assert "a.py:4:1: NCX101" in proc.stderr, proc.stderr
    assert '4 | os.environ["TORCH_DIST_USE_NCCL2"] = "0"' in proc.stderr, proc.stderr
    assert "2 | os.environ" not in proc.stderr  # no frame under the fixed finding
    assert "+os.environ.setdefault(" in proc.stdout
    piped = run_ncclx("migrate", "--diff", "--target-torch", "2.15", "-", input=src, cwd=tmp_path)
    assert "-:4:1: NCX101" in piped.stderr, piped.stderr
    cell = {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
            "source": [*src.splitlines(keepends=True)]}
    (tmp_path / "n.ipynb").write_text(json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4,
                                                   "nbformat_minor": 5}, indent=1) + "\n")
    nb = run_ncclx("migrate", "--diff", "n.ipynb", cwd=tmp_path)
    assert "n.ipynb:cell 1:4:1: NCX101 " in nb.stderr, nb.stderr
    # JSON keeps the position in the .ipynb text (line 12 holds the cell's line 4) and adds the cell.
    nb_json = run_ncclx("migrate", "--diff", "--format", "json", "n.ipynb", cwd=tmp_path)
    left = [f for f in json.loads(nb_json.stderr)["findings"] if f["code"] == "NCX101"]
    assert [(f["line"], f["column"], f["cell"]) for f in left] == [(12, 6, {"number": 1, "line": 4, "column": 1})]
    # --write then reports the same positions, now in the file on disk.
    # (one file per run: a name two files of one run mention gets no safe add)
    written = run_ncclx("migrate", "--write", "a.py", cwd=tmp_path)
    assert "a.py:4:1: NCX101" in written.stdout, written.stdout
    written = run_ncclx("migrate", "--write", "n.ipynb", cwd=tmp_path)
    assert "n.ipynb:cell 1:4:1: NCX101 " in written.stdout, written.stdout


def test_crlf_bom_kept_and_untouched_files_byte_identical(tmp_path: Path) -> None:
    crlf = ("\ufeff" + REDUNDANT + "x = 1\n").replace("\n", "\r\n").encode()
    untouched = b"# -*- coding: utf-8 -*-\r\nimport torch  \r\n"
    tree(tmp_path, {"a.py": crlf, "b.py": untouched})
    before = (tmp_path / "b.py").stat().st_mtime_ns
    run_ncclx("migrate", "--write", ".", cwd=tmp_path)
    assert (tmp_path / "a.py").read_bytes() == ("\ufeff" + FIXED + "x = 1\n").replace("\n", "\r\n").encode()
    assert (tmp_path / "b.py").read_bytes() == untouched
    assert (tmp_path / "b.py").stat().st_mtime_ns == before


def test_bad_files_are_errors_others_still_processed(tmp_path: Path) -> None:
    tree(tmp_path, {"bin.py": b"\x00\x01\x02", "latin.py": "x = 'caf\xe9'\n".encode("latin-1"),
                    "broken.py": "TORCH_DIST_USE_NCCL2 = 1\nif x\n", "a.py": REDUNDANT})
    proc = run_ncclx("migrate", "--write", "--format", "json", ".", cwd=tmp_path)
    assert proc.returncode == 2
    doc = json.loads(proc.stdout)
    errs = {e["path"]: e["message"] for e in doc["errors"]}
    assert "NUL byte" in errs["bin.py"] and "not UTF-8" in errs["latin.py"] and "cannot parse" in errs["broken.py"]
    assert (tmp_path / "a.py").read_text() == FIXED  # still fixed
    assert (tmp_path / "latin.py").read_bytes() == "x = 'caf\xe9'\n".encode("latin-1")


def test_suppression_select_ignore(tmp_path: Path) -> None:
    tree(tmp_path, {"a.py": 'import os\nos.environ["TORCH_DIST_USE_NCCL2"] = "0"  # ncclx: ignore[NCX101]\n'
                            'os.environ["TORCH_NCCL_NAN_CHECK"] = "1"  # ncclx: ignore\n',
                    "b.py": TOGGLE + 'os.environ["TORCH_NCCL_ENABLE_MONITORING"] = "0"\n'})
    proc = run_ncclx("migrate", "--format", "json", ".", cwd=tmp_path)
    codes = [(f["path"], f["code"]) for f in json.loads(proc.stdout)["findings"]]
    assert codes == [("b.py", "NCX101"), ("b.py", "NCX122")]
    sel = json.loads(run_ncclx("migrate", "--format", "json", "--select", "NCX12", ".", cwd=tmp_path).stdout)
    assert [f["code"] for f in sel["findings"]] == ["NCX122"]
    ign = json.loads(run_ncclx("migrate", "--format", "json", "--ignore", "NCX1", ".", cwd=tmp_path).stdout)
    assert ign["findings"] == []
    bad = run_ncclx("migrate", "--select", "XYZ", ".", cwd=tmp_path)
    assert bad.returncode == 2 and "matches no rule code" in bad.stderr


@pytest.mark.slow
def test_target_torch_flag_and_detection(tmp_path: Path) -> None:
    tree(tmp_path, {"a.py": 'import os\nos.environ["TORCH_DIST_USE_NCCL2"] = "1"\n'})
    assert run_ncclx("migrate", "--target-torch", "2.14", ".", cwd=tmp_path).returncode == 0
    assert run_ncclx("migrate", ".", cwd=tmp_path).returncode == 1  # default 2.15: redundant
    (tmp_path / "requirements.txt").write_text("torch>=2.14,<2.16\n")
    proc = run_ncclx("migrate", ".", cwd=tmp_path)
    assert proc.returncode == 0 and "ncclx migrate: target torch 2.14 (from requirements.txt)\n" in proc.stderr
    (tmp_path / "sub").mkdir()  # relative to where ncclx runs when under it, else absolute
    above = run_ncclx("migrate", str(tmp_path / "a.py"), cwd=tmp_path / "sub")
    assert f"(from {tmp_path / 'requirements.txt'})" in above.stderr
    # ">2.14" still allows 2.14.1 (PEP 440), so 2.14 is the oldest torch the code must run on.
    (tmp_path / "requirements.txt").write_text("torch>2.14\n")
    assert "target torch 2.14 (from" in run_ncclx("migrate", ".", cwd=tmp_path).stderr
    (tmp_path / "requirements.txt").unlink()
    # Poetry's table form (torch = {version = "^2.14", source = "..."}) counts like the string form.
    (tmp_path / "pyproject.toml").write_text('[tool.poetry.dependencies]\ntorch = {version = "^2.14", source = "pt"}\n')
    assert "target torch 2.14 (from" in run_ncclx("migrate", ".", cwd=tmp_path).stderr
    (tmp_path / "pyproject.toml").write_text('[project]\nname="x"\ndependencies=["torch==2.15.*"]\n')
    assert run_ncclx("migrate", ".", cwd=tmp_path).returncode == 1
    bad = run_ncclx("migrate", "--target-torch", "two", ".", cwd=tmp_path)
    assert bad.returncode == 2 and "--target-torch" in bad.stderr


def test_stdin(tmp_path: Path) -> None:
    proc = run_ncclx("migrate", "-", input=REDUNDANT, cwd=tmp_path)
    assert proc.returncode == 1 and "-:2:1: NCX120" in proc.stdout
    fixed = run_ncclx("migrate", "--write", "-", input=REDUNDANT, cwd=tmp_path)
    assert fixed.stdout == FIXED and fixed.returncode == 0
    diff = run_ncclx("migrate", "--diff", "-", input=REDUNDANT, cwd=tmp_path)
    assert diff.stdout.startswith("--- a/-")
    assert run_ncclx("migrate", "-", "x.py").returncode == 2


def test_discovery_skips_venv_git_ignored_and_exclude(tmp_path: Path) -> None:
    tree(tmp_path, {
        "src/a.py": TOGGLE, "node_modules/x.py": TOGGLE, ".venv/lib/y.py": TOGGLE,
        "env2/pyvenv.cfg": "", "env2/z.py": TOGGLE, "gen/ignored.py": TOGGLE, "build/b.py": TOGGLE,
        "tests/t.py": TOGGLE, ".gitignore": "gen/\n", "dist/setup_copy.py": TOGGLE,
        # a package named like build output (mmengine/dist/) is code, not output
        "pkg/__init__.py": "", "pkg/dist/__init__.py": "", "pkg/dist/utils.py": TOGGLE,
    })
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    doc = json.loads(run_ncclx("migrate", "--format", "json", "--exclude", "tests", ".", cwd=tmp_path).stdout)
    assert sorted({f["path"] for f in doc["findings"]}) == ["pkg/dist/utils.py", "src/a.py"]


def test_symlinks_out_of_root_not_followed(tmp_path: Path) -> None:
    outside = tree(tmp_path / "outside", {"o.py": TOGGLE})
    root = tree(tmp_path / "root", {"a.py": CLEAN})
    (root / "link.py").symlink_to(outside / "o.py")
    (root / "linkdir").symlink_to(outside, target_is_directory=True)
    proc = run_ncclx("migrate", "--write", "--unsafe-fixes", ".", cwd=root)
    assert proc.returncode == 0, proc.stdout
    assert (outside / "o.py").read_text() == TOGGLE


def test_symlinked_file_inside_root_stays_a_link(tmp_path: Path) -> None:
    # A link to a file in the tree (a shared launch config, a symlinked .env): --write fixes
    # the target once and leaves the link a link; the file is reported once, at its real path.
    root = tree(tmp_path, {"real/a.py": REDUNDANT})
    (root / "link.py").symlink_to("real/a.py")
    proc = run_ncclx("migrate", "--write", "--format", "json", ".", cwd=root)
    assert proc.returncode == 0, proc.stdout
    assert [f["path"] for f in json.loads(proc.stdout)["findings"]] == ["real/a.py"]
    assert (root / "link.py").is_symlink()
    assert (root / "real/a.py").read_text() == FIXED
    (root / "real/a.py").write_text(REDUNDANT)
    run_ncclx("migrate", "--write", "link.py", cwd=root)  # named explicitly: written through the link
    assert (root / "link.py").is_symlink()
    assert (root / "real/a.py").read_text() == FIXED


def test_jobs_gives_same_result(tmp_path: Path) -> None:
    tree(tmp_path, {f"m{i}.py": (TOGGLE if i % 3 else CLEAN) for i in range(40)})
    one = json.loads(run_ncclx("migrate", "--format", "json", "-j", "1", ".", cwd=tmp_path).stdout)
    two = json.loads(run_ncclx("migrate", "--format", "json", "--jobs", "2", ".", cwd=tmp_path).stdout)
    assert one == two and len(one["findings"]) == 26
    assert run_ncclx("migrate", "--jobs", "0", ".", cwd=tmp_path).returncode == 2


def test_use_shim_rewrites_to_helpers(tmp_path: Path) -> None:
    tree(tmp_path, {"a.py": "from torch.distributed import ProcessGroupNCCL\nok = isinstance(b, ProcessGroupNCCL)\n"})
    run_ncclx("migrate", "--write", "--use-shim", ".", cwd=tmp_path)  # is_nccl_backend: a safe fix
    text = (tmp_path / "a.py").read_text()
    assert "from ncclx_migrate.backend import is_nccl_backend" in text and "ok = is_nccl_backend(b)" in text


def test_progress_not_on_pipe(tmp_path: Path) -> None:
    tree(tmp_path, {f"m{i}.py": CLEAN for i in range(60)})
    proc = run_ncclx("migrate", ".", cwd=tmp_path)
    assert "files\r" not in proc.stderr and "/60" not in proc.stderr


def test_runs_without_torch(tmp_path: Path) -> None:
    py = other_python("NCCLX_TEST_PY_NOTORCH")
    tree(tmp_path, {"a.py": REDUNDANT})
    proc = run_ncclx("migrate", "--write", ".", python=py, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "a.py").read_text() == FIXED


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_torch_own_sources_no_crash_no_error() -> None:
    torch = pytest.importorskip("torch")
    src = Path(torch.__file__).parent
    # --no-cache: scanned every time (a cache would also land in the project holding the venv)
    proc = run_ncclx("migrate", "--no-cache", "--format", "json", "--jobs", str(os.cpu_count() or 2), str(src),
                     timeout=540)
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    doc = json.loads(proc.stdout)
    assert doc["errors"] == []
    assert doc["files_scanned"] > 2000


def test_non_utf8_yaml_is_an_error_binary_blob_is_not(tmp_path: Path) -> None:
    tree(tmp_path, {"job.yaml": "env: caf\xe9\n".encode("latin-1"), "logo.png": b"\x89PNG\r\n\x00\x00", "a.py": CLEAN})
    doc = json.loads(run_ncclx("migrate", "--format", "json", ".", cwd=tmp_path).stdout)
    assert [e["path"] for e in doc["errors"]] == ["job.yaml"]


def test_stdin_filename_picks_the_scanner(tmp_path: Path) -> None:
    shell = "export TORCH_DIST_USE_NCCL2=0\n"
    proc = run_ncclx("migrate", "--stdin-filename", "launch.sh", "--format", "json", "-", input=shell, cwd=tmp_path)
    doc = json.loads(proc.stdout)
    assert proc.returncode == 1 and [(f["path"], f["code"]) for f in doc["findings"]] == [("launch.sh", "NCX201")]


def test_quiet_hides_detection_note(tmp_path: Path) -> None:
    tree(tmp_path, {"a.py": CLEAN, "requirements.txt": "torch>=2.14\n"})
    assert "target torch 2.14" in run_ncclx("migrate", ".", cwd=tmp_path).stderr
    assert run_ncclx("migrate", "-q", ".", cwd=tmp_path).stderr == ""


def test_progress_on_a_terminal(tmp_path: Path) -> None:
    tree(tmp_path, {f"m{i}.py": CLEAN for i in range(60)})
    run = on_a_terminal("migrate", "-j", "1", ".", terminal=("stderr",), cwd=tmp_path)
    assert run.returncode == 0
    assert "ncclx migrate: 50/60 files" in run.terminal  # progress went to the terminal
    assert "files\r" not in run.stdout


def test_tracked_file_matching_an_ignore_pattern_is_scanned(tmp_path: Path) -> None:
    tree(tmp_path, {"gen/keep.py": TOGGLE, "gen/new.py": TOGGLE, ".gitignore": "gen/\n"})
    git = ["git", "-C", str(tmp_path), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-f", "gen/keep.py"], check=True)
    doc = json.loads(run_ncclx("migrate", "--format", "json", ".", cwd=tmp_path).stdout)
    assert sorted({f["path"] for f in doc["findings"]}) == ["gen/keep.py"]


def test_stdin_keeps_bom_and_crlf(tmp_path: Path) -> None:
    from tests.conftest import ncclx_exe

    raw = ("\ufeff" + REDUNDANT + "x = 1\n").replace("\n", "\r\n").encode()
    proc = subprocess.run([ncclx_exe(), "migrate", "--write", "-"], input=raw, capture_output=True, cwd=tmp_path, timeout=60)
    assert proc.stdout == ("\ufeff" + FIXED + "x = 1\n").replace("\n", "\r\n").encode()


def test_toggle_set_after_the_first_group_says_it_has_no_effect(tmp_path: Path) -> None:
    tree(tmp_path, {"late.py": (
        "import os\nimport torch.distributed as dist\n\n"
        "dist.is_backend_available('nccl')\n"  # does not register "nccl": not too late yet
        "os.environ['TORCH_DIST_USE_NCCL2'] = '0'\n"
        "dist.init_process_group('nccl')\n"
        "os.environ['TORCH_DIST_USE_NCCL2'] = '0'\n"
    )})
    proc = run_ncclx("migrate", "late.py", cwd=tmp_path)
    assert proc.returncode == 1
    lines = [ln for ln in proc.stdout.splitlines() if "NCX101" in ln]
    assert len(lines) == 2
    assert lines[0].startswith("late.py:5:1: NCX101") and "comes after" not in lines[0]
    assert lines[1].startswith("late.py:7:1: NCX101")
    assert "set after init_process_group() (line 6) has no effect" in lines[1]
    detail = json.loads(run_ncclx("migrate", "--format", "json", "late.py", cwd=tmp_path).stdout)["findings"][1]["detail"]
    assert "comes after init_process_group() on line 6" in detail


@pytest.mark.parametrize("fmt", ["text", "json", "sarif", "github"])
def test_detection_note_on_stderr_in_every_format(tmp_path: Path, fmt: str) -> None:
    tree(tmp_path, {"a.py": TOGGLE, "requirements.txt": "torch>=2.14\n"})
    proc = run_ncclx("migrate", "--format", fmt, ".", cwd=tmp_path)
    assert proc.returncode == 1
    assert "ncclx migrate: target torch 2.14 (from " in proc.stderr and "requirements.txt)" in proc.stderr
    assert "ncclx migrate: target torch" not in proc.stdout
    if fmt in ("json", "sarif"):
        json.loads(proc.stdout)
    # --diff puts the report on stderr: a machine-readable one stays parseable there.
    diff = run_ncclx("migrate", "--diff", "--format", fmt, ".", cwd=tmp_path)
    if fmt in ("json", "sarif"):
        json.loads(diff.stderr)

DEVICE_PICKS = (
    "import os\n\nimport torch\nimport torch.distributed as dist\n\n\n"
    "def torchrun():\n"
    "    torch.cuda.set_device(int(os.environ['LOCAL_RANK']))\n"
    "    dist.init_process_group('nccl', init_method='env://', world_size=int(os.environ['WORLD_SIZE']))\n\n\n"
    "def slurm():\n"
    "    torch.cuda.set_device(int(os.environ['SLURM_LOCALID']))\n"
    "    dist.init_process_group('nccl')\n"
)


def test_ncx134_selects_only_the_breaking_device_picks(tmp_path: Path) -> None:
    tree(tmp_path, {"train.py": DEVICE_PICKS})
    every = json.loads(run_ncclx("migrate", "--format", "json", ".", cwd=tmp_path).stdout)["findings"]
    assert [(f["line"], f["code"]) for f in every] == [(9, "NCX130"), (14, "NCX134")]
    assert "hardening" in every[0]["message"] and "SLURM_LOCALID" in every[1]["message"]
    breaking = json.loads(run_ncclx("migrate", "--format", "json", "--select", "NCX134", ".", cwd=tmp_path).stdout)
    assert [(f["line"], f["code"]) for f in breaking["findings"]] == [(14, "NCX134")]
    explain = run_ncclx("explain", "NCX134")
    assert explain.returncode == 0 and "What it follows and what it cannot see" in explain.stdout


def test_added_argument_respects_the_projects_line_length(tmp_path: Path) -> None:
    # 96 columns once device_id is added: within black's line-length = 100, past the default 88
    tree(tmp_path, {"train.py": DEVICE_PICKS.replace(", init_method='env://', world_size=int(os.environ['WORLD_SIZE'])", ""),
                    "pyproject.toml": "[tool.black]\nline-length = 100\n"})
    assert run_ncclx("migrate", "--write", "--unsafe-fixes", ".", cwd=tmp_path).returncode == 0
    text = (tmp_path / "train.py").read_text()
    assert "    dist.init_process_group('nccl', device_id=torch.device(\"cuda\", torch.cuda.current_device()))\n" in text
    (tmp_path / "pyproject.toml").write_text("[tool.ruff]\nline-length = 79\n")
    (tmp_path / "train.py").write_text(DEVICE_PICKS)
    assert run_ncclx("migrate", "--write", "--unsafe-fixes", ".", cwd=tmp_path).returncode == 0
    lines = (tmp_path / "train.py").read_text().splitlines()
    assert max(len(ln) for ln in lines) <= 79, lines
    assert "        device_id=torch.device(\"cuda\", torch.cuda.current_device())," in lines


def test_a_name_two_files_mention_gets_no_safe_add(tmp_path: Path) -> None:
    # A launcher that sources or imports one file and sets the old name again later: the
    # new name added in the first file would hide that set. Alone, each file gets the same label:
    # the run reads the rest of its project (the scope rule).
    tree(tmp_path, {"a.py": 'import os\nos.environ["NCCL_ASYNC_ERROR_HANDLING"] = "1"\n',
                    "run.sh": "#!/bin/bash\nexport NCCL_ASYNC_ERROR_HANDLING=0\ntorchrun a.py\n",
                    "requirements.txt": "torch>=2.15\n"})
    both = json.loads(run_ncclx("migrate", "--format", "json", ".", cwd=tmp_path).stdout)["findings"]
    assert [(f["path"], f["fix"]) for f in both] == [("a.py", "unsafe"), ("run.sh", "unsafe")]
    assert "Another file of this project also sets NCCL_ASYNC_ERROR_HANDLING" in both[0]["detail"]
    for name in ("a.py", "run.sh"):
        alone = json.loads(run_ncclx("migrate", "--format", "json", name, cwd=tmp_path).stdout)["findings"]
        assert [(f["path"], f["fix"]) for f in alone] == [(name, "unsafe")]
    text = (tmp_path / "a.py").read_text()
    piped = run_ncclx("migrate", "--format", "json", "--stdin-filename", "a.py", "-", cwd=tmp_path, input=text)
    assert [f["fix"] for f in json.loads(piped.stdout)["findings"]] == ["unsafe"]  # an editor's buffer too
    written = run_ncclx("migrate", "--write", ".", cwd=tmp_path)
    assert written.returncode == 1 and "0 fixed" in written.stdout, written.stdout


SHIM_CASE = """import torch.distributed as dist
from torch.distributed import ProcessGroupNCCL


def f(pg):
    if dist.get_backend(pg) == "nccl":
        pass
    return isinstance(pg, ProcessGroupNCCL)
"""


def test_use_shim_changes_what_its_help_says_and_nothing_else(tmp_path: Path) -> None:
    (tmp_path / "t.py").write_text(SHIM_CASE)
    plain, shim = (run_ncclx("migrate", "-q", "--diff", "--unsafe-fixes", *flag, "t.py", cwd=tmp_path).stdout
                   for flag in ((), ("--use-shim",)))
    changed = {line for line in plain.splitlines() if line.startswith("+")} ^ {
        line for line in shim.splitlines() if line.startswith("+")}
    assert changed >= {"+    return is_nccl_backend(pg)", "+from ncclx_migrate.backend import is_nccl_backend"}
    # the backend-name test gets the same fix either way
    assert '+    if dist.get_backend(pg) in ("nccl", "nccl2", "nccl-legacy", "nccl-lazy"):' in plain.splitlines()
    assert '+    if dist.get_backend(pg) in ("nccl", "nccl2", "nccl-legacy", "nccl-lazy"):' in shim.splitlines()
    helptext = " ".join(run_ncclx("migrate", "--help", env={"COLUMNS": "200"}).stdout.split())
    assert ("isinstance(x, ProcessGroupNCCL) -> is_nccl_backend(x)" in helptext
            and 'Every other fix (get_backend() == "nccl" too) is the same with or without it.' in helptext)


def test_env_var_advice_follows_the_target_torch(tmp_path: Path) -> None:
    (tmp_path / "e.py").write_text('import os\nos.environ["TORCH_NCCL_TRACE_BUFFER_SIZE"] = "2000"\n'
                                   'os.environ["TORCH_NCCL_ENABLE_MONITORING"] = "0"\n')
    details = {}
    for target in ("2.15", "2.16"):
        doc = json.loads(run_ncclx("migrate", "-q", "--format", "json", "--target-torch", target, "e.py",
                                   cwd=tmp_path).stdout)
        details[target] = {f["code"]: f["detail"] for f in doc["findings"]}
    for code in ("NCX120", "NCX122"):
        assert "has no legacy backend" not in details["2.15"][code]
        assert "Torch 2.16, the oldest release this project supports, has no legacy backend" in details["2.16"][code]
    assert not any("keep it while legacy can run" in d for t in details.values() for d in t.values())


def _stdin_recipe() -> str:
    """docs/migrate.md's stdin recipe, the command as the page writes it."""
    doc = (Path(__file__).parents[2] / "docs" / "migrate.md").read_text()
    [line] = [ln for ln in doc.splitlines() if ln.startswith("$ cat train.py | ncclx migrate")]
    return line[2:].split("   #", 1)[0].strip()


@pytest.mark.parametrize("other_sets_it", [True, False])
def test_bare_stdin_is_labelled_as_the_file_run(tmp_path: Path, other_sets_it: bool) -> None:
    """migrate.md's `cat train.py | ncclx migrate --write - > train_fixed.py`, run as written in
    a project: where another file also sets the old name the add is not safe, as in
    `ncclx migrate train.py`, so nothing is fixed; where none does, it is (issue 37)."""
    files = {"pyproject.toml": "", "train.py": REDUNDANT}
    if other_sets_it:
        files["launch.py"] = REDUNDANT + "print('launch')\n"
    tree(tmp_path, files)

    as_file = run_ncclx("migrate", "train.py", cwd=tmp_path)  # (before train_fixed.py, which sets it too)
    path = f"{Path(ncclx_exe()).parent}{os.pathsep}{os.environ['PATH']}"
    piped = subprocess.run(["bash", "-c", _stdin_recipe()], cwd=tmp_path, capture_output=True, text=True,
                           env={**os.environ, "PATH": path, "NO_COLOR": "1"}, timeout=120)
    label = "[*] " if not other_sets_it else ""
    assert f"train.py:2:1: NCX120 {label}TORCH_NCCL_TRACE_CPP_STACK" in as_file.stdout, as_file.stdout
    piped_label = "[fixed] " if not other_sets_it else ""
    assert f"-:2:1: NCX120 {piped_label}TORCH_NCCL_TRACE_CPP_STACK" in piped.stderr, piped.stderr
    assert (tmp_path / "train_fixed.py").read_text() == (REDUNDANT if other_sets_it else FIXED)


# The issue's module: an isinstance that only a fix after an unsafe one (NCX111's set_timeout)
# can rewrite, so a --write without --unsafe-fixes must label it as the report does.
_SHIM_MODULE = """\
import torch
import torch.distributed as dist
from torch.distributed import ProcessGroupNCCL


def is_nccl(pg):
    backend = pg._get_backend(torch.device("cuda"))
    if isinstance(backend, ProcessGroupNCCL):
        return True
    return False


def set_timeout(pg, timeout):
    backend = pg._get_backend(torch.device("cuda"))
    backend._set_default_timeout(timeout)


def main():
    dist.init_process_group("nccl")
    return is_nccl(dist.group.WORLD)
"""


def test_use_shim_labels_are_the_same_in_report_diff_and_write(tmp_path: Path) -> None:
    tree(tmp_path, {"m.py": _SHIM_MODULE})
    report = run_ncclx("migrate", "--use-shim", ".", cwd=tmp_path)
    diff = run_ncclx("migrate", "--use-shim", "--diff", ".", cwd=tmp_path)
    write = run_ncclx("migrate", "--use-shim", "--write", ".", cwd=tmp_path)
    findings = [ln for ln in report.stdout.splitlines() if ln.startswith("m.py:")]
    assert findings == [
        "m.py:8:8: NCX110 isinstance against ProcessGroupNCCL is False under nccl2: use is_nccl_backend()",
        "m.py:15:5: NCX111 _set_default_timeout does not exist under nccl2: use dist.set_timeout(timeout, group)"]
    assert "2 hidden fixes can be enabled with --write --unsafe-fixes" in report.stdout
    for out in (diff.stderr, write.stdout):
        assert [ln for ln in out.splitlines() if ln.startswith("m.py:")] == findings, out
        assert "2 more with --unsafe-fixes." in out, out
    assert (tmp_path / "m.py").read_text() == _SHIM_MODULE


def test_set_default_timeout_on_a_backend_of_unknown_group_says_why_not(tmp_path: Path) -> None:
    """The demo's shape (a backend a helper returned) and a parameter: no fix, and the detail
    says why (set_timeout needs the group); --use-shim --help says which shape is rewritten."""
    tree(tmp_path, {"m.py": "def f(pg):\n    pg._set_default_timeout(30)\n"})
    proc = run_ncclx("migrate", "--use-shim", "--format", "json", "m.py", cwd=tmp_path)
    [f] = json.loads(proc.stdout)["findings"]
    assert (f["code"], f["fix"]) == ("NCX111", "none")
    assert "Not rewritten: set_timeout(timeout, group) needs the process group" in f["detail"]
    helptext = " ".join(run_ncclx("migrate", "--help").stdout.split())
    assert "pg._get_backend(...)._set_default_timeout(t) -> set_timeout(t, group=pg)" in helptext
