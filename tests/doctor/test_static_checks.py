"""Static-level checks under controlled environments and real (compiled) fake libraries."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import other_python

from .conftest import check, doctor, doctor_json

STATIC = ("--level", "static")


def test_rollback_toggle_warns_and_fails_for_2_16() -> None:
    env = {"TORCH_DIST_USE_NCCL2": "0"}
    report = doctor_json(*STATIC, "--check", "legacy-toggle", env=env, expect_rc=0)
    toggle = check(report, "legacy-toggle")
    assert toggle["status"] == "warn"
    assert "rolls \"nccl\" back to the legacy ProcessGroupNCCL" in toggle["message"]
    assert toggle["details"]["meaning"] == "rollback"
    later = doctor_json(*STATIC, "--check", "legacy-toggle", "--target-torch", "2.16", env=env, expect_rc=1)
    failed = check(later, "legacy-toggle")
    assert failed["status"] == "fail"
    assert "torch 2.16 no longer has" in failed["message"]
    assert "unset TORCH_DIST_USE_NCCL2" in failed["remedy"]


def test_a_job_that_names_nccl_legacy_warns_and_fails_for_2_16() -> None:
    # backend="nccl-legacy" is the rollback too, with no environment variable set.
    args = (*STATIC, "--backend", "nccl-legacy", "--check", "legacy-toggle")
    toggle = check(doctor_json(*args, expect_rc=0), "legacy-toggle")
    assert toggle["status"] == "warn"
    assert 'backend "nccl-legacy"' in toggle["message"] and "announced for 2.15 only" in toggle["message"]
    failed = check(doctor_json(*args, "--target-torch", "2.16", expect_rc=1), "legacy-toggle")
    assert failed["status"] == "fail"
    assert "torch 2.16" in failed["message"]
    assert 'backend="nccl"' in failed["remedy"]


@pytest.mark.parametrize("value", ["false", "no", "", "False"])
def test_falsey_spellings_do_not_roll_back(value: str) -> None:
    report = doctor_json(*STATIC, "--check", "legacy-toggle", "--check", "nccl-resolution",
                         env={"TORCH_DIST_USE_NCCL2": value})
    toggle = check(report, "legacy-toggle")
    assert toggle["status"] == "warn"
    assert 'only the literal "0" rolls back' in toggle["message"]
    assert check(report, "nccl-resolution")["details"]["implementation"] == "nccl2"


def test_unset_toggle_is_ok_and_says_nccl_legacy_is_available() -> None:
    report = doctor_json(*STATIC, "--check", "legacy-toggle")
    toggle = check(report, "legacy-toggle")
    assert toggle["status"] == "ok"
    assert "nccl-legacy is available" in toggle["message"]


def test_env_vars_name_each_deprecated_or_ignored_variable_with_its_replacement() -> None:
    env = {"TORCH_NCCL_TRACE_BUFFER_SIZE": "100", "TORCH_NCCL_ENABLE_MONITORING": "1",
           "TORCH_NCCL_AVOID_RECORD_STREAMS": "1"}
    report = doctor_json(*STATIC, "--backend", "nccl", "--check", "env-vars", env=env)
    result = check(report, "env-vars")
    assert result["status"] == "warn"
    names = {f["name"]: f for f in result["details"]["findings"]}
    assert set(names) == set(env)
    assert names["TORCH_NCCL_TRACE_BUFFER_SIZE"]["replacement"] == "TORCH_FR_BUFFER_SIZE"
    assert "add TORCH_FR_BUFFER_SIZE" in result["remedy"]
    # The remedy names a real ncclx migrate option (the one that rewrites launch scripts).
    assert "ncclx migrate --write" in result["remedy"] and "--fix" not in result["remedy"]
    assert "TORCH_NCCL_ENABLE_MONITORING: ignored by nccl2" in result["message"]
    # Under a legacy rollback the monitoring variable IS read: not a finding.
    legacy = doctor_json(*STATIC, "--backend", "nccl", "--check", "env-vars",
                         env={**env, "TORCH_DIST_USE_NCCL2": "0"})
    assert "TORCH_NCCL_ENABLE_MONITORING" not in {f["name"] for f in check(legacy, "env-vars")["details"]["findings"]}
    # Judged for torch 2.16, which has no legacy backend: no advice to keep a name for it.
    later = check(doctor_json(*STATIC, "--backend", "nccl", "--check", "env-vars", "--target-torch", "2.16",
                              env=env), "env-vars")
    assert "legacy can run" not in later["remedy"] and "once no job runs legacy" not in later["remedy"]
    assert "rename TORCH_NCCL_TRACE_BUFFER_SIZE to TORCH_FR_BUFFER_SIZE (torch 2.16 has no legacy backend)" in later["remedy"]
    assert "keep the old name while legacy can run" in result["remedy"]


@pytest.mark.parametrize(
    ("env", "status", "needle"),
    [
        ({"TORCH_FR_BUFFER_SIZE": "abc"}, "fail", "is not an integer: init_process_group aborts the process"),
        ({"TORCH_FR_BUFFER_SIZE": ""}, "fail", "is not an integer"),
        ({"TORCH_NCCL_TRACE_BUFFER_SIZE": "1e3"}, "fail", "is not an integer"),
        ({"TORCH_FR_BUFFER_SIZE": "0"}, "warn", "disables the flight recorder"),
        ({"TORCH_FR_DUMP_DYNAMIC_FILE_NAME": "1"}, "warn", "overwrite each other"),
        ({"TORCH_FR_DUMP_TEMP_FILE": "/nonexistent-ncclx/dir/fr_"}, "fail", "does not exist"),
    ],
)
def test_flight_recorder_settings(env: dict[str, str], status: str, needle: str) -> None:
    report = doctor_json(*STATIC, "--check", "flight-recorder", env=env)
    fr = check(report, "flight-recorder")
    assert fr["status"] == status, fr
    assert needle in fr["message"]
    assert fr["remedy"]


def test_gloo_never_dumps_on_a_hang_and_the_hang_watchdog_covers_it(tmp_path: Path) -> None:
    # a job that runs gloo (--backend gloo); on a node without a GPU it is only the fallback:
    # test_first_read's login node judges it as the header says
    env = {"CUDA_VISIBLE_DEVICES": "", "TORCH_FR_DUMP_TEMP_FILE": f"{tmp_path}/fr_"}
    gloo = (*STATIC, "--backend", "gloo", "--check", "flight-recorder")
    fr = check(doctor_json(*gloo, env=env), "flight-recorder")
    assert fr["status"] == "warn"
    assert "gloo (--backend gloo) never dumps on a hang" in fr["message"]
    assert "NCCLX_HANG_DUMP=SECONDS" in fr["remedy"]
    covered = check(doctor_json(*gloo, env={**env, "NCCLX_HANG_DUMP": "120"}), "flight-recorder")
    assert covered["status"] == "ok"
    assert "NCCLX_HANG_DUMP=120s" in covered["message"]
    assert f"{tmp_path}/fr_<rank>" in covered["message"]


@pytest.mark.parametrize(
    ("backend", "needle"),
    [("nccl", "nccl2 dumps through the FR hook"), ("nccl-lazy", "nccl-lazy has no abort hook")],
)
def test_which_backends_dump_on_a_hang(backend: str, needle: str, tmp_path: Path) -> None:
    env = {"TORCH_FR_DUMP_TEMP_FILE": f"{tmp_path}/fr_"}
    fr = check(doctor_json(*STATIC, "--backend", backend, "--check", "flight-recorder", env=env), "flight-recorder")
    assert needle in fr["message"]


def test_legacy_reads_only_the_old_dump_on_timeout_name(tmp_path: Path) -> None:
    env = {"TORCH_DIST_USE_NCCL2": "0", "TORCH_FR_DUMP_ON_TIMEOUT": "0", "TORCH_FR_DUMP_TEMP_FILE": f"{tmp_path}/fr_"}
    fr = check(doctor_json(*STATIC, "--backend", "nccl", "--check", "flight-recorder", env=env), "flight-recorder")
    assert fr["status"] == "warn"
    assert "reads only TORCH_NCCL_DUMP_ON_TIMEOUT" in fr["message"]


def test_gpu_binding_garbage_local_rank_fails() -> None:
    report = doctor_json(*STATIC, "--check", "gpu-binding", env={"LOCAL_RANK": "first"}, expect_rc=1)
    gpu = check(report, "gpu-binding")
    assert gpu["status"] == "fail"
    assert "LOCAL_RANK='first' is not an integer" in gpu["message"]


def test_garbage_everywhere_never_crashes() -> None:
    env = {
        "TORCH_DIST_USE_NCCL2": "maybe", "TORCH_FR_BUFFER_SIZE": "\x01zz", "CUDA_VISIBLE_DEVICES": "GPU-",
        "LOCAL_RANK": "-", "LOCAL_WORLD_SIZE": "lots", "RANK": "x", "NCCLX_HANG_DUMP": "soon",
        "TORCH_NCCL2_RECONFIGURE_SHRINK_GROW": "yes please", "TORCH_FR_DUMP_ON_TIMEOUT": "perhaps",
        "TORCH_FR_DUMP_TEMP_FILE": "", "XDG_CACHE_HOME": "relative/dir", "NCCLX_NCCL_LIBRARY": "/no/such/libnccl.so.2",
        "LD_LIBRARY_PATH": "::/nonexistent:", "TORCH_FR_DUMP_DYNAMIC_FILE_NAME": "2",
    }
    report = doctor_json(*STATIC, "--backend", "nccl", env=env, expect_rc=1)
    assert report["summary"]["error"] == 0, [c for c in report["checks"] if c["status"] == "error"]
    assert check(report, "nccl-version")["status"] == "fail"  # the named library does not exist


# --- NCCL/RCCL libraries: real compiled stand-ins --------------------------------------


def test_old_nccl_2_27_has_no_reconfigure(fake_lib: Callable[..., str]) -> None:
    env = {"NCCLX_NCCL_LIBRARY": fake_lib("2.27.3")}
    report = doctor_json(*STATIC, "--backend", "nccl", "--check", "nccl-version", "--check", "fast-reconfigure",
                         env=env)
    nccl = check(report, "nccl-version")
    assert nccl["details"]["runtime"] == "2.27.3"
    assert nccl["status"] in ("ok", "warn")  # warn where torch pins another version
    fast = check(report, "fast-reconfigure")
    assert fast["status"] == "warn"
    assert "NCCL 2.27.3 has no ncclCommRevoke" in fast["message"]


def test_nccl_2_28_reconfigures_but_has_no_shrink_grow(fake_lib: Callable[..., str]) -> None:
    env = {"NCCLX_NCCL_LIBRARY": fake_lib("2.28.9"), "TORCH_NCCL2_RECONFIGURE_SHRINK_GROW": "1"}
    fast = check(doctor_json(*STATIC, "--backend", "nccl", "--check", "fast-reconfigure", env=env), "fast-reconfigure")
    assert fast["status"] == "warn"
    assert "no ncclCommShrink/Grow path" in fast["message"]


def test_nccl_below_the_2_23_floor_fails(fake_lib: Callable[..., str]) -> None:
    report = doctor_json(*STATIC, "--check", "nccl-version", env={"NCCLX_NCCL_LIBRARY": fake_lib("2.21.5")},
                         expect_rc=1)
    nccl = check(report, "nccl-version")
    assert nccl["status"] == "fail"
    assert "older than the 2.23.0 floor" in nccl["message"]


def test_library_found_on_ld_library_path(fake_lib: Callable[..., str]) -> None:
    lib = fake_lib("2.29.1")
    report = doctor_json(*STATIC, "--check", "nccl-version", env={"LD_LIBRARY_PATH": os.path.dirname(lib)})
    candidates = check(report, "nccl-version")["details"]["candidates"]
    assert {"path": lib, "kind": "nccl", "source": "LD_LIBRARY_PATH"} in candidates


def test_ld_preload_interposer_is_what_the_static_level_asks(fake_lib: Callable[..., str]) -> None:
    lib = fake_lib("2.26.2", name="libnccl-old.so")
    nccl = check(doctor_json(*STATIC, "--check", "nccl-version", env={"LD_PRELOAD": lib}), "nccl-version")
    assert nccl["details"]["library"] == lib
    assert nccl["details"]["source"] == "LD_PRELOAD"
    assert nccl["details"]["runtime"] == "2.26.2"


def test_a_library_that_crashes_is_a_failure_not_a_crash(fake_lib: Callable[..., str]) -> None:
    lib = fake_lib(flags=("-DFAKE_CRASH",), name="libnccl-crash.so")
    report = doctor_json(*STATIC, "--check", "nccl-version", env={"NCCLX_NCCL_LIBRARY": lib}, expect_rc=1)
    nccl = check(report, "nccl-version")
    assert nccl["status"] == "fail"
    assert "SIGABRT" in nccl["message"]


def test_a_library_that_hangs_is_bounded_by_timeout(fake_lib: Callable[..., str]) -> None:
    lib = fake_lib(flags=("-DFAKE_HANG",), name="libnccl-hang.so")
    started = time.monotonic()
    report = doctor_json(*STATIC, "--check", "nccl-version", "--timeout", "2", env={"NCCLX_NCCL_LIBRARY": lib},
                         expect_rc=1, timeout=60)
    assert time.monotonic() - started < 60
    assert "did not answer within 2s" in check(report, "nccl-version")["message"]


def test_an_error_code_from_ncclgetversion_is_reported(fake_lib: Callable[..., str]) -> None:
    lib = fake_lib(flags=("-DFAKE_FAIL",), name="libnccl-fail.so")
    nccl = check(doctor_json(*STATIC, "--check", "nccl-version", env={"NCCLX_NCCL_LIBRARY": lib}), "nccl-version")
    assert nccl["status"] == "fail"
    assert "returned error 2" in nccl["message"]


@pytest.mark.parametrize(("version", "status"), [("2.30.4", "ok"), ("2.29.3", "warn")])
def test_rccl_against_the_reconfigure_minimum(fake_lib: Callable[..., str], version: str, status: str) -> None:
    lib = fake_lib(version, name="librccl.so.1")
    report = doctor_json(*STATIC, "--check", "rccl-version", "--check", "nccl-version",
                         env={"NCCLX_NCCL_LIBRARY": lib})
    rccl = check(report, "rccl-version")
    assert rccl["status"] == status
    assert rccl["details"]["runtime"] == version
    assert check(report, "nccl-version")["status"] == "skip"


def test_rccl_is_skipped_on_cuda_and_cpu_builds() -> None:
    assert check(doctor_json(*STATIC, "--check", "rccl-version"), "rccl-version")["status"] == "skip"


# --- other Pythons ---------------------------------------------------------------------


@pytest.mark.parametrize("args", [("--level", "local"), ("--level", "static", "--backend", "nccl")])
def test_without_torch_a_job_check_fails_and_nothing_crashes(args: tuple[str, ...]) -> None:
    py = other_python("NCCLX_TEST_PY_NOTORCH")
    report = doctor_json(*args, python=py, expect_rc=1)
    tv = check(report, "torch-version")
    assert tv["status"] == "fail"
    assert tv["message"] == "torch is not installed in this Python"
    assert report["torch"] is None
    assert report["summary"]["error"] == 0


def test_a_static_run_without_torch_checks_the_node_before_torch() -> None:
    """A login node or an image before torch is installed: the missing torch is said once, in
    the header; what needs torch skips; the verdict is OK (exit 0) when nothing else is wrong."""
    py = other_python("NCCLX_TEST_PY_NOTORCH")
    proc = doctor("--level", "static", python=py, env={"COLUMNS": "100", "CUDA_VISIBLE_DEVICES": ""})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = " ".join(proc.stdout.split())
    assert text.startswith("ncclx doctor: level static, host ")
    assert ("torch not installed no torch in this Python: a check of this node or image before torch is "
            "installed, so the checks that need torch skip; --backend nccl judges the job") in text
    assert re.search(r"skip torch-version not in this Python \(\S+python\S*\)", text)
    assert text.count("not installed") == 1 and text.count("not in this Python") == 1
    for cid in ("nccl-resolution", "fast-reconfigure"):
        assert f"skip {cid} needs torch " in text
    assert "FAIL" not in proc.stdout and "judged as" not in text
    assert proc.stdout.splitlines()[-1].startswith("OK: ")
