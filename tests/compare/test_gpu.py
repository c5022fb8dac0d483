"""``ncclx compare`` on real CUDA tensors: "nccl" against gloo, to prove the harness on a GPU,
and "nccl" against "nccl" interleaved (both arms' ranks on the same GPUs, CUDA-event timing):
identical arms must name nothing.

Unrun so far (no GPU was lent when it was written): scripts/gpu-tests.sh runs it; the result
goes in docs/gpu-runs.md.  The lent GPU machine's torch has no nccl2, so the arms are named:
the nccl2-against-legacy run is the user's first step on a 2.15 cluster (docs/compare.md)."""

from __future__ import annotations

import json

import pytest

from .test_collectives import compare

pytestmark = [pytest.mark.gpu, pytest.mark.slow, pytest.mark.torch]


def test_nccl_against_gloo_on_cuda_tensors() -> None:
    proc = compare("--device", "cuda", "--arm", "gloo", "--arm", "nccl", "--sizes", "1K,1M", "--warmup", "2",
                   "--iters", "5", "--collectives", "all_reduce_sum,all_reduce_max,broadcast,all_gather",
                   "--threshold", "1000000000", "--format", "json", timeout=600)
    report = json.loads(proc.stdout)
    assert proc.returncode in (0, 1), report["verdict"]  # 1: an op gloo lacks on CUDA tensors
    assert report["device"] == "cuda"
    assert report["arms"][0]["built"] == "gloo" and report["arms"][1]["built"] in ("nccl", "nccl2")
    sums = [row for row in report["rows"] if row["collective"] == "all_reduce_sum" and "skip" not in row]
    assert sums and all(a["check"] == "ok" and a["median_us"] > 0 for row in sums for a in row["arms"])
    assert not [m for m in report["mismatches"] if m["arm"] == "B"], report["mismatch_text"]


def test_nccl_against_nccl_interleaved_names_nothing() -> None:
    """Both arms alive on the same GPUs, taking turns in blocks: A/A agrees and names nothing,
    every case was timed in every round, and the detectable slowdown is stated."""
    proc = compare("--device", "cuda", "--arm", "nccl", "--arm", "nccl", "--sizes", "1K,1M,64M",
                   "--collectives", "all_reduce_sum,all_gather,broadcast", "--dtypes", "fp32,bf16",
                   "--format", "json", timeout=600)
    report = json.loads(proc.stdout)
    assert proc.returncode == 0, report["verdict"]
    assert (report["regressions"], report["improvements"], report["mismatches"]) == ([], [], [])
    timed = [row for row in report["rows"] if "skip" not in row]
    assert len(timed) == 18 and all(row["rounds"] == 20 for row in timed)
    assert all(a["blocks"] >= 20 and a["median_us"] > 0 for row in timed for a in row["arms"])
    assert [x["collective"] for x in report["sensitivity"]] == ["all_reduce_sum", "all_gather", "broadcast"]
