"""A large notebook (issue 37 §5): the cells that cannot matter to a Python rule are left
out of libcst's tree, and leaving them out changes no finding, label, position or fix."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from ncclx_migrate._migrate._files import _notebook, scan
from ncclx_migrate._migrate._model import Options
from tests.conftest import ncclx_exe, on_a_terminal


def _nb(sources: list[str]) -> str:
    cells = [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
              "source": s.splitlines(keepends=True)} for s in sources]
    return json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 4}, indent=1) + "\n"


def _islands(k: int, n: int) -> list[str]:
    return [f"a{k}_{i} = {i}\nprint(a{k}_{i} + len([a{k}_{i}]))\n" for i in range(n)]


# Names flow from cell to cell through cells that hold no word a rule looks for (`grp = pg`,
# `alias = grp`), an import is added above the first cell that is not an import, a builtin is
# rebound, and an environment variable is set that a shell line also sets.
SOURCES = [
    "x0 = 0\n",
    "import os\nimport torch.distributed as dist\nfrom torch.distributed import ProcessGroupNCCL\n",
    *_islands(1, 30),
    "pg = dist.new_group(ranks=[0, 1])\n",
    *_islands(2, 30),
    "grp = pg\n",
    "alias = grp\n",
    *_islands(3, 30),
    "if isinstance(alias, ProcessGroupNCCL):\n    alias._set_default_timeout(30)\n",
    "ok = dist.get_backend(alias) == 'nccl'\n",
    "def len(x):\n    return dist.get_world_size()\n",
    "os.environ['NCCL_ASYNC_ERROR_HANDLING'] = '1'\n",
    "%env TORCH_DIST_USE_NCCL2=0\n",
    *_islands(4, 30),
]


def _seen(text: str, options: Options) -> tuple[object, ...]:
    result = scan("nb.ipynb", text, options)
    assert result is not None and result.error is None
    return (result.new_text, [(f.code, f.line, f.column, f.fix, f.applied, f.message, f.detail, f.cell)
                              for f in result.findings])


@pytest.mark.parametrize("options", [
    Options(), Options(apply_safe=True), Options(apply_safe=True, apply_unsafe=True),
    Options(use_shim=True), Options(use_shim=True, apply_safe=True, apply_unsafe=True),
], ids=["report", "write", "unsafe", "shim", "shim-unsafe"])
def test_cells_left_out_change_nothing(options: Options, monkeypatch: pytest.MonkeyPatch) -> None:
    text = _nb(SOURCES)
    left_out = _seen(text, options)
    monkeypatch.setattr(_notebook._Linked, "needed", lambda self: set(range(len(self.parent))))
    every_cell = _seen(text, options)
    assert left_out == every_cell
    assert left_out[1], "the notebook has findings"


def _kept(sources: list[str]) -> set[str]:
    """The first line of each cell the codemod is given."""
    linked = _notebook._Linked()
    python = [s for s in sources if not s.startswith("%")]
    for source in python:
        found = _notebook._names_if_parses(source)
        assert found is not None
        linked.add(source, *found)
    return {python[k].split("\n")[0] for k in linked.needed()}


def test_only_cells_linked_to_a_rule_word_are_kept() -> None:
    plain = [s for s in SOURCES if not s.startswith("def len")]
    kept = _kept(plain)
    assert {"x0 = 0", "grp = pg", "alias = grp", "import os"} <= kept
    assert not any(k.startswith("a") and "_" in k for k in kept)  # no island: print() and len() link nothing
    assert {"a1_0 = 0", "a4_29 = 29"} <= _kept(SOURCES)  # once `len` is rebound, every cell calling it counts


def test_a_long_notebook_shows_its_own_progress_on_a_terminal_only(tmp_path: Path) -> None:
    # 6,000 cells: a scan of well over the quarter second before a file's own count shows
    (tmp_path / "big.ipynb").write_text(_nb(["import torch.distributed as dist\n", *_islands(0, 6000)]))
    run = on_a_terminal("migrate", "big.ipynb", terminal=("stderr",), cwd=tmp_path)
    assert run.returncode == 0, run.terminal
    assert re.search(r"\rncclx migrate: big\.ipynb: [\d,]+/6,001 code cells(?: read|: names linked)", run.terminal), run.terminal
    assert "the Python rules on 1 of 6,001 Python cells" in run.terminal
    assert run.terminal.endswith("\r"), "the line is cleared at the end"
    piped = subprocess.run([ncclx_exe(), "migrate", "big.ipynb"], capture_output=True, text=True, cwd=tmp_path)
    assert piped.returncode == 0 and "cells" not in piped.stderr
