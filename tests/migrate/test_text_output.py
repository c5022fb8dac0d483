"""`ncclx migrate`'s text report as a user reads it: short messages, colour, code frames,
and a summary that says what the mode that ran did."""

from __future__ import annotations

import contextlib
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
LIMIT = 120  # never over
AIM = 90  # the mean stays near ruff's one short sentence
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
    rows = proc.stdout.splitlines()[:-1]
    assert len(rows) == len(_example_findings())
    for row in rows:
        m = re.match(r"^(\S+?):(\d+):(\d+): (NCX\d{3}) ", row)
        assert m, row  # path:line:col: CODE, the form editors jump to
        assert len(row) - len(m.group(1)) - len(f":{m.group(2)}:{m.group(3)}: ") <= LIMIT, row
    assert max(map(len, rows)) < 200  # was 427


def test_json_detail_holds_the_why() -> None:
    f = next(f for f in _example_findings() if f["code"] == "NCX203" and "TRACE_BUFFER" in str(f["message"]))
    # .env has no form that keeps an inherited new name: the add is unsafe there ("too", not "next to it")
    assert f["message"] == "TORCH_NCCL_TRACE_BUFFER_SIZE is deprecated: set TORCH_FR_BUFFER_SIZE too"
    assert "when both are set the FR name wins" in str(f["detail"])
    assert "overrides a TORCH_FR_BUFFER_SIZE the job inherits" in str(f["detail"])


def test_colour_off_when_piped_on_with_force_color_and_no_color_wins(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(TOGGLE)
    plain = run_ncclx("migrate", "a.py", cwd=tmp_path, env={"NO_COLOR": ""})
    assert ESC not in plain.stdout and plain.stdout.startswith("a.py:2:1: NCX101 [unsafe-fix] ")
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
        "a.py:10:1: NCX101 [unsafe-fix] TORCH_DIST_USE_NCCL2=0 rolls back to legacy: remove it once the job runs on nccl2",
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
    assert _summary(tmp_path) == (
        "Found 2 findings in 1 file. 1 fixable with --write ([*]). 1 more fixable with --write --unsafe-fixes."
    )
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
    assert head.endswith("::NCX101 TORCH_DIST_USE_NCCL2=0 rolls back to legacy: remove it once the job runs on nccl2")
    assert "announced for 2.15 only" in rest and "\n" not in out.rstrip("\n")
    sarif = json.loads(_migrate("--format", "sarif", "a.py", cwd=tmp_path).stdout)
    (res,) = sarif["runs"][0]["results"]
    assert len(res["message"]["text"]) <= LIMIT and "2.15 only" in res["properties"]["detail"]



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
