"""The shipped demo repo stays a real project with findings in every file kind."""

from __future__ import annotations

from pathlib import Path

import pytest

from ncclx_migrate._migrate._files import scan
from ncclx_migrate._migrate._model import Options

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "legacy-trainer"

# File -> rule codes the non-Python scanners must report there.
EXPECTED = {
    "launch.sh": {"NCX201", "NCX202", "NCX203"},
    "launch.sbatch": {"NCX201", "NCX202", "NCX203"},
    "Dockerfile": {"NCX201", "NCX202", "NCX203"},
    ".env": {"NCX201", "NCX202", "NCX203"},
    "k8s/job.yaml": {"NCX201", "NCX202", "NCX203"},
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_example_file_findings(name: str) -> None:
    path = EXAMPLE / name
    result = scan(str(path), path.read_text(encoding="utf-8"), Options())
    assert result is not None and result.error is None
    assert {f.code for f in result.findings} == EXPECTED[name]


@pytest.mark.parametrize("name", ["train.py", "dist_utils.py"])
def test_example_python_compiles(name: str) -> None:
    source = (EXAMPLE / name).read_text(encoding="utf-8")
    compile(source, name, "exec")


def test_example_suppression_is_honoured() -> None:
    path = EXAMPLE / "launch.sh"
    result = scan(str(path), path.read_text(encoding="utf-8"), Options())
    assert result is not None
    lines = path.read_text(encoding="utf-8").splitlines()
    flagged = {lines[f.line - 1] for f in result.findings}
    assert not any("ncclx: ignore" in line for line in flagged)
