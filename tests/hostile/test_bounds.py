"""Bounded time and memory whatever the input (issue 18): a Python file past the parse
limit, a notebook of many cells, a large .env file."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, ncclx_exe

from .conftest import run_bounded, run_python_bounded

sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_limits import env_file, notebook, python_file  # the benchmark's inputs

# A fresh, small interpreter starts the command and reports its peak RSS: a child forked
# from this (large) pytest process would inherit pytest's peak as its own.
_PEAK = """
import resource, subprocess, sys
resource.setrlimit(resource.RLIMIT_CPU, (120, 120))  # a hang ends
proc = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
sys.stderr.write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024))
sys.stdout.buffer.write(proc.stdout)
"""


def _peak_rss(args: list[str], cwd: Path) -> tuple[int, str]:
    """(peak RSS in bytes, stdout) of ``ncclx ARGS``."""
    proc = run_python_bounded(_PEAK, ncclx_exe(), *args, cwd=cwd)
    return int(proc.stderr), proc.stdout


def test_a_python_file_past_the_parse_limit_is_refused_at_once(tmp_path: Path) -> None:
    # 1 MiB with a fix every 4.7 KB: parsing it takes ~1.3 GB and minutes.
    (tmp_path / "big.py").write_text(python_file(1 << 20))
    # The same size without anything a rule looks for needs no parse: it is checked.
    (tmp_path / "plain.py").write_text(python_file(1 << 20).replace('== "nccl"', "== 0"))
    proc = run_bounded("migrate", "--write", "--format", "json", ".", cwd=tmp_path, timeout=60)
    assert proc.returncode == 2, proc.stderr
    errors = {e["path"]: e["message"] for e in json.loads(proc.stdout)["errors"]}
    assert list(errors) == ["big.py"]
    assert errors["big.py"].startswith("not parsed: 1.0 MB of Python is over the parse limit of 0.75 MB")
    assert "raise it with --max-file-size MB" in errors["big.py"]


@pytest.mark.slow  # 12 s of CPU
def test_a_notebook_of_many_cells_is_mapped_in_linear_time(tmp_path: Path) -> None:
    # 1,500 cells, 15 with a fix: a diff of the whole notebook took minutes (quadratic).
    nb = tmp_path / "big.ipynb"
    nb.write_text(notebook(1500))
    proc = run_bounded("migrate", "--write", "--format", "json", "big.ipynb", cwd=tmp_path, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    findings = json.loads(proc.stdout)["findings"]
    assert len(findings) == 15 and all(f["applied"] for f in findings)
    assert [(f["cell"]["number"], f["cell"]["line"]) for f in findings] == [(n, 3) for n in range(1, 1501, 100)]
    cells = json.loads(nb.read_text())["cells"]
    assert "nccl2" in "".join(cells[0]["source"]) and "nccl2" not in "".join(cells[1]["source"])


def test_a_large_env_file_stays_within_ten_times_its_size(tmp_path: Path) -> None:
    (tmp_path / "tiny.env").write_text(env_file(1000))
    (tmp_path / "big.env").write_text(env_file(2 << 20))
    base, _ = _peak_rss(["migrate", "--format", "json", "tiny.env"], tmp_path)
    peak, out = _peak_rss(["migrate", "--format", "json", "big.env"], tmp_path)
    assert len(json.loads(out)["findings"]) > 700
    assert peak - base < 10 * (2 << 20), f"{(peak - base) / 2**20:.0f} MB over the baseline for a 2 MB file"


def test_a_notebook_of_many_small_cells_stays_within_a_small_multiple_of_its_size(tmp_path: Path) -> None:
    # 12,000 cells in 1.5 MB, 1 in 100 with a fix (issue 37 §5): 230x its size before, when every
    # cell went through libcst and every JSON value had a node.
    (tmp_path / "tiny.ipynb").write_text(notebook(2, compact=True))
    (tmp_path / "big.ipynb").write_text(notebook(12_000, compact=True))
    size = (tmp_path / "big.ipynb").stat().st_size
    base, _ = _peak_rss(["migrate", "--format", "json", "tiny.ipynb"], tmp_path)
    peak, out = _peak_rss(["migrate", "--format", "json", "big.ipynb"], tmp_path)
    assert len(json.loads(out)["findings"]) == 120
    assert peak - base < 40 * size, f"{(peak - base) / size:.0f}x the size of a {size / 2**20:.1f} MB notebook"
