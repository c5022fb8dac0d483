"""`ncclx fr analyze` on dumps from real gloo runs (each rank dumps through torch's API,
as torch 2.15.0 writes them), and agreement with torch's torchfrtrace."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ..conftest import run_ncclx
from .scenarios import PREFIX
from .torchfrtrace import Verdict, torchfrtrace_runs

pytestmark = [pytest.mark.torch, pytest.mark.slow]


def _analyze(folder: Path, *extra: str) -> tuple[int, str, str]:
    res = run_ncclx("fr", "analyze", str(folder), *extra)
    return res.returncode, res.stdout, res.stderr


def _group(report: dict, name: str = "default_pg") -> dict:
    return next(g for g in report["groups"] if g["group"] == name)


def test_skipped_collective_names_the_rank_that_never_entered(scenario) -> None:
    run = scenario("skip", world=4, culprit=2)
    assert run.files() == [f"{PREFIX}{r}" for r in range(4)], run.outputs
    code, out, err = _analyze(run.folder)
    assert code == 1, err
    assert "rank 2 never entered all_reduce #3 of group default_pg; ranks 0, 1 and 3 waited" in out
    assert "repaired: pg_config keyed ''" in out  # the gloo defect, fixed on the fly
    assert "verdict: culprit rank 2" in out


def test_skipped_collective_json(scenario) -> None:
    run = scenario("skip", world=4, culprit=2)
    code, out, _ = _analyze(run.folder, "--json")
    assert code == 1
    report = json.loads(out)
    assert report["schema"] == "ncclx.fr/1"
    g = _group(report)
    assert g["ranks"] == [0, 1, 2, 3]
    assert g["first_incomplete"]["seq"] == 3
    assert g["first_incomplete"]["op"] == "all_reduce"
    assert g["first_incomplete"]["missing_ranks"] == [2]
    assert g["culprit_ranks"] == [2]
    assert g["last_completed"]["2"] == 2
    assert report["missing_dumps"] == []


def test_json_dumps_give_the_same_verdict(scenario) -> None:
    run = scenario("skip", world=3, culprit=1, mode="manual-json")
    assert (run.folder / f"{PREFIX}0").read_bytes().startswith(b"{")
    code, out, _ = _analyze(run.folder, "--json")
    assert code == 1
    report = json.loads(out)
    assert {d["format"] for d in report["dumps"]} == {"json"}
    g = _group(report)
    assert g["first_incomplete"]["missing_ranks"] == [1]
    assert g["first_incomplete"]["entered_ranks"] == [0, 2]


def test_type_mismatch_names_the_culprit(scenario) -> None:
    run = scenario("type", world=3, culprit=1)
    code, out, _ = _analyze(run.folder)
    assert code == 1
    assert "rank 1 called broadcast as collective #3 of group default_pg where the other ranks called all_reduce" in out
    report = json.loads(_analyze(run.folder, "--json")[1])
    g = _group(report)
    assert g["mismatches"][0]["field"] == "op"
    assert g["mismatches"][0]["culprit_ranks"] == [1]
    assert g["culprit_ranks"] == [1]


def test_exited_rank_is_reported_as_missing_dump(scenario) -> None:
    run = scenario("exit", world=3, culprit=2)
    assert f"{PREFIX}2" not in run.files()
    code, out, _ = _analyze(run.folder)
    assert code == 1
    assert "rank 2 left no dump (it may have exited or crashed)" in out
    report = json.loads(_analyze(run.folder, "--json")[1])
    assert report["missing_dumps"] == [2]
    assert _group(report)["culprit_ranks"] == [2]


def test_healthy_run_exits_zero(scenario) -> None:
    run = scenario("ok", world=3)
    code, out, _ = _analyze(run.folder)
    assert code == 0, out
    assert "verdict: no hang or mismatch found" in out


def test_torch_alone_leaves_no_dump_for_gloo(scenario) -> None:
    """gloo never dumps on a timeout by itself, whatever TORCH_FR_DUMP_ON_TIMEOUT says."""
    run = scenario("skip", world=3, culprit=1, mode="none", TORCH_FR_DUMP_ON_TIMEOUT="1")
    assert any("collective #3 raised" in o for o in run.outputs), run.outputs
    assert run.files() == []
    xdg = run.folder.parent / "xdg"
    assert not xdg.exists() or not any(xdg.rglob("*"))
    res = run_ncclx("fr", "analyze", str(run.folder))
    assert res.returncode == 2
    assert "empty folder" in res.stderr


# --- torchfrtrace agrees on the repaired dumps --------------------------------------------


def _repaired(run, out: Path) -> Path:
    res = run_ncclx("fr", "repair", str(run.folder), str(out))
    assert res.returncode == 0, res.stderr
    return out


@pytest.fixture(scope="module")
def torchs(scenario, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Verdict]:
    """torchfrtrace's verdicts for the tests below, torch imported once for them all."""
    tmp = tmp_path_factory.mktemp("torchfrtrace")
    skip = scenario("skip", world=4, culprit=2)
    type_ = scenario("type", world=3, culprit=1)
    exit_ = scenario("exit", world=3, culprit=2)
    runs = {
        "raw skip": (skip.folder, "-p", PREFIX),
        "skip": (_repaired(skip, tmp / "skip"), "-p", PREFIX),
        "type": (_repaired(type_, tmp / "type"), "-p", PREFIX),
        "exit strict": (_repaired(exit_, tmp / "exit"), "-p", PREFIX),
        "exit": (tmp / "exit", "-p", PREFIX, "--allow-incomplete-ranks"),
    }
    return dict(zip(runs, torchfrtrace_runs(list(runs.values())), strict=True))


def test_torchfrtrace_crashes_on_raw_gloo_dumps(torchs) -> None:
    """The gloo pg_config defect; the reason `ncclx fr repair` exists."""
    verdict = torchs["raw skip"]
    assert "KeyError: ('0', 0)" in verdict.output


def test_torchfrtrace_agrees_on_skipped_collective(scenario, torchs) -> None:
    run = scenario("skip", world=4, culprit=2)
    ours = _group(json.loads(_analyze(run.folder, "--json")[1]))
    verdict = torchs["skip"]
    assert "Not all ranks joining collective, sequence number: 3" in verdict.output, verdict.output
    assert verdict.missing_ranks == set(ours["first_incomplete"]["missing_ranks"]) == {2}


def test_torchfrtrace_agrees_on_type_mismatch(scenario, torchs) -> None:
    run = scenario("type", world=3, culprit=1)
    ours = _group(json.loads(_analyze(run.folder, "--json")[1]))
    verdict = torchs["type"]
    assert "COLLECTIVE_TYPE_MISMATCH" in verdict.output, verdict.output
    assert verdict.culprit_ranks == set(ours["culprit_ranks"]) == {1}


def test_torchfrtrace_agrees_on_exited_rank(scenario, torchs) -> None:
    run = scenario("exit", world=3, culprit=2)
    report = json.loads(_analyze(run.folder, "--json")[1])
    strict = torchs["exit strict"]
    assert "Missing dump files from ranks {2}" in strict.output, strict.output
    verdict = torchs["exit"]
    assert verdict.undecided_no_dump == set(report["missing_dumps"]) == {2}
