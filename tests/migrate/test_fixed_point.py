"""One ``--write`` reaches the fixed point (issue 25 §1), and positions map from the edits.

The shapes themselves are data-only fixtures (tests/fixtures/python/fixpoint_*,
ncx110_after_unsafe_fix, tests/fixtures/files/notebook/fixed_point), whose harnesses check that
one run leaves nothing it could fix; here: what the user reads about it.
"""

from __future__ import annotations

import difflib
import json
import random
import shutil
from pathlib import Path

import pytest

from ncclx_migrate._migrate._lines import line_map_edits
from ncclx_migrate._migrate._model import Options
from ncclx_migrate._migrate._python import transform_source
from tests.conftest import run_ncclx

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "python"
CHAINS = "fixpoint_two_chains"


def test_a_later_fix_names_the_fix_it_follows() -> None:
    src = (FIXTURES / f"{CHAINS}.in.py").read_text(encoding="utf-8")
    result = transform_source(src, "train.py", Options(apply_unsafe=True, line_length=88))
    notes = {f.code: f.detail.rsplit(". ", 1)[-1] for f in result.findings if "same run" in f.detail}
    # at its line in the file as given, after the fix nearest to it
    assert notes == {"NCX110": "Fixed by the same run once the fix at line 13 is applied.",
                     "NCX130": "Fixed by the same run once the fix at line 20 is applied."}
    assert {(f.line, f.code) for f in result.findings} == {(12, "NCX110"), (13, "NCX111"), (19, "NCX130"),
                                                           (20, "NCX103")}


@pytest.mark.slow
def test_one_write_finishes_the_job(tmp_path: Path) -> None:
    target = tmp_path / "train.py"
    shutil.copy(FIXTURES / f"{CHAINS}.in.py", target)
    proc = run_ncclx("migrate", "--write", "--unsafe-fixes", "train.py", cwd=tmp_path)
    assert "Found 4 findings in 1 file (4 fixed, 0 left)." in proc.stdout, proc.stdout
    assert "running it again" not in proc.stdout + proc.stderr
    assert target.read_text(encoding="utf-8") == (FIXTURES / f"{CHAINS}.out.py").read_text(encoding="utf-8")
    # a second --write changes nothing and finds nothing fixable
    again = transform_source(target.read_text(encoding="utf-8"), "train.py", Options(apply_unsafe=True,
                                                                                       line_length=88))
    assert again.new_text is None and not any(f.fix.value != "none" for f in again.findings)


def _difflib_map(old: str, new: str) -> dict[int, int]:
    out: dict[int, int] = {}
    matcher = difflib.SequenceMatcher(None, old.split("\n"), new.split("\n"), autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        for i in range(i1, i2):
            out[i + 1] = j1 + 1 + (i - i1 if tag == "equal" else min(i - i1, max(j2 - j1 - 1, 0)))
    return out


def test_lines_between_edits_map_as_a_diff_would() -> None:
    """The edits' own alignment agrees with a full diff on every line no edit touched."""
    rng = random.Random(25)
    for _ in range(200):
        lines = [f"line {i} {rng.choice('abc')}" for i in range(rng.randint(1, 40))]
        old = "\n".join(lines) + "\n"
        cuts = sorted(rng.sample(range(len(old) + 1), min(len(old) + 1, 2 * rng.randint(1, 4))))
        edits = [(a, b, rng.choice(["", "X", "Y\nZ", "\n\n", "W\n"])) for a, b in zip(cuts[::2], cuts[1::2], strict=False)]
        new = old
        for a, b, t in reversed(edits):
            new = new[:a] + t + new[b:]
        moved = line_map_edits(old, edits)
        touched = {old.count("\n", 0, a) + 1 + k for a, b, _ in edits for k in range(old.count("\n", a, b) + 1)}
        want = _difflib_map(old, new)
        for n in range(1, old.count("\n") + 2):
            if n not in touched and n in want and old.split("\n")[n - 1] != "":
                got = moved.forward(n)
                assert new.split("\n")[got - 1] == old.split("\n")[n - 1], (old, edits, n, got)


CPP = FIXTURES.parent / "files" / "cpp"


@pytest.mark.slow
def test_one_cpp_write_finishes_the_job(tmp_path: Path) -> None:
    """C++ too: the `if` the NCX301 fix adds for nccl2's class repeats the body's "nccl"
    compare, and the same --write fixes the copy (the report labels it, at the line after the
    `if` it follows); a second --write finds nothing to do."""
    target = tmp_path / "comm.cpp"
    shutil.copy(CPP / "fixed_point.in.cpp", target)
    report = json.loads(run_ncclx("migrate", "--format", "json", "comm.cpp", cwd=tmp_path).stdout)
    later = [(f["line"], f["code"], f["fix"]) for f in report["findings"] if "same run" in f["detail"]]
    assert later == [(13, "NCX304", "unsafe"), (25, "NCX304", "unsafe")]
    proc = run_ncclx("migrate", "--write", "--unsafe-fixes", "comm.cpp", cwd=tmp_path)
    assert "Found 6 findings in 1 file (6 fixed, 0 left)." in proc.stdout, proc.stdout
    assert "again" not in proc.stdout + proc.stderr
    assert target.read_text(encoding="utf-8") == (CPP / "fixed_point.unsafe.cpp").read_text(encoding="utf-8")
    again = run_ncclx("migrate", "--write", "--unsafe-fixes", "comm.cpp", cwd=tmp_path)
    assert again.returncode == 0 and "fixed" not in again.stdout and "again" not in again.stdout, again.stdout
    assert target.read_text(encoding="utf-8") == (CPP / "fixed_point.unsafe.cpp").read_text(encoding="utf-8")
