"""A label never depends on how many files the run was given (docs/migrate.md, "Scope").

Every multi-file fixture (tests/fixtures/python/<case>/) and the example project are run both
ways, in report mode: once over the whole tree, and once per file with that file alone (as the
pre-commit hook and an editor's ``--stdin-filename`` do).  Each finding must get the same fix
label both ways: the cross-file pre-pass reads the rest of the file's project either way.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from ncclx_migrate._migrate._runner import Mode, RunReport, run

from .test_fixtures_multi import CASES, _options, _tree

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "legacy-trainer"


def _labels(report: RunReport, root: Path) -> set[tuple[str, int, int, str, str]]:
    out = set()
    for o in report.outcomes:
        assert o.result.error is None, (o.result.path, o.result.error)
        rel = Path(o.result.path).resolve().relative_to(root.resolve()).as_posix()
        out |= {(rel, f.line, f.column, f.code, f.fix.value) for f in o.result.findings}
    return out


def _both_ways(root: Path, files: list[Path], options) -> None:  # type: ignore[no-untyped-def]
    whole = _labels(run([str(p) for p in files], options, Mode(), jobs=1, walked=[str(root)]), root)
    alone: set[tuple[str, int, int, str, str]] = set()
    for p in files:
        alone |= _labels(run([str(p)], options, Mode(), jobs=1), root)
    assert sorted(alone - whole) == sorted(whole - alone)  # (shown side by side when they differ)
    assert whole


@pytest.mark.parametrize("case", CASES)
def test_fixture_labels_do_not_depend_on_the_files_passed(case: str, tmp_path: Path) -> None:
    root = tmp_path / "w"
    files = _tree(case, root)
    (root / "pyproject.toml").write_text("", encoding="utf-8")  # the project root, as a real one has
    _both_ways(root, files, dataclasses.replace(_options(case, write=False)))


def test_example_project_labels_do_not_depend_on_the_files_passed(tmp_path: Path) -> None:
    root = tmp_path / "legacy-trainer"
    shutil.copytree(EXAMPLE, root)
    files = sorted(p for p in root.rglob("*") if p.is_file())
    _both_ways(root, files, _options(CASES[0], write=False).__class__())
