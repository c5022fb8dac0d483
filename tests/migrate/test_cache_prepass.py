"""The project's own facts are cached per file: a warm run over an unchanged tree parses no file
for the cross-file pre-pass (no helper summary, no C++ tree), and reports what the cold run did."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from ncclx_migrate._migrate import _xref
from ncclx_migrate._migrate._cache import Cache
from ncclx_migrate._migrate._discover import discover
from ncclx_migrate._migrate._files._cpp import _bindings
from ncclx_migrate._migrate._model import Options
from ncclx_migrate._migrate._runner import Mode, RunReport, run

ROOT = Path(__file__).resolve().parents[2]
CPP = ROOT / "tests" / "fixtures" / "cpp_multi"
HELPER = "import os\n\nimport torch\n\n\ndef get_local_device():\n    return torch.device(\"cuda\", int(os.environ[\"LOCAL_RANK\"]))\n"
TRAIN = ("import torch\nimport torch.distributed as dist\n\nfrom pkg.device import get_local_device\n\n\n"
         "def main():\n    torch.cuda.set_device(get_local_device())\n    dist.init_process_group(\"nccl\")\n")


def _tree(top: Path) -> Path:
    """A project with a Python helper module, the file that uses it, and two C++ cases (a
    function bound in another file; groups the project builds, read back through an override)."""
    (top / ".git").mkdir(parents=True)
    (top / "pkg").mkdir()
    (top / "pkg" / "__init__.py").write_text("")
    (top / "pkg" / "device.py").write_text(HELPER)
    (top / "train.py").write_text(TRAIN)
    for case in ("bound_elsewhere", "own_groups_overridden"):
        for src in sorted((CPP / case).rglob("*.in.*")):
            rel = src.relative_to(CPP / case)
            dst = top / case / rel.parent / rel.name.replace(".in.", ".")
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dst)
    time.sleep(2.1)  # a file changed within 2 s of a run is read again (the racy-file rule)
    return top


def _seen(report: RunReport) -> list[tuple[str, int, str, str]]:
    return sorted((f.path, f.line, f.code, f.message) for r in report.results for f in r.findings)


def test_a_warm_run_parses_no_unchanged_file_for_the_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    top = _tree(tmp_path / "proj")
    files = list(discover([str(top)]))
    options, mode = Options(), Mode()

    def scan(cache: Cache) -> RunReport:
        return run(files, options, mode, jobs=1, walked=[str(top)], cache=cache)

    cold = scan(Cache(str(tmp_path / "cache")))
    assert {"NCX130", "NCX305"} <= {f.code for r in cold.results for f in r.findings}  # both facts were used

    parsed: list[str] = []
    summarize, answers = _xref.summarize, _bindings._answers
    monkeypatch.setattr(_xref, "summarize", lambda text, path: parsed.append(path) or summarize(text, path))
    monkeypatch.setattr(_bindings, "_answers", lambda scan: parsed.append(scan.path) or answers(scan))
    warm = scan(Cache(str(tmp_path / "cache")))
    assert parsed == []
    assert _seen(warm) == _seen(cold)

    (top / "pkg" / "device.py").write_text(HELPER.replace("LOCAL_RANK", "RANK"))  # an edit: that file, again
    again = scan(Cache(str(tmp_path / "cache")))
    assert parsed == [str(top / "pkg" / "device.py")]
    assert _seen(again) != _seen(cold)
