"""What every data-only case promises beyond its own expectations:

- the report's fix label is what ``--write`` applies: a finding labelled ``[*]`` is applied by
  ``--write``, one labelled ``[*]`` or unsafe (a hidden fix) by ``--write --unsafe-fixes``, nothing
  else is; an applied finding keeps its position in the file as given (in every mode); ``--write``
  gives each finding the report's message and label; and so with and without --use-shim;
- a fix never adds a pyflakes error: ruff's ``F`` rules, run once over every Python case's
  input and output (and the code cells of every notebook case), find no code in an output
  that its input did not have.
"""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from ncclx_migrate._migrate._files import scan
from ncclx_migrate._migrate._model import FileResult, FixKind, Options
from ncclx_migrate._migrate._python import transform_source

from ..migrate_files._cases import cases as file_cases
from ..migrate_files._cases import read
from .test_fixtures import CASES, FIXTURES, options_for

pytestmark = pytest.mark.usefixtures("reparse_check")  # tests/conftest.py

_Key = tuple[int, int, str]


def _keys(result: FileResult, which: set[FixKind] | None = None, applied: bool = False) -> set[_Key]:
    return {(f.line, f.column, f.code) for f in result.findings
            if (which is None or f.fix in which) and (not applied or f.applied)}


def _check_labels(run, given: Options) -> None:  # type: ignore[no-untyped-def]
    report = run(dataclasses.replace(given, apply_safe=False, apply_unsafe=False))
    safe = run(dataclasses.replace(given, apply_safe=True, apply_unsafe=False))
    unsafe = run(dataclasses.replace(given, apply_safe=True, apply_unsafe=True))
    labelled_safe = _keys(report, {FixKind.SAFE})
    labelled_any = _keys(report, {FixKind.SAFE, FixKind.UNSAFE})
    assert _keys(safe, applied=True) == labelled_safe, "--write applies what the report labels [*]"
    assert _keys(unsafe, applied=True) == labelled_any, \
        "--write --unsafe-fixes applies what the report labels [*] or unsafe"
    # One label in every mode: --write and --diff say what the report says of each finding,
    # the same message and fix kind, so the same "N more with --unsafe-fixes" (issue 37).
    assert _labels(safe) == _labels(report), "--write labels each finding as the report does"


_CITED = re.compile(r"\bline \d+")  # a cited line is in the numbering of the finding's position


def _labels(result: FileResult) -> Counter[tuple[str, str, FixKind]]:
    return Counter((f.code, _CITED.sub("line N", f.message), f.fix) for f in result.findings)


def _variants(run, given: Options) -> list[Options]:  # type: ignore[no-untyped-def]
    """``given``, and --use-shim set otherwise where that changes what the report says.  (The
    other options that change fixes, --target-torch and --select, are each some fixture's own
    options: `# fixture:` in its first line.)"""
    other = dataclasses.replace(given, use_shim=not given.use_shim)
    return [given, other] if _labels(run(other)) != _labels(run(given)) else [given]


@pytest.mark.parametrize("case", CASES)
def test_python_labels_are_what_write_applies(case: str) -> None:
    src = (FIXTURES / f"{case}.in.py").read_text(encoding="utf-8")

    def run(options: Options) -> FileResult:
        return transform_source(src, f"{case}.in.py", options)

    for options in _variants(run, options_for(src, write=False)):
        _check_labels(run, options)


FILE_CASES = file_cases()


@pytest.mark.parametrize("case", FILE_CASES, ids=[c.id for c in FILE_CASES])
def test_file_labels_are_what_write_applies(case) -> None:  # type: ignore[no-untyped-def]
    """Also where a later pass of the fixed point fixes what an earlier fix made (C++:
    cpp/fixed_point), and with --use-shim, whose C++ rewrites differ."""
    text = read(case.input)

    def run(options: Options) -> FileResult:
        result = scan(case.name, text, options)
        assert result is not None and result.error is None
        return result

    for options in _variants(run, Options()):
        _check_labels(run, options)


_IPYTHON_LINE = re.compile(r"\s*(?:[A-Za-z_][\w.]*\s*=\s*)?[!%]|\s*\?")  # `!cmd`, `%magic`, `x = !cmd`, `?`


def _notebook_code(path: Path) -> str:
    """A notebook's code cells as one module (IPython-only lines commented out)."""
    nb = json.loads(read(path))
    out = []
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        if src.lstrip().startswith("%%"):
            continue  # a cell magic: not Python
        out.extend("# " + line if _IPYTHON_LINE.match(line) else line for line in src.splitlines())
    return "\n".join(out) + "\n"


def test_no_fix_adds_a_pyflakes_error(tmp_path: Path) -> None:
    pairs: list[tuple[Path, Path]] = []
    for case in CASES:
        for kind in ("out", "unsafe", "shim"):
            out = FIXTURES / f"{case}.{kind}.py"
            if out.exists():
                pairs.append((FIXTURES / f"{case}.in.py", out))
    for case in file_cases():
        if case.input.suffix != ".ipynb":
            continue
        for kind in ("out", "unsafe"):
            out = case.sibling(kind)
            if out.exists():
                a = tmp_path / f"{case.stem}.in.py"
                b = tmp_path / f"{case.stem}.{kind}.py"
                a.write_text(_notebook_code(case.input))
                b.write_text(_notebook_code(out))
                pairs.append((a, b))
    assert len(pairs) > 40
    files = sorted({str(p) for pair in pairs for p in pair})
    proc = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--isolated", "--no-cache", "--select", "F",
         "--output-format", "json", "--exit-zero", *files],
        capture_output=True, text=True, timeout=120, check=True,
    )
    per_file: dict[str, Counter[tuple[str, str]]] = {f: Counter() for f in files}
    for d in json.loads(proc.stdout):
        per_file[str(Path(d["filename"]))][(d["code"], d["message"])] += 1
    added = {
        f"{out.name}: {code} {msg}"
        for given, out in pairs
        for (code, msg), n in (per_file[str(out)] - per_file[str(given)]).items()
    }
    assert not added, sorted(added)


def test_a_notebook_message_cites_cell_lines() -> None:
    """"line N" in a message is in the numbering of the finding's own position: in a notebook
    the cell's (the GPU pick is on line 2 of cell 3, not on line 8 of the cells run together)."""
    path = FIXTURES.parent / "files" / "notebook" / "cited_lines.in.ipynb"
    for options in (Options(), Options(apply_safe=True, apply_unsafe=True)):
        result = scan(path.name, read(path), options)
        assert result is not None
        [finding] = result.findings
        assert finding.cell is not None and (finding.cell.number, finding.cell.line) == (4, 2)
        assert "(cell 3, line 2)" in finding.message and "line 8" not in finding.message
        assert "cell 3, line 2" in finding.detail


@pytest.mark.parametrize("name", ["x.env", "Dockerfile", "run.sh"])
def test_the_oldest_supported_torch_bounds_file_fixes(name: str) -> None:
    """torch 2.14 still reads TORCH_NCCL_AVOID_RECORD_STREAMS: a project that supports 2.14 keeps
    it (flagged, saying why); from 2.15 on --unsafe-fixes deletes it."""
    line = "TORCH_NCCL_AVOID_RECORD_STREAMS=1"
    text = {"x.env": f"{line}\n", "Dockerfile": f"FROM x\nENV {line}\n", "run.sh": f"#!/bin/sh\nexport {line}\n"}[name]
    kept = scan(name, text, Options(target_torch=(2, 14), apply_safe=True, apply_unsafe=True))
    assert kept is not None and kept.new_text is None
    [finding] = kept.findings
    assert finding.fix is FixKind.NONE and "still read by torch 2.14" in finding.message
    assert "the oldest release this project supports" in finding.detail
    dropped = scan(name, text, Options(target_torch=(2, 15), apply_safe=True, apply_unsafe=True))
    assert dropped is not None and dropped.new_text is not None and line not in dropped.new_text
