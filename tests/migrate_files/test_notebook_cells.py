"""A code cell whose every line a fix removed goes away; what is left is numbered as written."""

from __future__ import annotations

import json
from pathlib import Path

from ncclx_migrate._migrate._files import scan
from tests.migrate_files._cases import FIXTURES, UNSAFE

CASE = FIXTURES / "notebook" / "empty_cells.in.ipynb"


def test_removed_cells_go_and_findings_left_point_into_the_written_notebook(tmp_path: Path) -> None:
    text = CASE.read_text(encoding="utf-8")
    written = scan("nb.ipynb", text, UNSAFE)
    assert written is not None and written.new_text is not None
    before, after = json.loads(text)["cells"], json.loads(written.new_text)["cells"]
    assert len(after) == len(before) - 3 and all("".join(c["source"]).strip() for c in after)
    left = [(f.code, f.cell.number, f.line) for f in written.findings if not f.applied and f.cell]
    again = scan("nb.ipynb", written.new_text, UNSAFE.__class__())
    assert again is not None
    assert left and left == [(f.code, f.cell.number, f.line) for f in again.findings if f.cell]
