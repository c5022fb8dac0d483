"""Data-only cases in tests/fixtures/python: ``<case>.in.py`` -> ``<case>.out.py`` + ``<case>.findings``.

The first line of ``<case>.in.py`` may hold options: ``# fixture: --unsafe-fixes --target-torch 2.14
--use-shim --select NCX1 --line-length 100`` (default 88).  For every case the harness checks: the findings (code, position,
fix kind, applied) match ``.findings``; the fixed text equals ``.out.py`` (absent: unchanged) and
parses; one run reaches the fixed point: a second run over the fixed text changes nothing and
finds nothing fixable; a report-only run finds the same things, at the same places (a fix that
only a later pass applies included), unapplied.  An optional ``<case>.messages`` holds each finding's message as a user reads
it (``line:col CODE message``), for cases whose point is the wording (a severity, a cited line).
``NCCLX_UPDATE_FIXTURES=1 pytest tests/migrate/test_fixtures.py`` rewrites the expected files
from the actual results (review the diff!).
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import libcst as cst
import pytest

from ncclx_migrate._migrate._model import FileResult, Options
from ncclx_migrate._migrate._python import transform_source
from ncclx_migrate._migrate._target import parse_target

pytestmark = pytest.mark.usefixtures("reparse_check")  # tests/conftest.py

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "python"
CASES = sorted(p.name[: -len(".in.py")] for p in FIXTURES.glob("*.in.py"))
UPDATE = os.environ.get("NCCLX_UPDATE_FIXTURES") == "1"


def options_for(text: str, write: bool = True) -> Options:
    first = text.splitlines()[0] if text else ""
    args = shlex.split(first.split("# fixture:", 1)[1]) if "# fixture:" in first else []
    unsafe = "--unsafe-fixes" in args
    target = (2, 15)
    select: tuple[str, ...] = ()
    if "--target-torch" in args:
        target = parse_target(args[args.index("--target-torch") + 1])
    if "--select" in args:
        select = (args[args.index("--select") + 1],)
    # a fixture is not in a project: lines a fix adds follow black's default unless it says
    line_length = int(args[args.index("--line-length") + 1]) if "--line-length" in args else 88
    return Options(
        target_torch=target,
        apply_safe=write,
        apply_unsafe=unsafe and write,
        use_shim="--use-shim" in args,
        select=select,
        line_length=line_length,
    )


def render(result: FileResult) -> str:
    return "".join(
        f"{f.line}:{f.column} {f.code} {f.fix.value}{' applied' if f.applied else ''}{' note' if f.note else ''}\n"
        for f in result.findings
    )


@pytest.mark.parametrize("case", CASES)
def test_fixture(case: str) -> None:
    src = (FIXTURES / f"{case}.in.py").read_text(encoding="utf-8")
    out_path = FIXTURES / f"{case}.out.py"
    findings_path = FIXTURES / f"{case}.findings"
    options = options_for(src)
    result = transform_source(src, f"{case}.in.py", options)
    assert result.error is None, result.error
    new = result.new_text if result.new_text is not None else src
    if UPDATE:
        findings_path.write_text(render(result), encoding="utf-8")
        if new != src:
            out_path.write_text(new, encoding="utf-8")
        elif out_path.exists():
            out_path.unlink()
    assert render(result) == findings_path.read_text(encoding="utf-8")
    messages_path = FIXTURES / f"{case}.messages"
    if messages_path.exists():
        messages = "".join(f"{f.line}:{f.column} {f.code} {f.message}\n" for f in result.findings)
        if UPDATE:
            messages_path.write_text(messages, encoding="utf-8")
        assert messages == messages_path.read_text(encoding="utf-8")
    expected = out_path.read_text(encoding="utf-8") if out_path.exists() else src
    assert new == expected
    if result.new_text is None:
        assert not any(f.applied for f in result.findings)
    cst.parse_module(new)  # the output parses
    # one run reaches the fixed point: a second --write changes nothing and finds nothing fixable
    assert not any(options.wants_fix(f.fix) for f in result.findings if not f.applied), \
        "the run left a finding it could fix"
    again = transform_source(new, f"{case}.out.py", options)
    assert again.new_text is None, "a second --write would change the file again"
    assert not any(f.applied or options.wants_fix(f.fix) for f in again.findings)
    # report-only: nothing applied, nothing to write; without --unsafe-fixes, what --write does
    # is labelled at the same place (positions in the file as given)
    report = transform_source(src, f"{case}.in.py", options_for(src, write=False))
    assert report.new_text is None
    assert not any(f.applied for f in report.findings)
    if not options.apply_unsafe:
        as_given = [(f.line, f.column, f.code, f.fix) for f in result.findings if f.applied]
        reported = [(f.line, f.column, f.code, f.fix) for f in report.findings if options.wants_fix(f.fix)]
        assert reported == as_given, "the report labels fixable other findings than --write fixes"


def test_every_python_rule_has_a_fixture() -> None:
    from ncclx_migrate._migrate._python._engine import python_codes

    seen = "".join((FIXTURES / f"{c}.findings").read_text() for c in CASES)
    missing = [c for c in python_codes() if c not in seen]
    assert not missing, f"no fixture exercises {missing}"
