"""What `ncclx fr analyze` tells a new user (issue 19), on one real hang: 2 gloo ranks, rank 1
skips all_reduce #3, the watchdog dumps both with stack traces (the run test_watchdog's
stack-trace test uses, so a session runs it once).  Where the culprit was and where the others
called the collective: in the JSON and the terminal text (the page: tests/pages/test_first_read_pages.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from ..conftest import on_a_terminal, run_ncclx
from .scenarios import PREFIX, WORKER, Run
from .test_watchdog import FAST

pytestmark = [pytest.mark.torch, pytest.mark.slow]

# The line of worker.py's _collective_3 where the waiting ranks call all_reduce #3.
CALL_LINE = next(n for n, line in enumerate(WORKER.read_text().splitlines(), 1)
                 if "dist.all_reduce(torch.ones(4, 5))" in line)


@pytest.fixture(scope="module")
def hung(scenario: Any) -> Run:
    return scenario("skip", world=2, culprit=1, mode="watchdog", HANG_DUMP_STACKS="1", **FAST)


def test_json_gives_where_the_culprit_was_and_where_the_others_called(hung: Run) -> None:
    res = run_ncclx("fr", "analyze", str(hung.folder), "--format", "json")
    assert res.returncode == 1, res.stderr
    group = json.loads(res.stdout)["groups"][0]
    assert group["called_from"] == {"name": "_collective_3", "filename": str(WORKER), "line": CALL_LINE}
    stuck = group["stuck_at"]["1"]  # the culprit, in its own code (it sleeps in main)
    assert stuck["name"] == "main" and stuck["filename"] == str(WORKER) and stuck["line"] > 0


def test_text_shows_the_users_frames_and_counts_torchs(hung: Run) -> None:
    run = on_a_terminal("fr", "analyze", str(hung.folder))
    text = run.terminal.replace("\r\n", "\n")
    assert (f"the waiting ranks called it from _collective_3 at {WORKER}:{CALL_LINE}, from main at {WORKER}:"
            in text)
    assert "(+2 torch frames)" in text and "distributed_c10d.py" not in text and "c10d_logger" not in text
    assert f"rank 1 was at main at {WORKER}:" in text


def test_watchdog_lines_name_the_rank(hung: Run) -> None:
    for rank, output in enumerate(hung.outputs):
        lines = [line for line in output.splitlines() if "ncclx hang dump" in line]
        assert lines and all(line.startswith(f"ncclx hang dump (rank {rank}): ") for line in lines), output


def test_a_rank_without_a_dump_is_named(hung: Run, tmp_path: Path) -> None:
    folder = tmp_path / "dumps"
    folder.mkdir()
    shutil.copy(hung.folder / f"{PREFIX}0", folder)
    res = run_ncclx("fr", "analyze", str(folder))
    assert res.returncode == 1
    assert res.stdout.count("rank 1 left no dump") == 1, res.stdout  # named once, in its group
    assert f"to get a dump from every rank ({PREFIX}<rank> in {folder}), turn on the watchdog" in res.stdout
