"""What a new user reads first (issue 19): one spelling of machine output, each fact said once,
and on a node without a GPU which backend was judged and how to judge the GPU job."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

from tests.conftest import on_a_terminal, run_ncclx

from .conftest import check, doctor, doctor_json

NO_GPU = {"CUDA_VISIBLE_DEVICES": ""}  # a login node: no device, whatever this machine has


def test_a_login_node_says_what_it_judged_and_says_no_gpu_once() -> None:
    run = on_a_terminal("doctor", "--level", "static", env={**NO_GPU, "NO_COLOR": "1", "COLUMNS": "100"})
    text = run.terminal.replace("\r\n", "\n")
    lines = text.splitlines()
    assert lines[0].startswith("ncclx doctor: level static")
    assert " ".join(lines[1:3]).startswith(
        "judged as a gloo job: this node has no GPU (see gpu-binding); judge the GPU job with --backend nccl")
    assert text.count("no GPU visible") == 1  # gpu-binding's; the others refer to it
    gpu = next(i for i, line in enumerate(lines) if line.split()[1:2] == ["gpu-binding"])
    assert "no GPU visible (CUDA_VISIBLE_DEVICES='')" in lines[gpu + 1]
    # the header says it once: flight-recorder and fast-reconfigure do not repeat it
    assert text.count("see gpu-binding") == 1 and "no GPU here" not in text
    assert re.search(r"ok +fast-reconfigure +gloo: reconfigure works", text)
    # judged as the header says: gloo only for want of a GPU, so gloo's hang dumps are no warning
    fr = next(line for line in lines if line.split()[1:2] == ["flight-recorder"])
    assert fr.split()[0] == "ok" and "never dumps on a hang" not in text
    assert "how a hang is dumped depends on the GPU job's backend (judge it with --backend nccl)" in " ".join(
        text.split())
    # nccl-resolution speaks of the NCCL job only: no gloo advice mixed into it.
    res = next(line for line in lines if line.split()[1:2] == ["nccl-resolution"])
    assert res.split()[0] == "ok" and "gloo" not in res
    assert not re.search(r"\b0 (ok|warn|fail|skip|error)\b", lines[-1]), lines[-1]  # no zero counts


def test_backend_nccl_judges_the_gpu_job_on_a_login_node() -> None:
    report = doctor_json("--level", "static", "--backend", "nccl", env=NO_GPU)
    assert report["backend"]["judged"] in ("nccl2", "nccl-legacy")
    assert report["backend"]["why"].startswith("--backend nccl")
    gpu = check(report, "gpu-binding")
    assert gpu["status"] == "warn"
    assert "the other checks judge it as it will run on a GPU node" in gpu["message"]
    fr = check(report, "flight-recorder")
    assert fr["details"]["backend"] == report["backend"]["judged"]
    assert "gloo" not in fr["message"] and "NCCLX_HANG_DUMP" not in fr["remedy"]  # gloo advice stays out
    messages = " ".join(c["message"] for c in report["checks"])
    assert messages.count("no GPU visible") == 1


def test_target_torch_216_every_check_speaks_of_216() -> None:
    env = {**NO_GPU, "TORCH_DIST_USE_NCCL2": "0"}
    report = doctor_json("--level", "static", "--backend", "nccl", "--target-torch", "2.16", env=env, expect_rc=1)
    assert check(report, "legacy-toggle")["status"] == "fail"  # the toggle is ignored on 2.16 ...
    res = check(report, "nccl-resolution")
    assert res["details"]["implementation"] == "nccl2" and "torch 2.16" in res["message"]
    # ... so the flight recorder and reconfigure are those of nccl2, not the legacy path.
    fr = check(report, "flight-recorder")
    assert fr["details"]["backend"] == "nccl2" and "legacy" not in fr["message"]
    assert check(report, "fast-reconfigure")["details"]["backend"] == "nccl2"
    assert "judged for torch 2.16: nccl2 is the only" in check(report, "torch-version")["message"]


def test_format_json_is_the_spelling_and_json_an_alias(tmp_path: Path) -> None:
    spelled = doctor("--level", "static", "--check", "torch-version", "--format", "json")
    alias = doctor("--level", "static", "--check", "torch-version", "--json")
    assert json.loads(spelled.stdout)["schema"] == json.loads(alias.stdout)["schema"] == "ncclx.doctor/1"
    helped = doctor("--help").stdout
    assert "--format [text|json]" in helped and "(--json is" in helped
    assert not re.search(r"^\s+--json\b", helped, re.M)  # the alias has no line of its own
    both = doctor("--level", "static", "--json", "--format", "text")
    assert both.returncode == 2 and both.stdout == ""
    assert "--json is --format json; it contradicts --format text" in both.stderr
    (tmp_path / "a.json").write_text(spelled.stdout)
    merged = run_ncclx("doctor", "merge", str(tmp_path / "a.json"), "--format", "json")
    assert json.loads(merged.stdout)["level"] == "merge"
    assert "--format [text|json]" in run_ncclx("fr", "analyze", "--help").stdout


def _fleet(base: dict[str, Any], tmp_path: Path) -> list[str]:
    """Four ranks of one report; rank 3 differs in three facts cluster-consistency compares."""
    paths = []
    for rank in range(4):
        report = copy.deepcopy(base)
        report["rank"] = rank
        if rank == 3:
            check(report, "legacy-toggle")["details"]["value"] = "0"
            check(report, "nccl-resolution")["details"]["implementation"] = "nccl-legacy"
            check(report, "flight-recorder")["details"]["buffer_size"] = 5000
        path = tmp_path / f"rank{rank}.json"
        path.write_text(json.dumps(report))
        paths.append(str(path))
    return paths


def test_merge_says_each_fact_once(tmp_path: Path) -> None:
    env = {**NO_GPU, "TORCH_FR_BUFFER_SIZE": "0", "TORCH_FR_DUMP_DYNAMIC_FILE_NAME": "1"}
    base = doctor_json("--level", "static", env=env)
    text = run_ncclx("doctor", "merge", *_fleet(base, tmp_path), env={"COLUMNS": "100"}).stdout
    # the header (level, host, torch; then what the reports were judged as), then the checks
    assert text.splitlines()[1].startswith("judged as a gloo job: this node has no GPU")
    blocks = re.split(r"\n(?=  (?:ok|warn|FAIL|skip|ERROR) )", text.split("\n", 2)[2].rsplit("\n", 1)[0])
    cluster = next(b for b in blocks if "cluster-consistency" in b.split("\n")[0])
    assert cluster.count("        - rank 3") == 3
    assert cluster.count("fix:") == 1  # one fix for the three differences, not one per line
    for block in blocks:  # every check that is the same on all ranks says so
        if "cluster-consistency" not in block.split("\n")[0]:
            assert "(all 4 ranks)" in re.sub(r"\s+", " ", block), block
    assert not re.search(r"\b0 (ok|warn|fail|skip|error)\b", text.splitlines()[-1])


def test_merge_reads_reports_with_and_without_the_judged_backend(tmp_path: Path) -> None:
    report = doctor_json("--level", "static", "--check", "torch-version")
    old = {k: v for k, v in report.items() if k not in ("backend", "_rc")}  # saved before it existed
    (tmp_path / "new.json").write_text(json.dumps({k: v for k, v in report.items() if k != "_rc"}))
    (tmp_path / "old.json").write_text(json.dumps(old))
    merged = run_ncclx("doctor", "merge", str(tmp_path / "new.json"), str(tmp_path / "old.json"), "--format", "json")
    assert merged.returncode == 0 and json.loads(merged.stdout)["backend"] is None
    (tmp_path / "bad.json").write_text(json.dumps({**old, "backend": 5}))
    bad = run_ncclx("doctor", "merge", str(tmp_path / "bad.json"))
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert '"backend" is 5, expected {"judged": NAME, "why": TEXT} or null' in bad.stderr
