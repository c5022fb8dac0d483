"""``ncclx compare``'s timing verdict on a busy node: identical arms beside a CPU-burning
neighbour name nothing; a real, steady slowdown of one arm (the test backend spins on the CPU
in proportion to each call) is named, never as an improvement; a run that could not have seen
a slowdown says so instead of agreeing, and --require-sensitivity fails it."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from .test_collectives import PLUGIN, _heavy, compare


@pytest.fixture
def neighbour() -> Iterator[None]:
    """One process that burns a CPU for the whole test, as a neighbour's job on a shared node."""
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield
    finally:
        proc.kill()
        proc.wait()


def _report(*args: str) -> tuple[int, dict[str, Any]]:
    proc = compare(*args, "--format", "json", timeout=400)
    assert proc.stdout.startswith("{"), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def _arm(fault: str = "") -> str:
    """The test backend on both arms (so its Python wrapper costs both alike), one fault or none."""
    return f"perturbed,PYTHONPATH={PLUGIN}" + (f",NCCLX_PERTURB={fault}" if fault else "")


SMALL = ("--sizes", "1K,64K", "--dtypes", "fp32", "--warmup", "1")


@_heavy
@pytest.mark.usefixtures("neighbour")
def test_identical_arms_beside_a_busy_neighbour_name_nothing() -> None:
    for _ in range(3):
        rc, report = _report("--arm", "gloo", "--arm", "gloo", *SMALL,
                             "--collectives", "all_reduce_sum,all_gather,broadcast")
        assert (rc, report["regressions"], report["improvements"]) == (0, [], []), report["verdict"]
        assert report["verdict"].startswith("the arms agree: 6 cases correct in both, no slowdown beyond 5% "
                                            "demonstrated")
        assert [x["collective"] for x in report["sensitivity"]] == ["all_reduce_sum", "all_gather", "broadcast"]


@_heavy
@pytest.mark.usefixtures("neighbour")
def test_a_steady_slowdown_of_one_arm_is_named_and_never_as_an_improvement() -> None:
    rc, report = _report("--arm", _arm(), "--arm", _arm("slower:all_reduce_sum:8"),
                         "--sizes", "1K,16K,64K", "--dtypes", "fp32,int32", "--warmup", "1",
                         "--collectives", "all_reduce_sum,broadcast")
    slowed = [g for g in report["regressions"] if g["collective"] == "all_reduce_sum"]
    assert rc == 1 and len(slowed) >= 4, report["verdict"]  # most of its 6 cases
    assert report["improvements"] == []
    assert all(g["remeasured"][0] > 0.05 for g in slowed)  # the interval that decided it
    assert report["verdict"].startswith(f"the arms disagree (0 mismatches, {len(report['regressions'])} regression")


@_heavy
def test_a_run_too_short_to_see_a_slowdown_says_so_and_can_fail() -> None:
    """Four rounds cannot show anything at a 5% false-alarm rate (all four beyond the threshold
    happens 1 time in 8 by chance): a real 30% slowdown is reported as undetectable, not as
    agreement, and --require-sensitivity turns that into exit 3."""
    args = ("--arm", _arm(), "--arm", _arm("slower:all_reduce_sum:1.3"), *SMALL, "--collectives",
            "all_reduce_sum", "--rounds", "4", "--iters", "8")
    rc, report = _report(*args)
    assert (rc, report["regressions"]) == (0, [])
    assert report["sensitivity"] == [{"collective": "all_reduce_sum", "cases": 2, "detectable": None, "rounds": 4}]
    assert report["verdict"] == ("the arms agree: 2 cases correct in both, no slowdown beyond 5% demonstrated; "
                                 "could not detect a slowdown of any size in all_reduce_sum with 4 rounds "
                                 "(raise --rounds)")
    proc = compare(*args, "--require-sensitivity", "50", timeout=400)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert " ".join(proc.stdout.split()).endswith(
        "result: not sensitive enough for --require-sensitivity 50%: could not detect a slowdown of any size in "
        "all_reduce_sum with 4 rounds (raise --rounds) (2 cases correct in both)")
