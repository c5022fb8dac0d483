"""The oldest torch a project supports, from every file that states it (data-only cases).

``tests/fixtures/target/<case>/`` is a project; its ``expected`` file reads ``START TARGET
SOURCE``: run from folder START (relative to the case), the target is TARGET and comes from
SOURCE (``-``: none found, the default).  The lowest bound of any file and any extra wins.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ncclx_migrate._migrate._model import Options
from ncclx_migrate._migrate._runner import Mode, run
from ncclx_migrate._migrate._target import detect_target

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "target"
CASES = sorted(p.name for p in FIXTURES.iterdir() if (p / "expected").is_file())


@pytest.mark.parametrize("case", CASES)
def test_target_from_the_project(case: str, tmp_path: Path) -> None:
    root = tmp_path / case
    shutil.copytree(FIXTURES / case, root)
    start, target, source = (root / "expected").read_text(encoding="utf-8").split()
    (root / "expected").unlink()
    got, found = detect_target(str(root / start))
    assert f"{got[0]}.{got[1]}" == target
    assert (Path(found).relative_to(root).as_posix() if found else "-") == source


def test_a_variable_the_oldest_release_reads_is_kept(tmp_path: Path) -> None:
    """setup.py's extra pins torch 2.9.1: TORCH_NCCL_AVOID_RECORD_STREAMS (read until 2.14) is
    not deleted, though requirements.txt says torch>=2.15."""
    shutil.copytree(FIXTURES / "setup_py_extra", tmp_path, dirs_exist_ok=True)
    (tmp_path / "requirements.txt").write_text("torch>=2.15\n", encoding="utf-8")
    train = tmp_path / "train.py"
    train.write_text('import os\nos.environ["TORCH_NCCL_AVOID_RECORD_STREAMS"] = "1"\n', encoding="utf-8")
    target, _ = detect_target(str(tmp_path))
    report = run([str(train)], Options(target_torch=target, apply_safe=True, apply_unsafe=True), Mode(write=True))
    (finding,) = report.outcomes[0].result.findings
    assert target == (2, 9) and not finding.applied and "still read by torch 2.9" in finding.message
    assert "AVOID_RECORD_STREAMS" in train.read_text(encoding="utf-8")
