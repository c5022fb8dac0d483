"""One project-root definition in a monorepo (docs/migrate.md, "Projects in a monorepo"): the
nearest folder up from the first path that holds .git or a project file is where the cache goes
and where the target torch is read; the JSON report's ``project`` is the git repository."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import run_ncclx

ROOT = Path(__file__).resolve().parents[2]
TRAIN = ROOT / "examples" / "legacy-trainer" / "train.py"


def _monorepo(top: Path) -> Path:
    """mono/ (.git, pyproject torch>=2.13) holding a package with its own pyproject.toml
    (torch>=2.14), one with only setup.py (torch>=2.14), a vendored checkout with only .git,
    and a folder with no project file of its own."""
    mono = top / "mono"
    (mono / ".git").mkdir(parents=True)
    (mono / "pyproject.toml").write_text('[project]\nname = "mono"\ndependencies = ["torch>=2.13"]\n')
    for name in ("pkg_a", "pkg_b", "vendored", "tools"):
        (mono / name).mkdir()
        shutil.copyfile(TRAIN, mono / name / "train.py")
    (mono / "pkg_a" / "pyproject.toml").write_text('[project]\nname = "a"\ndependencies = ["torch>=2.14"]\n')
    (mono / "pkg_b" / "setup.py").write_text(
        'from setuptools import setup\n\nsetup(name="b", install_requires=["torch>=2.14"])\n')
    (mono / "vendored" / ".git").write_text("gitdir: ../.git/modules/vendored\n")  # a submodule's .git file
    return mono


@pytest.mark.slow
def test_each_package_of_a_monorepo_is_its_own_project(tmp_path: Path) -> None:
    mono = _monorepo(tmp_path)
    caches = lambda: sorted(str(p.parent.relative_to(mono)) for p in mono.rglob(".ncclx_cache"))  # noqa: E731

    a = run_ncclx("migrate", "--format", "json", "pkg_a/train.py", cwd=mono)
    assert "target torch 2.14 (from pkg_a/pyproject.toml)" in a.stderr  # the package's, not the repository's
    assert caches() == ["pkg_a"]
    doc = json.loads(a.stdout)
    assert doc["project"]["directory"] == str(mono.resolve())  # the report is of the repository
    assert doc["project"]["target_torch"] == "2.14"

    b = run_ncclx("migrate", "pkg_b/train.py", cwd=mono)
    assert "target torch 2.14 (from pkg_b/setup.py)" in b.stderr  # setup.py alone makes a project
    assert caches() == ["pkg_a", "pkg_b"]

    tools = run_ncclx("migrate", "tools/train.py", cwd=mono)
    assert "target torch 2.13 (from pyproject.toml)" in tools.stderr  # no project file: the one above
    assert caches() == [".", "pkg_a", "pkg_b"]

    vendored = run_ncclx("migrate", "vendored/train.py", cwd=mono)
    assert "target torch" not in vendored.stderr  # its own root states no torch: the default, not mono's 2.13
    assert caches() == [".", "pkg_a", "pkg_b", "vendored"]
