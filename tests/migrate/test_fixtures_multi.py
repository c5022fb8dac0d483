"""Data-only cases of several files in tests/fixtures/python/<case>/: one run over all of them.

A case is a folder holding a small tree of ``*.in.py`` files (``pkg/__init__.in.py``,
``pkg/utils.in.py``, ``train.in.py``), run as one ``ncclx migrate`` run over that tree with
each file named without ``.in`` (so that imports resolve as in the real project), in write
mode.  ``findings`` lists what the run reports, one line per finding in path order
(``path line:col CODE fix [applied]``, paths without ``.in``); ``messages`` (optional) the same
with each message; ``X.out.py`` next to ``X.in.py`` is the file as written (absent: unchanged).
The options line of ``test_fixtures.py`` (``# fixture: --unsafe-fixes ...``) may head a file
named ``fixture``.  Checked as for single files: the findings, the written files, a second run
that changes nothing, a report-only run that finds the same unapplied (code and fix kind per file); and the first case again
with ``--jobs 2`` (enough files for the worker pool), which must report the same.
``NCCLX_UPDATE_FIXTURES=1`` rewrites the expected files (review the diff!).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from pathlib import Path

import pytest

from ncclx_migrate._migrate._runner import Mode, RunReport, run
from tests.migrate.test_fixtures import options_for

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "python"
CASES = sorted(p.name for p in FIXTURES.iterdir() if p.is_dir() and any(p.rglob("*.in.py")))
UPDATE = os.environ.get("NCCLX_UPDATE_FIXTURES") == "1"


def _tree(case: str, into: Path) -> list[Path]:
    """Copy the case's inputs into ``into`` under their real names; the paths, sorted."""
    out = []
    for src in sorted((FIXTURES / case).rglob("*.in.py")):
        rel = src.relative_to(FIXTURES / case)
        dst = into / rel.parent / rel.name.replace(".in.py", ".py")
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)
        out.append(dst)
    return out


def _render(report: RunReport, root: Path, messages: bool = False) -> str:
    lines = []
    for o in sorted(report.outcomes, key=lambda o: o.result.path):
        assert o.result.error is None, (o.result.path, o.result.error)
        rel = Path(o.result.path).relative_to(root).as_posix()
        for f in o.result.findings:
            tail = f.message if messages else f"{f.fix.value}{' applied' if f.applied else ''}"
            lines.append(f"{rel} {f.line}:{f.column} {f.code} {tail}\n")
    return "".join(lines)


def _options(case: str, write: bool = True):  # type: ignore[no-untyped-def]
    head = FIXTURES / case / "fixture"
    return options_for(head.read_text(encoding="utf-8") if head.exists() else "", write)


@pytest.mark.parametrize("case", CASES)
def test_multi_fixture(case: str, tmp_path: Path) -> None:
    root = tmp_path / "w"
    files = _tree(case, root)
    before = {p: p.read_text(encoding="utf-8") for p in files}
    options = _options(case)
    report = run([str(p) for p in files], options, Mode(write=True), jobs=1)
    expected = FIXTURES / case / "findings"
    if UPDATE:
        expected.write_text(_render(report, root), encoding="utf-8")
    assert _render(report, root) == (expected.read_text(encoding="utf-8") if expected.exists() else "")
    too_long = [f.message for o in report.outcomes for f in o.result.findings if len(f.message) > 88]
    assert not too_long, too_long  # as for single files (test_text_output): the why is in the detail
    messages = FIXTURES / case / "messages"
    if messages.exists():
        if UPDATE:
            messages.write_text(_render(report, root, messages=True), encoding="utf-8")
        assert _render(report, root, messages=True) == messages.read_text(encoding="utf-8")
    for p in files:
        rel = p.relative_to(root)
        out = FIXTURES / case / rel.parent / rel.name.replace(".py", ".out.py")
        now = p.read_text(encoding="utf-8")
        if UPDATE:
            if now != before[p]:
                out.write_text(now, encoding="utf-8")
            elif out.exists():
                out.unlink()
        assert now == (out.read_text(encoding="utf-8") if out.exists() else before[p]), rel
    again = run([str(p) for p in files], options, Mode(write=True), jobs=1)
    assert not any(f.applied for o in again.outcomes for f in o.result.findings), "a second run changes files"
    fresh = tmp_path / "r"
    report_only = run([str(p) for p in _tree(case, fresh)], _options(case, write=False), Mode(), jobs=1)
    # the same findings, none applied (positions of findings left after a fix move: compare the rest)
    def what(text: str) -> list[tuple[str, ...]]:
        return sorted((w[0], *w[2:4]) for w in (line.split() for line in text.replace(" applied", "").splitlines()))

    assert what(_render(report_only, fresh)) == what(_render(report, root))
    assert " applied" not in _render(report_only, fresh)


def test_workers_get_the_index(tmp_path: Path) -> None:
    """With --jobs the helpers of other modules reach the worker processes (via Options)."""
    case = CASES[0]
    solo, pooled = tmp_path / "solo", tmp_path / "pool"
    results = []
    for root, jobs in ((solo, 1), (pooled, 2)):
        files = _tree(case, root)
        for k in range(16):  # the pool starts at 16 files
            (root / f"pad{k}.py").write_text("x = 1\n", encoding="utf-8")
        paths = [*map(str, files), *(str(root / f"pad{k}.py") for k in range(16))]
        options = dataclasses.replace(_options(case, write=False))
        results.append(_render(run(paths, options, Mode(), jobs=jobs), root))
    assert results[0] == results[1] and results[0]
