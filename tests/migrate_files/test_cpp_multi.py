"""Data-only C++ cases of several files in tests/fixtures/cpp_multi/<case>/: one run over all.

As tests/migrate/test_fixtures_multi.py for Python: a case is a small tree of ``*.in.<ext>``
files, run as one ``ncclx migrate --unsafe-fixes`` run (write mode) over that tree with each
file named without ``.in`` (so that quoted includes resolve); ``findings`` lists what the run
reports (``path line:col CODE fix [applied]``) and ``messages`` (optional) the same with each
message's detail; ``X.out.<ext>`` next to ``X.in.<ext>`` is the file as written (absent:
unchanged).  A run over each file alone must find no more than the run over the tree.
``NCCLX_UPDATE_FIXTURES=1`` rewrites the expected files (review the diff!).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from ncclx_migrate._migrate._model import Options
from ncclx_migrate._migrate._runner import Mode, RunReport, run
from tests.conftest import run_ncclx

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "cpp_multi"
CASES = sorted(p.name for p in FIXTURES.iterdir() if p.is_dir())
UPDATE = os.environ.get("NCCLX_UPDATE_FIXTURES") == "1"
OPTIONS = Options(apply_safe=True, apply_unsafe=True)


def _tree(case: str, into: Path) -> dict[Path, Path]:
    """Copy the case's inputs into ``into`` under their real names: written path -> input."""
    out = {}
    for src in sorted((FIXTURES / case).rglob("*.in.*")):
        rel = src.relative_to(FIXTURES / case)
        dst = into / rel.parent / rel.name.replace(".in.", ".")
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)
        out[dst] = src
    return out


def _render(report: RunReport, root: Path, detail: bool = False) -> str:
    lines = []
    for o in sorted(report.outcomes, key=lambda o: o.result.path):
        assert o.result.error is None, (o.result.path, o.result.error)
        rel = Path(o.result.path).relative_to(root).as_posix()
        for f in o.result.findings:
            tail = f"{f.message} | {f.detail.replace(str(root) + os.sep, '')}" if detail \
                else f"{f.fix.value}{' applied' if f.applied else ''}"
            lines.append(f"{rel} {f.line}:{f.column} {f.code} {tail}\n")
    return "".join(lines)


def _expect(path: Path, got: str) -> str:
    if UPDATE:
        path.write_text(got, encoding="utf-8")
    return path.read_text(encoding="utf-8") if path.exists() else ""


@pytest.mark.parametrize("case", CASES)
def test_cpp_multi_fixture(case: str, tmp_path: Path) -> None:
    root = tmp_path / "w"
    files = _tree(case, root)
    report = run([str(p) for p in files], OPTIONS, Mode(write=True), jobs=1)
    assert _render(report, root) == _expect(FIXTURES / case / "findings", _render(report, root))
    assert _render(report, root, True) == _expect(FIXTURES / case / "messages", _render(report, root, True))
    for dst, src in files.items():
        out = src.with_name(src.name.replace(".in.", ".out."))
        written = dst.read_text(encoding="utf-8")
        if UPDATE:
            if written != src.read_text(encoding="utf-8"):
                out.write_text(written, encoding="utf-8")
            else:
                out.unlink(missing_ok=True)
        assert written == (out if out.exists() else src).read_text(encoding="utf-8")
    # A second run changes nothing; each file alone finds no more than the tree did.
    again = run([str(p) for p in files], OPTIONS, Mode(write=True), jobs=1)
    assert not any(f.applied for o in again.outcomes for f in o.result.findings)
    together = {(o.result.path, f.line, f.code) for o in report.outcomes for f in o.result.findings}
    for p in files:
        alone = run([str(p)], Options(), Mode(), jobs=1)
        assert {(o.result.path, f.line, f.code) for o in alone.outcomes for f in o.result.findings} <= together


def test_a_run_over_one_file_reads_the_binding_in_another_file_of_its_project(tmp_path: Path) -> None:
    """A pre-commit hook passes only the changed file: the binding file of its project is read
    (not scanned), and the legacy parameters of the functions it binds are still NCX305, each
    with the place of its binding; the file passed is the only one that declares them."""
    case = FIXTURES / "bound_elsewhere" / "src"
    (tmp_path / "src").mkdir()
    (tmp_path / "pyproject.toml").write_text("", encoding="utf-8")  # the project root
    for name in ("comm", "bind"):
        shutil.copyfile(case / f"{name}.in.cpp", tmp_path / "src" / f"{name}.cpp")
    proc = run_ncclx("migrate", "--no-cache", "--target-torch", "2.15", "--format", "json", "src/comm.cpp",
                     cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    found = [(f["path"], f["line"], f["detail"].split(". ")[0]) for f in json.loads(proc.stdout)["findings"]
             if f["code"] == "NCX305"]
    bind = tmp_path.resolve() / "src" / "bind.cpp"  # (a file read as context is named by its full path)
    assert found == [("src/comm.cpp", 7, f"Bound to Python at {bind}:7"),
                     ("src/comm.cpp", 15, f"Bound to Python at {bind}:9")]
