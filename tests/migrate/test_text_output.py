"""`ncclx migrate`'s text report as a user reads it: short messages, colour, code frames,
and a summary that says what the mode that ran did."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import os
import re
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from ncclx_migrate._migrate._cli import migrate
from ncclx_migrate._migrate._model import Finding, Options
from ncclx_migrate._migrate._python import transform_source
from tests.conftest import on_a_terminal, run_ncclx
from tests.migrate.test_fixtures import CASES, FIXTURES, options_for
from tests.migrate_files import _cases

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "legacy-trainer"
LIMIT = 88  # never over (ruff's line length): the why is in `detail` and `ncclx explain`
AIM = 75  # the mean stays near ruff's one short sentence
WIDTH = 120  # a finding's whole line, run from a project's root
ESC = "\x1b["

TOGGLE = 'import os\nos.environ["TORCH_DIST_USE_NCCL2"] = "0"\n'
MIXED = (  # one safe (NCX120's add that keeps an inherited new name) and one unsafe finding
    'import os\nos.environ["TORCH_NCCL_TRACE_BUFFER_SIZE"] = "2000"\n'
    'import torch.distributed as dist\ndist.init_process_group("nccl-legacy")\n'
)


def _migrate(*args: str, cwd: Path, env: dict[str, str] | None = None, input: str | None = None) -> Result:
    """The migrate command in this process (a subprocess per call costs seconds on a busy CI);
    stdout/stderr are not terminals here, as in a pipe."""
    base: dict[str, str | None] = {k: None for k in os.environ if k.startswith(("TORCH_", "NCCL"))}
    base.update({"NO_COLOR": "1", "FORCE_COLOR": None, **(env or {})})
    with contextlib.chdir(cwd):
        return CliRunner(env=base).invoke(migrate, list(args), input=input, catch_exceptions=False)


def _fixture_findings() -> list[Finding]:
    out: list[Finding] = []
    for case in CASES:
        src = (FIXTURES / f"{case}.in.py").read_text(encoding="utf-8")
        for write in (False, True):
            out += transform_source(src, f"{case}.in.py", options_for(src, write)).findings
        for target in ((2, 13), (2, 14), (2, 16)):  # the wordings that name or depend on a release
            options = dataclasses.replace(options_for(src), target_torch=target)
            out += transform_source(src, f"{case}.in.py", options).findings
    for fc in _cases.cases():
        text = _cases.read(fc.input)
        for options in (_cases.REPORT, _cases.UNSAFE, Options(target_torch=(2, 13))):
            out += _cases.run(fc, text, options).findings
    return out


@functools.cache
def _example_findings() -> list[dict[str, object]]:
    proc = _migrate("--format", "json", "-q", ".", cwd=EXAMPLE)
    findings: list[dict[str, object]] = json.loads(proc.stdout)["findings"]
    assert findings
    return findings


@pytest.mark.slow
def test_every_message_is_one_short_sentence_with_the_why_in_detail() -> None:
    found = _fixture_findings()
    messages = [f.message for f in found] + [str(f["message"]) for f in _example_findings()]
    too_long = [m for m in messages if len(m) > LIMIT]
    assert not too_long, too_long
    assert sum(map(len, messages)) / len(messages) <= AIM
    assert all("\n" not in m for m in messages)
    # Every finding site moved its explanation to the detail field; none left it empty.
    assert all(f.detail and len(f.detail) > 20 for f in found), [f for f in found if not f.detail][:3]


def test_example_report_lines_fit_after_the_location() -> None:
    proc = run_ncclx("migrate", "-q", ".", cwd=EXAMPLE)
    assert proc.returncode == 1
    rows = proc.stdout.splitlines()[:-2]  # the count and the hint end it
    assert len(rows) == len(_example_findings())
    for row in rows:
        # path:line:col: CODE, the form editors jump to; in a notebook ruff's path:cell N:line:col:
        m = re.match(r"^(\S+?):((?:cell \d+:)?\d+:\d+): (NCX\d{3}) ", row)
        assert m, row
        assert m.group(2).startswith("cell ") == m.group(1).endswith(".ipynb"), row
        assert len(row) - len(f"{m.group(1)}:{m.group(2)}: ") <= len("NCX000 [*] ") + LIMIT, row
        assert len(row) <= WIDTH, row
    assert max(map(len, rows)) < 200  # was 427


def test_json_detail_holds_the_why() -> None:
    f = next(f for f in _example_findings() if f["code"] == "NCX203" and "TRACE_BUFFER" in str(f["message"]))
    # .env has no form that keeps an inherited new name: the add is unsafe there (no [*] in the text)
    assert f["message"] == "TORCH_NCCL_TRACE_BUFFER_SIZE is deprecated: add TORCH_FR_BUFFER_SIZE"
    assert f["fix"] == "unsafe"
    assert "when both are set the FR name wins" in str(f["detail"])
    assert "overrides a TORCH_FR_BUFFER_SIZE the job inherits" in str(f["detail"])


def test_colour_off_when_piped_on_with_force_color_and_no_color_wins(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(TOGGLE)
    plain = run_ncclx("migrate", "a.py", cwd=tmp_path, env={"NO_COLOR": ""})
    assert ESC not in plain.stdout and plain.stdout.startswith("a.py:2:1: NCX101 ")
    forced = run_ncclx("migrate", "a.py", cwd=tmp_path, env={"NO_COLOR": "", "FORCE_COLOR": "1"})
    assert "\x1b[31;1mNCX101\x1b[0m" in forced.stdout and "\x1b[1ma.py\x1b[0m" in forced.stdout
    assert re.sub(r"\x1b\[[0-9;]*m", "", forced.stdout) == plain.stdout
    both = _migrate("a.py", cwd=tmp_path, env={"NO_COLOR": "1", "FORCE_COLOR": "1"})
    assert both.stdout == plain.stdout
    # --diff: the report goes to stderr, coloured by the same rules
    diff = _migrate("--diff", "a.py", cwd=tmp_path, env={"NO_COLOR": "", "FORCE_COLOR": "1"})
    assert ESC in diff.stderr and ESC not in diff.stdout


def _on_terminal(tmp_path: Path, env: dict[str, str]) -> str:
    run = on_a_terminal("migrate", "-q", "a.py", terminal=("stdout", "stderr"), env=env, cwd=tmp_path, timeout=60)
    assert run.returncode == 1
    return run.terminal


def test_colour_on_a_terminal_unless_no_color(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(TOGGLE)
    assert "\x1b[31;1mNCX101\x1b[0m" in _on_terminal(tmp_path, {})
    assert ESC not in _on_terminal(tmp_path, {"NO_COLOR": "1"})


def test_show_source_prints_ruffs_code_frame(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("import os\n\n" + "\n" * 7 + 'os.environ["TORCH_DIST_USE_NCCL2"] = "0"\n')
    proc = _migrate("--show-source", "a.py", cwd=tmp_path)
    assert proc.stdout.splitlines()[:6] == [
        "a.py:10:1: NCX101 TORCH_DIST_USE_NCCL2=0 rolls back to legacy: remove it once on nccl2",
        "   |",
        '10 | os.environ["TORCH_DIST_USE_NCCL2"] = "0"',
        "   | ^ NCX101",
        "   |",
        "",
    ]
    assert "   |" not in _migrate("a.py", cwd=tmp_path).stdout  # only behind the flag
    # a BOM, CRLF line ends and a tab do not shift the caret
    (tmp_path / "b.py").write_bytes('\ufeffimport os\r\nif 1:\r\n\tos.environ["TORCH_DIST_USE_NCCL2"] = "0"\r\n'.encode())
    framed = _migrate("--show-source", "b.py", cwd=tmp_path).stdout.splitlines()
    assert framed[2:4] == ['3 |  os.environ["TORCH_DIST_USE_NCCL2"] = "0"', "  |  ^ NCX101"], framed
    # stdin: the frame comes from the text read; after --write from the written text
    piped = _migrate("--show-source", "-", input="x = 1\n" + TOGGLE, cwd=tmp_path)
    assert '3 | os.environ["TORCH_DIST_USE_NCCL2"] = "0"' in piped.stdout
    shell = _migrate("--show-source", "--stdin-filename", "run.sh", "-",
                     input="#!/bin/sh\nexport TORCH_DIST_USE_NCCL2=0\n", cwd=tmp_path).stdout
    assert "2 | export TORCH_DIST_USE_NCCL2=0\n  |        ^ NCX201\n" in shell


def _summary(tmp_path: Path, *args: str) -> str:
    proc = _migrate(*args, "a.py", cwd=tmp_path)
    out = proc.stderr if "--diff" in args else proc.stdout
    return out.splitlines()[-1]


def test_summary_says_what_the_mode_did(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(MIXED)
    # ruff's shape: a safe fix is marked [*], an unsafe one is not marked on its line and is
    # counted as "hidden" in the hint under the count
    report = _migrate("a.py", cwd=tmp_path).stdout.splitlines()
    assert [line.split(" ", 2)[:2] for line in report[:2]] == [["a.py:2:1:", "NCX120"], ["a.py:4:25:", "NCX103"]]
    assert report[0].split()[2] == "[*]" and report[1].split()[2] != "[*]" and "unsafe" not in report[1]
    assert report[2:] == [
        "Found 2 findings in 1 file.",
        "[*] 1 fixable with --write (1 hidden fix can be enabled with --write --unsafe-fixes).",
    ]
    (tmp_path / "u.py").write_text(TOGGLE + TOGGLE.replace('"0"', '"0"  # again'))
    assert _migrate("u.py", cwd=tmp_path).stdout.splitlines()[-2:] == [
        "Found 2 findings in 1 file.",
        "No fixes available (2 hidden fixes can be enabled with --write --unsafe-fixes).",
    ]
    assert _summary(tmp_path, "--diff") == (
        "Found 2 findings in 1 file (1 would be fixed by --write, 1 left). 1 more with --unsafe-fixes."
    )
    diff_unsafe = _summary(tmp_path, "--diff", "--unsafe-fixes")
    assert diff_unsafe == "Found 2 findings in 1 file (2 would be fixed by --write --unsafe-fixes, 0 left)."
    assert "unsafe-fixes." not in diff_unsafe.split(")")[1]
    assert (tmp_path / "a.py").read_text() == MIXED  # --diff writes nothing
    assert _summary(tmp_path, "--write") == "Found 2 findings in 1 file (1 fixed, 1 left). 1 more with --unsafe-fixes."
    assert _summary(tmp_path, "--write", "--unsafe-fixes") == "Found 1 finding in 1 file (1 fixed, 0 left)."
    assert _summary(tmp_path) == "No findings in 1 file."


def test_diff_lists_files_in_report_order(tmp_path: Path) -> None:
    # one name per file: a name two files of a run set gets no safe add, so no diff
    names = {"z.py": "TORCH_NCCL_TRACE_BUFFER_SIZE", "b/a.py": "TORCH_NCCL_DUMP_ON_TIMEOUT",
             "a.sh": "NCCL_ASYNC_ERROR_HANDLING", "m.py": "TORCH_NCCL_TRACE_CPP_STACK"}
    for name, var in names.items():
        p = tmp_path / name
        p.parent.mkdir(exist_ok=True)
        p.write_text(f'#!/bin/sh\nexport {var}=1\ntorchrun train.py\n' if name.endswith(".sh")
                     else f'import os\nos.environ["{var}"] = "1"\n')
    proc = _migrate("--diff", "-j", "1", "z.py", "m.py", "b", "a.sh", cwd=tmp_path)
    diffed = [ln[len("+++ b/"):] for ln in proc.stdout.splitlines() if ln.startswith("+++ ")]
    reported = list(dict.fromkeys(ln.split(":")[0] for ln in proc.stderr.splitlines()[:-1]))
    assert diffed == reported == sorted(diffed) and len(diffed) == 4


def test_github_annotation_carries_the_detail(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(TOGGLE)
    out = _migrate("--format", "github", "a.py", cwd=tmp_path).stdout
    head, _, rest = out.partition("%0A%0A")
    assert head.endswith("::NCX101 TORCH_DIST_USE_NCCL2=0 rolls back to legacy: remove it once on nccl2")
    assert "announced for 2.15 only" in rest and "\n" not in out.rstrip("\n")
    sarif = json.loads(_migrate("--format", "sarif", "a.py", cwd=tmp_path).stdout)
    (res,) = sarif["runs"][0]["results"]
    assert len(res["message"]["text"]) <= LIMIT and "2.15 only" in res["properties"]["detail"]


def test_a_notebook_finding_names_its_cell_in_every_format(tmp_path: Path) -> None:
    """Text: ruff's path:cell N:line:col: and the cell's line in the code frame. The others point
    into the .ipynb text (where editors and code scanning open it) and name the cell beside it."""
    cells = [{"cell_type": "markdown", "metadata": {}, "source": ["# notes\n"]},
             {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
              "source": TOGGLE.splitlines(keepends=True)}]
    text = json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}, indent=1) + "\n"
    (tmp_path / "n.ipynb").write_text(text)
    row = text.splitlines().index('    "os.environ[\\"TORCH_DIST_USE_NCCL2\\"] = \\"0\\"\\n"') + 1
    report = _migrate("-q", "n.ipynb", cwd=tmp_path).stdout
    assert report.startswith("n.ipynb:cell 2:2:1: NCX101 TORCH_DIST_USE_NCCL2=0 rolls back"), report
    frame = _migrate("-q", "--show-source", "n.ipynb", cwd=tmp_path).stdout.splitlines()[1:4]
    assert frame == ["  |", '2 | os.environ["TORCH_DIST_USE_NCCL2"] = "0"', "  | ^ NCX101"]  # the cell's line
    (f,) = json.loads(_migrate("--format", "json", "n.ipynb", cwd=tmp_path).stdout)["findings"]
    assert (f["line"], f["column"], f["cell"]) == (row, 6, {"number": 2, "line": 2, "column": 1})
    assert not f["message"].startswith("cell")
    (res,) = json.loads(_migrate("--format", "sarif", "n.ipynb", cwd=tmp_path).stdout)["runs"][0]["results"]
    assert res["locations"][0]["physicalLocation"]["region"] == {"startLine": row, "startColumn": 6}
    assert res["message"]["text"].endswith(" (cell 2, line 2)") and res["properties"]["cell"] == f["cell"]
    github = _migrate("--format", "github", "n.ipynb", cwd=tmp_path).stdout
    assert f",line={row},col=6::NCX101 " in github and "on nccl2 (cell 2, line 2)%0A%0A" in github



def test_docs_show_the_real_output() -> None:
    """The example output in docs/migrate.md is what the program prints today."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "migrate.md").read_text(encoding="utf-8")
    shown = [ln.strip() for ln in doc.split("$ cd examples/legacy-trainer && ncclx migrate\n", 1)[1]
             .split("```", 1)[0].splitlines() if ln.strip() not in ("", "...")]
    real = _migrate("-q", ".", cwd=EXAMPLE).stdout.splitlines()
    assert len(shown) > 5 and all(ln in real for ln in shown), [ln for ln in shown if ln not in real]
    frame = doc.split("$ ncclx migrate --show-source dist_utils.py\n", 1)[1].split("```", 1)[0]
    real_frame = _migrate("-q", "--show-source", "dist_utils.py", cwd=EXAMPLE).stdout
    assert "\n".join(ln[2:] for ln in frame.splitlines()) in real_frame


def _in_order(shown: list[str], real: list[str]) -> bool:
    it = iter(real)
    return all(any(ln == r for r in it) for ln in shown)


def test_readme_shows_the_demo_as_it_runs() -> None:
    """README's migrate part is what scripts/demo.sh prints: the report (target note first), then
    the diff and only its summary, each followed by the exit code's meaning as demo.sh words it."""
    root = Path(__file__).resolve().parents[2]
    readme = (root / "README.md").read_text(encoding="utf-8")
    demo = (root / "scripts" / "demo.sh").read_text(encoding="utf-8")
    block = readme.split("== ncclx migrate, in examples/legacy-trainer (the report) ==\n", 1)[1].split("```", 1)[0]
    report, diff = block.split("\n\n== ncclx migrate --diff (what --write would apply) ==\n")
    assert 'echo "== ncclx migrate, in examples/legacy-trainer (the report) =="' in demo
    assert 'echo "== ncclx migrate --diff (what --write would apply) =="' in demo
    # the report: stderr's note, then stdout, as a terminal shows them
    proc = run_ncclx("migrate", cwd=EXAMPLE)
    real = proc.stderr.splitlines() + proc.stdout.splitlines()
    *shown, exit_line = [ln for ln in report.splitlines() if ln != "..."]
    assert shown[0] == "ncclx migrate: target torch 2.15 (from requirements.txt)"
    assert _in_order(shown, real), [ln for ln in shown if ln not in real]
    assert shown[-2:] == real[-2:]  # the count and the hint end it
    assert exit_line == f"-> ncclx migrate exit {proc.returncode}: findings reported"
    assert '"ncclx migrate" $? "no finding" "findings reported"' in demo
    # the diff: stdout, then the summary (stderr without its finding lines)
    proc = run_ncclx("migrate", "--diff", "-q", cwd=EXAMPLE)
    *shown, summary, exit_line = [ln for ln in diff.splitlines() if ln != "..."]
    assert _in_order(shown, proc.stdout.splitlines())
    finding = r"[^ ]+:(cell \d+:)?\d+:\d+: NCX\d+ "
    assert [ln for ln in proc.stderr.splitlines() if not re.match(finding, ln)] == [summary]
    assert exit_line == f"-> ncclx migrate --diff exit {proc.returncode}: findings reported (the diff fixes some)"
    assert "grep -Ev '^[^ ]+:(cell [0-9]+:)?[0-9]+:[0-9]+: NCX[0-9]+ '" in demo


def test_use_color_rules() -> None:
    from ncclx_migrate._color import use_color

    class Tty:
        def isatty(self) -> bool:
            return True

    tty = Tty()
    assert use_color(tty, {}) and not use_color(tty, {"NO_COLOR": "1"})  # type: ignore[arg-type]
    assert use_color(tty, {"NO_COLOR": ""}) and not use_color(tty, {"TERM": "dumb"})  # type: ignore[arg-type]
    assert not use_color(tty, {"NO_COLOR": "1", "FORCE_COLOR": "1"})  # type: ignore[arg-type]
    assert use_color(None, {"FORCE_COLOR": "1", "TERM": "dumb"})  # forced, even into a pipe


def test_a_parse_error_names_one_position(tmp_path: Path) -> None:
    (tmp_path / "bad.py").write_text(TOGGLE + "if x:\nfoo(\n")
    (tmp_path / "bad2.py").write_text(TOGGLE + "def f(:\n    pass\n")
    proc = _migrate("bad.py", "bad2.py", cwd=tmp_path)
    assert proc.exit_code == 2
    assert proc.stdout.splitlines()[:2] == [
        "bad.py: error: cannot parse: expected an indented block after 'if' statement on line 3 (line 4, column 1)",
        "bad2.py: error: cannot parse: invalid syntax (line 3, column 7)",
    ]
