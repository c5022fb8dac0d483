"""`ncclx explain CODE`: laid out for a terminal on a terminal, the markdown source in a pipe."""

from __future__ import annotations

import re

import pytest
from markdown_it import MarkdownIt

from ncclx_migrate._migrate._mdterm import render_markdown
from ncclx_migrate._migrate._rule_table import RULES, rule_doc
from tests.conftest import on_a_terminal, run_ncclx

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _shown(terminal: str) -> list[str]:
    return ANSI.sub("", terminal).replace("\r\n", "\n").rstrip("\n").split("\n")


def _no_markdown(lines: list[str]) -> None:
    text = "\n".join(lines)
    assert "```" not in text and "`" not in text, text
    assert not [ln for ln in lines if re.match(r"#{1,6} (NCX\d|[A-Z][a-z])", ln)], text  # headings
    assert not re.search(r"\]\(|\*\*\(|\*\*[A-Z]", text), text  # link syntax, **emphasis**


def _code_lines(doc: str) -> set[str]:
    """Every line of the doc's code blocks, as written (stripped of trailing blanks)."""
    blocks = [t.content for t in MarkdownIt("commonmark").parse(doc) if t.type in ("fence", "code_block")]
    return {ln.rstrip() for block in blocks for ln in block.rstrip("\n").split("\n") if ln.strip()}


def _laid_out(doc: str, lines: list[str], width: int) -> None:
    """Prose fits the width; every code line is there whole, however long (pasted code must run)."""
    code = _code_lines(doc)
    shown = {ln.strip() for ln in lines}
    missing = [c for c in code if c.strip() not in shown]
    assert not missing, f"code lines cut or lost: {missing}"
    prose = [ln for ln in lines if ln.strip() not in {c.strip() for c in code}]
    assert max(map(len, prose)) <= width, max(prose, key=len)


def test_on_a_terminal_it_is_laid_out_to_the_width() -> None:
    run = on_a_terminal("explain", "NCX134", env={"COLUMNS": "70"}, timeout=60)
    assert run.returncode == 0
    assert "\x1b[1mWhat it finds\x1b[0m\r\n" in run.terminal  # a heading in bold, one span
    assert "\x1b[36mSLURM_LOCALID\x1b[0m" in run.terminal  # code in colour
    lines = _shown(run.terminal)
    _laid_out(rule_doc("NCX134") or "", lines, 70)
    _no_markdown(lines)
    assert lines[:2] == ["NCX134 init-device-mismatch", "─" * len("NCX134 init-device-mismatch")]
    assert "What it finds" in lines and "Evidence" in lines
    assert any(ln.startswith("• (a break): the pick differs") for ln in lines)  # a list item, no **
    # the example stays code: indented, and its long line whole, past the width
    at = lines.index('    torch.cuda.set_device(int(os.environ["SLURM_LOCALID"]))')
    assert lines[at + 1] == ('    dist.init_process_group("nccl")   # NCX134 (maybe a break) -> '
                             'device_id=torch.device("cuda", torch.cuda.current_device())')


@pytest.mark.parametrize("code", ["NCX130", "NCX201"])
def test_code_blocks_stay_whole_at_80_columns(code: str) -> None:
    # Issue 28: at 80 columns explain split `device_id=torch.device("cuda",` from the rest of the
    # call, and broke a YAML example in the middle of its comment.
    run = on_a_terminal("explain", code, env={"COLUMNS": "80", "NO_COLOR": "1"}, timeout=60)
    assert run.returncode == 0
    lines = _shown(run.terminal)
    _laid_out(rule_doc(code) or "", lines, 80)
    whole = {"NCX130": 'dist.init_process_group("nccl")   # NCX130 -> device_id=torch.device("cuda", torch.cuda.current_device())',
             "NCX201": "  - name: TORCH_DIST_USE_NCCL2           # NCX201, unsafe fix: both lines removed"}[code]
    assert "    " + whole in lines


def test_no_color_keeps_the_layout_without_escapes() -> None:
    run = on_a_terminal("explain", "ncx101", env={"COLUMNS": "80", "NO_COLOR": "1"}, timeout=60)
    assert run.returncode == 0 and "\x1b" not in run.terminal
    lines = _shown(run.terminal)
    _laid_out(rule_doc("NCX101") or "", lines, 80)
    _no_markdown(lines)


def test_piped_or_asked_for_it_prints_the_markdown_source() -> None:
    piped = run_ncclx("explain", "NCX134", timeout=60)
    assert piped.returncode == 0
    assert piped.stdout == (rule_doc("NCX134") or "").rstrip("\n") + "\n"
    asked = on_a_terminal("explain", "--format", "markdown", "NCX134", timeout=60)
    assert _shown(asked.terminal) == piped.stdout.rstrip("\n").split("\n")
    # and the layout in a pipe with --format text (no colour there)
    laid = run_ncclx("explain", "--format", "text", "NCX134", env={"COLUMNS": "60"}, timeout=60)
    assert "\x1b" not in laid.stdout
    _laid_out(rule_doc("NCX134") or "", laid.stdout.splitlines(), 60)
    assert laid.stdout.splitlines()[0] == "NCX134 init-device-mismatch"


@pytest.mark.parametrize("width", [60, 80, 100])
def test_every_rule_doc_fits_the_width_with_code_whole_and_no_markers(width: int) -> None:
    for rule in RULES:
        doc = rule_doc(rule.code)
        assert doc is not None
        lines = render_markdown(doc, width, color=False).splitlines()
        _laid_out(doc, lines, width)
        _no_markdown(lines)


def test_a_table_is_aligned_when_it_fits_and_listed_when_it_does_not() -> None:
    doc = "| a | a rather long header |\n| --- | --- |\n| `x` | **y** |\n"
    assert render_markdown(doc, 40, color=False).splitlines() == [
        "a  a rather long header", "─  ────────────────────", "x  y"]
    assert render_markdown(doc, 20, color=False).splitlines() == ["• a: x; a rather", "  long header: y"]
