"""The second precheck (``_python/_astcheck.py``) skips only what no rule would report.

Every Python file under tests/fixtures is scanned with the prechecks on and off (the text
tests and the check on Python's own tree): same findings, same fixed text.  One pass with the
prechecks off may report only codes the tree check keeps.  The multi-file cases run with
their project's helpers, as the runner gives them.  The fixtures ``astcheck_*`` hold the
shapes the check must keep (an init through an alias, a pick through a helper or another
method, ``**kwargs``, calls in a lambda, a decorator and an f-string, joined literals).
"""

from __future__ import annotations

import ast
import dataclasses
import shutil
from pathlib import Path

import pytest

from ncclx_migrate._migrate._model import FileResult, Options, is_selected
from ncclx_migrate._migrate._python._astcheck import ast_active
from ncclx_migrate._migrate._python._engine import (
    _one_pass,
    active_codes,
    python_codes,
    transform_source,
)
from ncclx_migrate._migrate._runner import Mode, with_project
from ncclx_migrate._migrate._xref import Helper, Helpers
from tests.migrate.test_fixtures import options_for

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
FILES = sorted(str(p.relative_to(FIXTURES)) for p in FIXTURES.rglob("*.py"))
MULTI = sorted(p.name for p in (FIXTURES / "python").iterdir() if p.is_dir() and any(p.rglob("*.in.py")))


def _seen(result: FileResult) -> tuple[object, ...]:
    return (result.error, result.new_text,
            [(f.line, f.column, f.code, f.fix, f.applied, f.message) for f in result.findings])


def _same_both_ways(text: str, path: str, options: Options) -> None:
    on = transform_source(text, path, options)
    off = transform_source(text, path, options, precheck=False)
    assert _seen(on) == _seen(off)
    first, _ = _one_pass(text, path, options, precheck=False)
    tree = ast.parse(text)
    every = {c for c in python_codes() if is_selected(c, options)}
    kept = ast_active(tree, text, every, options)
    assert {f.code for f in first.findings} <= kept


@pytest.mark.parametrize("rel", FILES)
def test_fixture_same_with_and_without_precheck(rel: str) -> None:
    text = (FIXTURES / rel).read_text(encoding="utf-8")
    for write in (True, False):
        _same_both_ways(text, rel, options_for(text, write))


@pytest.mark.parametrize("case", MULTI)
def test_project_same_with_and_without_precheck(case: str, tmp_path: Path) -> None:
    files = []
    for src in sorted((FIXTURES / "python" / case).rglob("*.in.py")):
        dst = tmp_path / src.relative_to(FIXTURES / "python" / case).parent / src.name.replace(".in.py", ".py")
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)
        files.append(str(dst))
    head = FIXTURES / "python" / case / "fixture"
    options = with_project(options_for(head.read_text(encoding="utf-8") if head.exists() else ""), Mode(), files)
    for f in files:
        _same_both_ways(Path(f).read_text(encoding="utf-8"), f, options)


# Each rule's words, but in a docstring, a comment, an attribute of another name, a list of
# names, a test's type alias: the text tests pass, nothing is there to report.
MENTIONS = '''\
"""Call dist.init_process_group(backend="nccl") after torch.cuda.set_device(local_rank).

Legacy logs said "Heartbeat monitor timed out"; set NCCL_ASYNC_ERROR_HANDLING=1.
"""
import torch
import torch.distributed as dist

SeqNum = int
NAMES = ["nccl", "nccl-legacy", "gloo"]
KNOWN = ["TORCH_NCCL_ASYNC_ERROR_HANDLING", "NCCL_DEBUG"]


def remote(options, dst):
    options.set_device_map(dst, {0: 1})  # not a GPU pick
    try:
        torch.cuda.device_count()
    except ValueError:  # no init_process_group( in this try
        pass


def fake_world(world_size):
    torch.cuda.set_device(0)
    dist.init_process_group("fake", rank=0, world_size=world_size)


def bound(rank):
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", device_id=torch.device("cuda", rank))


def later():
    with torch.cuda.device(0):
        pass


def elsewhere():
    dist.init_process_group("nccl")  # no pick on any path to it: later() is never called


def is_nccl(group):
    return dist.get_backend(group) in {"nccl", "nccl2"}  # already chose which NCCLs count


def cta():
    return dist.ProcessGroupNCCL.NCCL_CTA_POLICY_ZERO  # read from the class: fine
'''


def test_mentions_are_not_parsed() -> None:
    options = Options()
    text_hits = active_codes(MENTIONS, options)
    assert {"NCX103", "NCX110", "NCX111", "NCX112", "NCX113", "NCX120", "NCX130", "NCX134"} <= text_hits
    assert ast_active(ast.parse(MENTIONS), MENTIONS, text_hits, options) == set()
    assert transform_source(MENTIONS, "mentions.py", options).findings == []
    assert transform_source(MENTIONS, "mentions.py", options, precheck=False).findings == []


def test_helper_of_the_run_keeps_the_gpu_rules() -> None:
    """A pick by a helper of another module (``init_device()``) is seen only through the run's
    index: kept where the index names it, dropped where no pick is left."""
    text = "from pkg.gpu import init_device\nimport torch.distributed as dist\n\n" \
           "def main(rank):\n    init_device(rank)\n    dist.init_process_group('nccl')\n"
    options = Options()
    assert ast_active(ast.parse(text), text, {"NCX130", "NCX134"}, options) == set()
    helpers = Helpers({"pkg.gpu.init_device": Helper(("?",), ("param:0:rank",))})
    assert "init_device" in helpers.setters
    with_helpers = dataclasses.replace(options, helpers=helpers)
    assert ast_active(ast.parse(text), text, {"NCX130", "NCX134"}, with_helpers) == {"NCX130", "NCX134"}
