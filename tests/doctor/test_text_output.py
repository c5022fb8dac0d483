"""The doctor's text output as a user reads it: widths, progress on a terminal, remedies, and
the mistakes that must not pass silently (issue 10), plus the cluster report at scale (issue 11)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ncclx_exe, on_a_terminal

from .conftest import check, doctor, doctor_json

MARK = re.compile(r"  (ok|warn|FAIL|skip|ERROR) +([a-z-]+)( |$)")


def as_seen(raw: str) -> list[str]:
    """What a terminal shows at the end: each line after its last carriage return, no escapes."""
    plain = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", raw).replace("\r\n", "\n")
    return [line.rsplit("\r", 1)[-1].rstrip() for line in plain.split("\n") if line.rsplit("\r", 1)[-1].strip()]


def _long_lines(text: str, width: int) -> list[str]:
    # A single token longer than the width (a library path) cannot be wrapped; nothing else may be long.
    return [line for line in text.splitlines() if len(line) > width and len(line.split()) > 1]


@pytest.mark.parametrize("columns", ["60", "100"])
def test_text_wraps_to_columns(columns: str) -> None:
    env = {"COLUMNS": columns, "TORCH_FR_BUFFER_SIZE": "0", "TORCH_NCCL_BLOCKING_WAIT": "1",
           "TORCH_FR_DUMP_DYNAMIC_FILE_NAME": "1", "CUDA_VISIBLE_DEVICES": ""}
    proc = doctor("--level", "static", env=env)
    assert not _long_lines(proc.stdout, int(columns)), proc.stdout
    assert "fix: " in proc.stdout


def test_text_is_80_columns_when_the_width_is_unknown() -> None:
    env = {"TORCH_FR_BUFFER_SIZE": "0", "TORCH_FR_DUMP_DYNAMIC_FILE_NAME": "1", "CUDA_VISIBLE_DEVICES": ""}
    proc = subprocess.run([ncclx_exe(), "doctor", "--level", "static"], capture_output=True, text=True,
                          env={**{k: v for k, v in os.environ.items() if k != "COLUMNS"}, "NO_COLOR": "1", **env})
    assert not _long_lines(proc.stdout, 80), proc.stdout
    assert max(len(line) for line in proc.stdout.splitlines() if len(line.split()) > 1) > 60  # it does use them


def test_one_bullet_per_problem_each_with_its_fix_under_it() -> None:
    env = {"COLUMNS": "100", "TORCH_FR_BUFFER_SIZE": "0", "TORCH_FR_DUMP_DYNAMIC_FILE_NAME": "1",
           "TORCH_FR_DUMP_TEMP_FILE": "/nonexistent-ncclx-dir/x_"}
    lines = doctor("--level", "static", "--check", "flight-recorder", env=env).stdout.splitlines()
    lines = lines[next(i for i, line in enumerate(lines) if MARK.match(line)) - 1:]  # past the header
    assert MARK.match(lines[1]) and lines[1].split()[:2] == ["FAIL", "flight-recorder"]
    bullets = [i for i, line in enumerate(lines) if line.startswith("        - ")]
    assert len(bullets) == 3
    for i in bullets:
        block = lines[i + 1:next((j for j in bullets if j > i), len(lines) - 1)]
        assert any(b.startswith("          fix: ") for b in block), lines
    text = "\n".join(lines)
    assert "- dump directory /nonexistent-ncclx-dir (TORCH_FR_DUMP_TEMP_FILE) does not exist" in text
    assert text.index("does not exist") < text.index("disables the flight recorder")  # failures first


@pytest.mark.slow
def test_on_a_terminal_the_probe_says_what_it_is_doing_and_checks_print_as_they_complete() -> None:
    raw = on_a_terminal("doctor", "--level", "probe", "--check", "torch-version", "--check", "probe",
                        env={"NO_COLOR": "1", "COLUMNS": "100"}).terminal
    assert "probe: 2 ranks, " in raw  # the live status line...
    assert re.search(r"probe: 2 ranks, (starting|init_process_group|all_reduce|broadcast)", raw)
    first_check = raw.index(" torch-version ")
    assert first_check < raw.index("probe: 2 ranks")  # ...comes after the finished check was printed
    seen = as_seen(raw)
    assert not any("probe: 2 ranks" in line for line in seen)  # ...and is erased
    assert [m.group(2) for line in seen if (m := MARK.match(line))] == ["torch-version", "probe"]
    assert "\x1b[" not in raw  # NO_COLOR: no escape sequences at all


@pytest.mark.slow
def test_no_progress_lines_in_json_even_on_a_terminal() -> None:
    raw = on_a_terminal("doctor", "--check", "torch-version", "--json").terminal
    assert "importing torch..." not in raw and "torch-version..." not in raw
    assert json.loads(raw.replace("\r\n", "\n"))["checks"][0]["id"] == "torch-version"


@pytest.mark.slow
def test_no_progress_lines_in_a_pipe() -> None:
    # The same run on a terminal shows "importing torch..." and "torch-version..." while it works.
    assert "torch-version..." in on_a_terminal("doctor", "--check", "torch-version", env={"NO_COLOR": "1"}).terminal
    proc = doctor("--check", "torch-version")
    assert "..." not in proc.stdout and "\r" not in proc.stdout
    assert any(MARK.match(line) for line in proc.stdout.splitlines())


@pytest.mark.slow
def test_probe_that_ran_out_of_time_says_to_raise_timeout(tmp_path: Path) -> None:
    # A real straggler: rank 1 starts late (a sitecustomize on its PYTHONPATH sleeps past the
    # probe's deadline, so it is killed there before it imports torch), so rank 0's 0.05 s
    # rendezvous runs out every time (a bare tiny --timeout alone can still pass when idle).
    (tmp_path / "sitecustomize.py").write_text(
        "import os, time\n"
        "if os.environ.get('NCCLX_PROBE_BACKEND') and os.environ.get('RANK') == '1':\n"
        "    time.sleep(60)\n"
    )
    path = os.pathsep.join(p for p in (str(tmp_path), os.environ.get("PYTHONPATH", "")) if p)
    probe = check(doctor_json("--level", "probe", "--check", "probe", "--timeout", "0.05",
                              env={"PYTHONPATH": path}, expect_rc=1), "probe")
    assert probe["status"] == "fail"
    assert probe["remedy"].startswith("raise --timeout (it was 0.05s")
    assert "127.0.0.1" not in probe["remedy"]


@pytest.mark.slow
def test_probe_without_a_gpu_says_so(nccl_probe_without_a_gpu: dict[str, Any]) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is visible")
    probe = check(nccl_probe_without_a_gpu, "probe")
    assert probe["remedy"].startswith('"nccl" needs a GPU (none here, see gpu-binding)')


@pytest.mark.slow
def test_fast_reconfigure_blocked_by_the_rollback_toggle_says_unset_it(rolled_back: dict[str, Any]) -> None:
    import torch

    if torch.__version__ < "2.15":
        pytest.skip("the rollback toggle exists from 2.15")
    fr = check(rolled_back, "fast-reconfigure")
    assert fr["status"] == "warn"
    assert fr["remedy"].startswith("unset TORCH_DIST_USE_NCCL2")


def test_default_dump_location_is_checked_and_named(tmp_path: Path) -> None:
    blocker = tmp_path / "cache"
    blocker.write_text("a file, not a directory")
    fr = check(doctor_json("--level", "static", "--check", "flight-recorder",
                           env={"XDG_CACHE_HOME": str(blocker)}, expect_rc=1), "flight-recorder")
    assert fr["status"] == "fail"
    assert f"dump directory {blocker}/torch (from XDG_CACHE_HOME) cannot exist: {blocker} is not a directory" \
        in fr["message"]
    assert fr["remedy"].startswith("point XDG_CACHE_HOME at a directory")


def test_unwritable_dump_directory_is_named(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root can write anywhere")
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    fr = check(doctor_json("--level", "static", "--check", "flight-recorder",
                           env={"TORCH_FR_DUMP_TEMP_FILE": f"{locked}/rank_"}, expect_rc=1), "flight-recorder")
    assert f"dump directory {locked} is not writable" in fr["message"]
    assert f"make {locked} writable" in fr["remedy"]


def test_negative_buffer_size_is_not_called_off() -> None:
    fr = check(doctor_json("--level", "static", "--check", "flight-recorder",
                           env={"TORCH_FR_BUFFER_SIZE": "-1"}), "flight-recorder")
    assert "does not disable the flight recorder" in fr["message"]
    assert "disables" not in fr["message"].replace("does not disable", "")


@pytest.mark.parametrize("env, needle", [
    ({"RANK": "5", "WORLD_SIZE": "2"}, "RANK=5 is not below WORLD_SIZE=2"),
    ({"SLURM_PROCID": "x"}, "SLURM_PROCID='x' is not an integer"),
    ({"WORLD_SIZE": "two"}, "WORLD_SIZE='two' is not an integer"),
    ({"SLURM_PROCID": "8", "SLURM_NTASKS": "8"}, "SLURM_PROCID=8 is not below SLURM_NTASKS=8"),
    ({"LOCAL_RANK": "-1"}, "LOCAL_RANK=-1 is negative"),
])
def test_rank_variables_are_checked_at_static(env: dict[str, str], needle: str) -> None:
    gpu = check(doctor_json("--level", "static", "--check", "gpu-binding", env=env, expect_rc=1), "gpu-binding")
    assert gpu["status"] == "fail"
    assert needle in gpu["message"]


def test_unknown_backend_is_a_usage_error_listing_the_known_ones() -> None:
    proc = doctor("--level", "static", "--backend", "foo")
    assert proc.returncode == 2
    assert "'foo' is not a backend this torch knows; known: " in proc.stderr
    assert "gloo" in proc.stderr and "nccl" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert doctor("--level", "static", "--backend", "cpu:gloo,cuda:nccl", "--check", "env-vars").returncode == 0


def test_a_custom_backend_registered_with_torch_is_known(tmp_path: Path) -> None:
    # A real distribution on sys.path whose entry point registers a backend with torch.
    info = tmp_path / "mybackend-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mybackend\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[torch.distributed.backends]\nmyccl = mybackend:register\n")
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    assert doctor("--level", "static", "--backend", "foo", env=env).stderr.count("myccl") == 1
    proc = doctor("--level", "static", "--backend", "myccl", "--check", "env-vars", env=env)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("target", ["1.13", "2.17", "3.0"])
def test_target_torch_outside_the_known_range_names_the_range(target: str) -> None:
    proc = doctor("--level", "static", "--target-torch", target)
    assert proc.returncode == 2
    assert f"torch {target} is outside the releases this tool knows (2.0 to 2.16)" in proc.stderr


def test_cluster_text_report_stays_one_screen_at_1024_ranks() -> None:
    from ncclx_migrate._doctor._merge import Source, merge_reports
    from ncclx_migrate._doctor._model import CheckResult, Report, Status
    from ncclx_migrate._doctor._render import render

    sources = []
    for r in range(1024):
        odd = r in (5, 700)
        checks = [
            CheckResult("torch-version", Status.OK, "torch 2.15.0", "", {"version": "2.15.0"}),
            CheckResult("legacy-toggle", Status.WARN if odd else Status.OK,
                        "TORCH_DIST_USE_NCCL2='0' rolls back" if odd else "TORCH_DIST_USE_NCCL2 is not set",
                        "unset TORCH_DIST_USE_NCCL2" if odd else "", {"value": "0" if odd else None}),
            CheckResult("gpu-binding", Status.OK, f"8 GPUs visible; LOCAL_RANK={r % 8} -> nccl2 binds cuda:{r % 8}"),
            CheckResult("env-vars", Status.OK, f"NCCL settings: NCCL_RANK_TAG={r}"),  # differs on every rank
        ]
        sources.append(Source(Report("cluster", f"node{r // 8}", r, "2.15.0", checks), ""))
    merged = merge_reports(sources, level="cluster", expected_ranks=list(range(1030)), timeout=20, rank=0)
    lines = render(merged, width=100).splitlines()
    assert len(lines) <= 40, "\n".join(lines)
    assert not _long_lines("\n".join(lines), 100)
    text = "\n".join(lines)
    toggle = lines.index(next(line for line in lines if MARK.match(line) and "legacy-toggle" in line))
    # Odd ones out first, then everyone else as one range with its count.
    assert lines[toggle + 1].startswith("        - ranks 5,700 (2) on 2 hosts: warn: TORCH_DIST_USE_NCCL2='0'")
    assert lines[toggle + 2].strip() == "fix: unset TORCH_DIST_USE_NCCL2"
    assert "ranks 0-4,6-699,701-1023 (1022) on 128 hosts: ok" in text
    assert "ranks 1024-1029 (6) did not report within 20s" in text
    assert "torch 2.15.0 (1,024 of 1,030 ranks; the rest did not report)" in text
    # Results that differ only in their ok text are grouped too: one bullet per LOCAL_RANK.
    assert re.search(r"- ranks 0,8,16,[0-9,]+,\.\.\.,1016 \(128\) on 128 hosts: ok: 8 GPUs visible;", text)
    # Results that differ on every rank are counted after a few, not listed.
    assert "- 1017 more distinct results on 1017 more ranks/reports (--format json lists them)" in text


@pytest.mark.slow
@pytest.mark.torch
def test_cluster_gather_shows_how_many_ranks_it_has_on_a_terminal() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    # Rank 1 of 2 never starts: rank 0 waits out --timeout, counting.
    run = on_a_terminal("doctor", "--level", "cluster", "--timeout", "3",
                        env={"NO_COLOR": "1", "RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
                             "MASTER_PORT": port, "PYTHONPATH": os.pathsep.join(sys.path)})
    raw = run.terminal
    assert "gathered 1/2 ranks" in raw
    seen = as_seen(raw)
    assert not any("gathered" in line for line in seen)
    # (a run whose report stopped short under a loaded test command: say how it ended)
    assert any("rank 1 did not report within 3s" in line for line in seen), \
        f"exit {run.returncode}, {len(raw)} bytes on the terminal, stderr: {run.stderr[-2000:]!r}\n" + "\n".join(seen)


def test_merge_keeps_one_bullet_per_problem_when_every_node_agrees(tmp_path: Path) -> None:
    env = {"TORCH_FR_BUFFER_SIZE": "0", "TORCH_FR_DUMP_DYNAMIC_FILE_NAME": "1"}
    proc = doctor("--level", "static", "--check", "flight-recorder", "--json", env=env)
    for name in ("a.json", "b.json"):
        (tmp_path / name).write_text(proc.stdout)
    merged = doctor("merge", str(tmp_path / "a.json"), str(tmp_path / "b.json"), env={"COLUMNS": "100"})
    bullets = [line for line in merged.stdout.splitlines() if line.startswith("        - ")]
    assert [b.split()[1] for b in bullets] == ["TORCH_FR_BUFFER_SIZE=0", "TORCH_FR_DUMP_DYNAMIC_FILE_NAME=1"]


def test_cluster_text_when_the_launcher_stopped_the_job() -> None:
    """torchrun stopped rank 0 (another rank died) with 1 of 3 reports in: the text says so, counts
    what was there, and prints the header's "judged as" line as every level does."""
    from ncclx_migrate._doctor._cluster import MISSING_WHEN_STOPPED, mark_stopped
    from ncclx_migrate._doctor._merge import Source, merge_reports
    from ncclx_migrate._doctor._model import CheckResult, Report, Status
    from ncclx_migrate._doctor._render import render

    own = Report("cluster", "node0", 0, "2.15.0", [CheckResult("torch-version", Status.OK, "torch 2.15.0")],
                 backend="gloo", backend_why="no GPU here")
    merged = merge_reports([Source(own, "")], level="cluster", expected_ranks=[0, 1, 2], rank=0)
    mark_stopped(merged.checks[-1], 0.04, 1, 3)
    text = " ".join(render(merged, width=100).split())
    assert "torch 2.15.0 (1 of 3 ranks; the rest did not report)" in text and "(all 1 ranks)" not in text
    assert ("stopped (SIGTERM) after 0.0s of waiting, with 1 of 3 reports: the launcher stops every rank when "
            "one fails (torchrun: when a rank dies)") in text
    assert "find the rank that failed first in the launcher's log" in text
    assert f"ranks 1-2 (2) did not report fix: {MISSING_WHEN_STOPPED}" in text
    assert "did the process start?" not in text
    assert "judged as a gloo job: no GPU here" in text
    # one report of one: nothing to compare, and no "(s)" anywhere
    alone = merge_reports([Source(own, "")], level="cluster", expected_ranks=[0], rank=0)
    text = " ".join(render(alone, width=100).split())
    assert "torch 2.15.0 (1 rank)" in text and "1 rank on 1 host: nothing to compare it with" in text
    assert "(s)" not in text


def test_information_is_a_note_never_a_problem_and_one_parenthesis_per_fix() -> None:
    """The NCCL settings the cluster comparison uses are "ok" in the JSON: in the text a note
    under the problems, not a bullet; the last fix takes the migrate hint as a clause of its own."""
    proc = doctor("--level", "static", "--check", "env-vars",
                  env={"NCCL_BLOCKING_WAIT": "1", "NCCL_DEBUG": "INFO", "COLUMNS": "200"})
    lines = proc.stdout.splitlines()
    bullets = [line for line in lines if line.startswith("        - ")]
    assert bullets == ["        - NCCL_BLOCKING_WAIT: deprecated, use TORCH_NCCL_BLOCKING_WAIT"], proc.stdout
    assert "          fix: add TORCH_NCCL_BLOCKING_WAIT next to NCCL_BLOCKING_WAIT (keep the old name while "\
           "legacy can run); ncclx migrate --write PATH rewrites scripts" in lines, proc.stdout
    assert "        note: NCCL settings: NCCL_BLOCKING_WAIT, NCCL_DEBUG" in lines, proc.stdout
    assert ") (" not in proc.stdout
