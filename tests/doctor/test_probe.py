"""The probe level: a real process group on this node (gloo here; NCCL on a GPU machine)."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import check, doctor_json

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

pytestmark = [pytest.mark.torch, pytest.mark.slow]
MINOR = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2])


def test_gloo_probe_runs_the_suite_checks_results_and_the_flight_recorder() -> None:
    report = doctor_json("--level", "probe", "--check", "probe", "--timeout", "60",
                         env={"CUDA_VISIBLE_DEVICES": ""})
    probe = check(report, "probe")
    assert probe["status"] == "ok", probe
    assert probe["details"]["backend"] == "gloo"
    assert probe["details"]["world_size"] == 2
    ranks = probe["details"]["ranks"]
    assert set(ranks) == {"0", "1"}
    for r in ranks.values():
        assert r["ops"]["all_reduce"] == "ok"
        assert r["ops"]["send_recv"] == "ok"
    fr = ranks["0"]["fr"]
    assert fr["recorder"] == "gloo"
    assert {"all_reduce", "broadcast", "all_gather"} <= set(fr["ops"])
    assert "correct in" in probe["message"]
    if MINOR >= (2, 14):
        rc = ranks["0"]["reconfigure"]
        assert rc["supported"] is True and rc["result_ok"] is True
        assert "reconfigure" in probe["message"] and "destroy+re-init" in probe["message"]
    else:
        assert "no reconfigure" in probe["message"]


def test_probe_ranks_are_not_stopped_by_import_time_warnings() -> None:
    # The probe's ranks are ncclx's own processes: NCCLX_WARNINGS=error (a CI setting) with a
    # legacy toggle set must not turn their `import ncclx_migrate` into an exception.
    report = doctor_json("--level", "probe", "--check", "probe", "--timeout", "60",
                         env={"CUDA_VISIBLE_DEVICES": "", "NCCLX_WARNINGS": "error",
                              "TORCH_NCCL_ENABLE_MONITORING": "1"})
    assert check(report, "probe")["status"] == "ok", check(report, "probe")


def test_probe_with_the_flight_recorder_off_says_so() -> None:
    report = doctor_json("--level", "probe", "--check", "probe", "--check", "flight-recorder", "--timeout", "60",
                         env={"CUDA_VISIBLE_DEVICES": "", "TORCH_FR_BUFFER_SIZE": "0"})
    probe = check(report, "probe")
    assert probe["status"] == "ok"
    assert "flight recorder off" in probe["message"]
    assert probe["details"]["ranks"]["0"]["fr"]["entries"] == 0


def test_a_rank_that_aborts_or_hangs_is_a_failure_saying_how() -> None:
    # A non-integer buffer size makes torch's init_process_group abort (SIGABRT) or hang,
    # on 2.13 and 2.15 alike: either way the probe reports it and returns within --timeout.
    # The rank that aborts leaves its peer waiting out --timeout: keep it short.
    report = doctor_json("--level", "probe", "--check", "probe", "--timeout", "8",
                         env={"CUDA_VISIBLE_DEVICES": "", "TORCH_FR_BUFFER_SIZE": "abc"}, expect_rc=1)
    probe = check(report, "probe")
    assert probe["status"] == "fail"
    assert "killed by SIGABRT" in probe["message"] or "did not finish within 8s (killed)" in probe["message"]


@pytest.mark.skipif(not dist.is_nccl_available() or MINOR < (2, 15), reason="needs a 2.15 build with NCCL")
def test_nccl_probe_without_a_gpu_fails_with_torchs_own_error(nccl_probe_without_a_gpu: dict[str, Any]) -> None:
    probe = check(nccl_probe_without_a_gpu, "probe")
    assert probe["status"] == "fail"
    assert "nccl2 requires at least one CUDA device" in probe["message"]


@pytest.mark.gpu
def test_nccl_probe_on_one_gpu() -> None:
    report = doctor_json("--level", "probe", "--check", "probe", "--check", "nccl-version", "--timeout", "120",
                         env={"CUDA_VISIBLE_DEVICES": "0"})
    probe = check(report, "probe")
    assert probe["details"]["backend"] == "nccl"
    assert probe["details"]["world_size"] == 1
    assert probe["details"]["implementation"] in ("nccl2", "nccl", "nccl-lazy"), probe
    ops = probe["details"]["ranks"]["0"]["ops"]
    assert all(v == "ok" for k, v in ops.items() if k != "reduce_scatter"), ops
    # ok, or a warning about the flight recorder / reconfigure on this torch; never a failure.
    assert probe["status"] in ("ok", "warn"), probe
    assert check(report, "nccl-version")["status"] in ("ok", "warn")
