"""`ncclx doctor` with hostile options, reports and launchers (issue 9)."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ncclx_exe

from .conftest import env, run_bounded, signals_at_default


def _report(**override: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "schema": "ncclx.doctor/1", "level": "local", "host": "node-a", "rank": None, "torch": "2.15.0",
        "summary": {}, "checks": [{"id": "env-vars", "status": "ok", "message": "fine", "remedy": "",
                                   "details": {"nccl_env": {}}}],
    }
    doc.update(override)
    return doc


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def test_timeout_above_a_sane_maximum_is_a_usage_error() -> None:
    for value in ("1e10", "86401", "nan", "-1"):
        proc = run_bounded("doctor", "--level", "static", "--timeout", value)
        assert proc.returncode == 2, (value, proc.stdout)
        assert "--timeout" in proc.stderr and "Traceback" not in proc.stderr
    assert run_bounded("doctor", "--level", "static", "--check", "env-vars", "--timeout", "3600").returncode == 0


BAD_REPORTS = {
    "rank_infinity.json": json.dumps(_report()).replace('"rank": null', '"rank": Infinity'),
    "rank_huge.json": json.dumps(_report(rank=10**400)),
    "rank_bool.json": json.dumps(_report(rank=True)),
    "torch_dict.json": json.dumps(_report(torch={"version": "2.15.0"})),
    "host_list.json": json.dumps(_report(host=["a"])),
    "checks_dict.json": json.dumps(_report(checks={"id": "x"})),
    "check_string.json": json.dumps(_report(checks=["env-vars"])),
    "details_list.json": json.dumps(_report(checks=[{"id": "env-vars", "status": "ok", "details": [1]}])),
    "details_deep.json": json.dumps(_report()).replace('"nccl_env": {}', '"nccl_env": ' + _nested(500)),
    "json_deep.json": _nested(100_000),
    "message_number.json": json.dumps(_report(checks=[{"id": "env-vars", "status": "ok", "message": 1e999}])),
}


@pytest.mark.parametrize("name", sorted(BAD_REPORTS))
def test_merge_validates_types_and_depth_naming_the_file(tmp_path: Path, name: str) -> None:
    good = tmp_path / "good.json"
    good.write_text(json.dumps(_report()))
    bad = tmp_path / name
    bad.write_text(BAD_REPORTS[name])
    proc = run_bounded("doctor", "merge", str(good), str(bad))
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    assert name in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and name in errors[0], proc.stderr


def test_merge_accepts_a_report_written_by_doctor(tmp_path: Path) -> None:
    one = run_bounded("doctor", "--level", "static", "--json")
    for n in range(2):
        (tmp_path / f"r{n}.json").write_text(one.stdout)
    proc = run_bounded("doctor", "merge", str(tmp_path / "r0.json"), str(tmp_path / "r1.json"), "--json")
    assert proc.returncode in (0, 1) and json.loads(proc.stdout)["level"] == "merge"


def test_relative_xdg_cache_home_names_the_directory(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    proc = run_bounded("doctor", "--level", "static", "--check", "flight-recorder", "--json",
                       cwd=tmp_path / "work", extra_env={"XDG_CACHE_HOME": "rel/cache"})
    fr = json.loads(proc.stdout)["checks"][0]
    assert "directory  " not in fr["message"]
    assert "is not writable" not in fr["message"], fr["message"]
    assert fr["details"]["dump_prefix"] == "rel/cache/torch/comm_lib_trace_rank_"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.torch
@pytest.mark.slow
def test_sigterm_mid_gather_prints_what_rank_0_has(tmp_path: Path) -> None:
    """rank 0 waits for ranks 1 and 2; rank 1 sends garbage, rank 2 never comes; the launcher
    stops rank 0 with SIGTERM: it prints the report it has, naming both, and exits 1."""
    from datetime import timedelta

    import torch.distributed as dist

    port = _free_port()
    rank0 = subprocess.Popen(
        [ncclx_exe(), "doctor", "--level", "cluster", "--json", "--timeout", "300"],
        env=env(RANK="0", WORLD_SIZE="3", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), SLURM_JOB_ID="77"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=signals_at_default(signal.SIGTERM, limit=False),
    )
    try:
        store = dist.TCPStore("127.0.0.1", port, 3, is_master=False, timeout=timedelta(seconds=120))
        prefixed = dist.PrefixStore("ncclx-doctor/77/0", store)
        # What ncclx_migrate._doctor._cluster.publish does, with a report nested 10,000 deep.
        prefixed.set("report/1", json.dumps(_report(rank=1)).replace('"nccl_env": {}',
                                                                       '"nccl_env": ' + _nested(10_000)))
        prefixed.append("arrived", f"1:{time.time()!r},")
        prefixed.add("arrived_n", 1)
        deadline = time.monotonic() + 60
        while not prefixed.check(["report/0"]) and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1.0)  # rank 0 is in its gather loop
        rank0.send_signal(signal.SIGTERM)
        out, err = rank0.communicate(timeout=60)
    finally:
        rank0.kill()
    assert rank0.returncode == 1, err
    assert "Traceback" not in err
    cc = next(c for c in json.loads(out)["checks"] if c["id"] == "cluster-consistency")
    assert cc["status"] == "fail"
    assert cc["details"]["missing_ranks"] == [2]
    assert "stopped (SIGTERM)" in cc["message"]
    assert "rank 2 did not report" in cc["message"]
    assert "rank 1 (" in cc["message"] and "nested" in cc["message"]


@pytest.mark.torch
@pytest.mark.slow
def test_torchrun_stops_rank_0_when_a_rank_dies_and_the_report_names_it(tmp_path: Path) -> None:
    wrapper = tmp_path / "rank.sh"
    wrapper.write_text(
        "#!/bin/sh\n"
        'if [ "$RANK" = "1" ]; then sleep 2; exit 3; fi\n'  # dies before it reports
        f'exec {ncclx_exe()} doctor --level cluster --json --timeout 300\n'
    )
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-addr", "127.0.0.1",
         "--master-port", str(_free_port()), "--no-python", "sh", str(wrapper)],
        capture_output=True, text=True, env=env(), timeout=240,
    )
    assert proc.returncode != 0
    report = json.loads(proc.stdout)  # rank 0 alone writes stdout: its report, though it was stopped
    cc = next(c for c in report["checks"] if c["id"] == "cluster-consistency")
    assert cc["details"]["missing_ranks"] == [1]
    assert "stopped (SIGTERM)" in cc["message"]
