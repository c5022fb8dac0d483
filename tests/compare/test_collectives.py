"""``ncclx compare`` on CPU: gloo against gloo must agree; a test backend registered through
torch's entry points (tests/compare/plugin, on the perturbed arm's PYTHONPATH only) wraps
gloo and injects one fault, which must be named."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from ncclx_migrate._torch.probe import installed_torch_version
from ncclx_migrate._torch.releases import release_of

from ..conftest import once, run_ncclx, torch_python

# Each run starts torch processes (one interpreter per arm).  They run on torch 2.15 only: the
# `torch` tests run again on 2.13 and 2.14 (scripts/test.sh), and the test backend needs
# torch's backend entry points (2.14+); what differs by release is the default arms, and the
# 2.13 test below covers the release without nccl2.
ON_215 = release_of(installed_torch_version() or "0.0") == "2.15"
HEAVY = [pytest.mark.slow, pytest.mark.torch,
         pytest.mark.skipif(not ON_215, reason="ncclx compare's gloo runs are tested on torch 2.15")]

PLUGIN = Path(__file__).parent / "plugin"
SRC = str(Path(__file__).resolve().parents[2] / "src")
# Small and cheap: two sizes, three timed iterations; one torch import per arm (the ranks fork).
FAST = ("--sizes", "64,4K", "--warmup", "1", "--iters", "3")


def _heavy(fn: Any) -> Any:
    for mark in HEAVY:
        fn = mark(fn)
    return fn


def perturbed(fault: str) -> str:
    return f"perturbed,PYTHONPATH={PLUGIN},NCCLX_PERTURB={fault}"


def compare(*args: str, timeout: float = 240) -> Any:
    return run_ncclx("compare", *args, env={"PYTHONPATH": SRC}, timeout=timeout)


@pytest.fixture(scope="module")
def parity(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """gloo against gloo, every collective and dtype, the text report and the page."""

    def make(folder: Path) -> dict[str, Any]:
        page = folder / "compare.html"
        # Timing is not what this run proves: on a shared machine one iteration can take 100x its
        # neighbours, so only a threshold no delay reaches leaves the run to correctness.
        proc = compare("--arm", "gloo", "--arm", "gloo", *FAST, "--threshold", "1000000000", "--html", str(page))
        return {"rc": proc.returncode, "out": proc.stdout, "err": proc.stderr, "page": str(page)}

    return once(tmp_path_factory, "compare-parity", make)[1]  # type: ignore[no-any-return]


@_heavy
def test_gloo_against_gloo_agrees(parity: dict[str, Any]) -> None:
    assert parity["rc"] == 0, parity["out"] + parity["err"]
    out = parity["out"]
    assert out.startswith("ncclx compare: 2 ranks on cpu, torch ")
    assert '  arm A (baseline): "gloo": built gloo' in out and '  arm B: "gloo": built gloo' in out
    for coll in ("all_reduce_sum", "all_reduce_max", "all_gather", "reduce_scatter", "all_to_all",
                 "broadcast", "sendrecv"):
        assert f"\n{coll}\n" in out
    rows = [line.split() for line in out.splitlines() if line.startswith(("  64B ", "  4K "))]
    assert len(rows) == 7 * 3 * 2, out  # collectives x dtypes x sizes, none skipped
    assert all(row[-1] == "ok" for row in rows), out
    assert "mismatch:" not in out and "hang:" not in out
    assert "result: the arms agree: 42 cases correct in both, no slowdown beyond 1000000000% demonstrated" in (
        " ".join(out.split()))
    assert max(len(line) for line in out.splitlines() if not line.startswith("  ")) <= 80  # wrapped as doctor wraps


def _json(*args: str, timeout: float = 240) -> tuple[int, dict[str, Any]]:
    proc = compare(*args, "--format", "json", timeout=timeout)
    assert proc.stdout.startswith("{"), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


@_heavy
def test_a_wrong_result_and_added_latency_are_named() -> None:
    """One run, two faults in arm B: rank 1's all_gather result at 4K is off by one, and every
    broadcast first sleeps 50 ms."""
    rc, report = _json("--arm", "gloo", "--arm", perturbed("wrong:all_gather:4096:1+slow:broadcast:0.05"),
                       "--sizes", "64,4K", "--warmup", "1", "--iters", "3", "--collectives", "all_gather,broadcast",
                       "--dtypes", "fp32,int32")
    assert rc == 1
    assert [(m["collective"], m["bytes"], m["dtype"], m["arm"], m["rank"]) for m in report["mismatches"]] == [
        ("all_gather", 4096, "fp32", "B", 1), ("all_gather", 4096, "int32", "B", 1)]
    assert report["verdict"].startswith("the arms disagree (2 mismatches, ")
    assert report["mismatch_text"][0].startswith(
        "all_gather 4K fp32: arm B, rank 1: wrong result: element 0 of 1024 is ")
    assert report["arms"][1]["built"] == "perturbed"
    slow = [g for g in report["regressions"] if g["collective"] == "broadcast"]
    assert [(g["bytes"], g["dtype"]) for g in slow] == [(64, "fp32"), (4096, "fp32"), (64, "int32"), (4096, "int32")]
    assert all(g["candidate_us"] > 50_000 > g["baseline_us"] for g in slow)
    assert report["improvements"] == []
    text = report["regression_text"][report["regressions"].index(slow[0])]
    low, _high = slow[0]["remeasured"]
    assert low > 0.05 and text.startswith(
        f"broadcast 64B fp32: B {slow[0]['candidate_us']:,.1f} us against A {slow[0]['baseline_us']:,.1f} us, +")
    assert text.endswith("wholly beyond the 5% threshold)") and "(measured again: +" in text
    # Every regression is named in the verdict, not only the first.
    assert report["verdict"].endswith("B slower than A beyond 5% in broadcast 64B fp32, broadcast 4K fp32, "
                                      "broadcast 64B int32, broadcast 4K int32")


@_heavy
def test_a_rank_that_hangs_is_killed_and_named_with_its_collective() -> None:
    rc, report = _json("--arm", "gloo", "--arm", perturbed("hang:all_gather:4096:1"), *FAST,
                       "--collectives", "all_gather", "--dtypes", "int32", "--timeout", "60", timeout=120)
    assert rc == 1
    assert report["arms"][1]["hung"] == {"1": "all_gather int32 4K"}
    assert report["problems"][0] == "arm B: rank 1 hung in all_gather int32 4K (killed at the --timeout deadline)"
    assert report["arms"][0]["hung"] == {}
    # The flight recorder was on (torch's default): every rank dumped, and fr analyze read the dumps.
    fr = report["arms"][1]["flight_recorder"]
    assert fr["folder"] == os.path.join(report["kept"], "B", "fr")
    assert "2 dumps from ranks 0 and 1" in fr["text"] and "never completed" in fr["text"]
    assert sorted(os.listdir(fr["folder"])) == ["rank_0", "rank_1"]  # kept as evidence
    shutil.rmtree(report["kept"])


@pytest.mark.parametrize(("args", "message"), [
    (("--arm", "gloo"), "--arm is given twice (baseline, then the other arm); got it 1 time"),
    (("--arm", "gloo", "--arm", "gloo,=1"), "--arm 'gloo,=1': '' is not an environment variable name"),
    (("--arm", "gloo", "--arm", "gloo,,X=1"), "--arm 'gloo,,X=1': empty item"),
    (("--arm", "gloo", "--arm", "gloo,nccl"), "'nccl' is neither the backend (it comes first) nor NAME=VALUE"),
    (("--steps", "3"), "--steps goes with --train"),
    (("--train",), "--train needs the training command after --"),
    (("--train", "--sizes", "1K", "--", "true"), "--sizes goes without --train"),
    (("--train", "--rounds", "10", "--", "true"), "--rounds goes without --train (a training run's paired rounds "
                                                   "are its steps: --steps sets how many)"),
    # A mistyped backend stops before any rank starts, with the names this torch knows.
    (("--arm", "foo", "--arm", "gloo"), "ncclx compare: error: --arm 'foo': 'foo' is not a backend this torch "
                                        "knows; known: fake, gloo, mpi, nccl, "),
    (("--train", "--arm", "gloo", "--arm", "glo", "--", "true"), "--arm 'glo': 'glo' is not a backend"),
    (("--device", "cpu", "--arm", "gloo", "--arm", "nccl2"),
     'arm B ("nccl2") needs a GPU, and the tensors are on cpu (--device cpu): compare it on a GPU node'),
])
def test_bad_arguments_get_one_line_and_exit_2(args: tuple[str, ...], message: str) -> None:
    proc = compare(*args)
    assert proc.returncode == 2 and proc.stdout == ""
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


@pytest.mark.parametrize(("args", "message"), [
    (("--sizes", "3Q"), "'3Q' is not a size like 8, 1K, 64K, 1M or 1G"),
    (("--threshold", "lots"), "'lots' is not a percentage like 5 or 5%"),
    (("--collectives", "all_reduce"), "all_reduce: not a collective; choose from all_reduce_sum, "),
])
def test_bad_option_values_are_usage_errors(args: tuple[str, ...], message: str) -> None:
    proc = compare("--arm", "gloo", "--arm", "gloo", *args)
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.torch
def test_torch_without_nccl2_has_nothing_to_compare() -> None:
    python = torch_python("2.13")
    proc = run_ncclx("compare", python=python, env={"PYTHONPATH": SRC})
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("ncclx compare: error: torch 2.13.0")
    assert "has no nccl2 backend" in proc.stderr and "name two arms with --arm A --arm B" in proc.stderr


@_heavy
def test_default_arms_need_a_gpu_and_say_so() -> None:
    """torch 2.15 here: the default arms ("nccl" with and without the rollback) need a GPU."""
    proc = compare()
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip() == (
        'ncclx compare: error: no GPU is visible here, and the default arms ("nccl" and its rollback) need one: '
        "run on a GPU node, or check the harness with --arm gloo --arm gloo")


@_heavy
def test_an_arm_whose_ranks_cannot_start_stops_the_run() -> None:
    """mpi is a name torch knows, but this wheel is built without it: torch's own error, per
    rank, exit 2, and no round is run in arm B (no sweep, no rows of "not run")."""
    proc = compare("--arm", "mpi", "--arm", "gloo", "--sizes", "1K,4K", "--warmup", "0", "--iters", "1")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    out = proc.stdout
    assert '  arm A (baseline): "mpi": built nothing' in out
    assert ": not run" not in out and "\nall_reduce_sum\n" not in out
    text = " ".join(out.split())  # the lines are wrapped to 80 columns
    assert "arm A: rank 1 could not start: RuntimeError: Distributed package doesn't have MPI built in" in text
    assert "result: could not run: arm A (\"mpi\"): rank 0: RuntimeError: Distributed package doesn't have MPI " in text
