"""The hang-dump API with bad input (issue 10): errors say what is valid and name the directory."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest


def _python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("TORCH_", "NCCL", "NCCLX_"))}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env={**base, **env}, timeout=120)


@pytest.mark.parametrize("value", [-1, 0, float("nan"), float("inf"), "abc"])
def test_enable_hang_dump_says_what_values_are_valid(value: object) -> None:
    import ncclx_migrate

    with pytest.raises(ValueError, match=r"must be a finite number > 0 \(such as 300\), got"):
        ncclx_migrate.enable_hang_dump(value)  # type: ignore[arg-type]


def test_buffer_names_match_the_env_table() -> None:
    from ncclx_migrate._fr._env import BUFFER_NAMES
    from ncclx_migrate._torch.envvars import FR_BUFFER_NAMES

    assert BUFFER_NAMES == FR_BUFFER_NAMES


def test_import_warns_that_a_non_integer_buffer_size_aborts_at_group_creation() -> None:
    proc = _python("import ncclx_migrate", NCCLX_HANG_DUMP="60", TORCH_FR_BUFFER_SIZE="abc")
    assert "RuntimeWarning: TORCH_FR_BUFFER_SIZE='abc' is not an integer: torch aborts the process" in proc.stderr
    assert "at init_process_group" in proc.stderr
    quiet = _python("import ncclx_migrate", NCCLX_HANG_DUMP="60", TORCH_FR_BUFFER_SIZE="2000")
    assert "TORCH_FR_BUFFER_SIZE" not in quiet.stderr


@pytest.mark.torch
def test_dump_now_with_an_unusable_cache_directory_names_it(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    blocker = tmp_path / "cache"
    blocker.write_text("a file")
    proc = _python("""
        import torch, torch.distributed as dist, ncclx_migrate
        store = dist.TCPStore("127.0.0.1", 0, 1, True)
        dist.init_process_group("gloo", store=store, rank=0, world_size=1)
        dist.all_reduce(torch.ones(2))
        h = ncclx_migrate.enable_hang_dump(600)
        try:
            h.dump_now()
        except OSError as exc:
            print(type(exc).__name__, exc)
        h.stop()
        dist.destroy_process_group()
    """, XDG_CACHE_HOME=str(blocker))
    assert f"DumpLocationError [Errno 20] cannot write the flight-recorder dump in {blocker}/torch " \
           "(from XDG_CACHE_HOME)" in proc.stdout, proc.stdout + proc.stderr
    assert "set TORCH_FR_DUMP_TEMP_FILE to a prefix in a writable directory" in proc.stdout


@pytest.mark.torch
def test_a_failing_poll_is_printed_once() -> None:
    pytest.importorskip("torch")
    proc = _python("""
        import time, torch, torch.distributed as dist, ncclx_migrate
        from ncclx_migrate._fr import _watchdog
        def boom(self, dist):
            raise RuntimeError("store gone")
        _watchdog.HangDump._tick = boom
        store = dist.TCPStore("127.0.0.1", 0, 1, True)
        dist.init_process_group("gloo", store=store, rank=0, world_size=1)
        h = ncclx_migrate.enable_hang_dump(0.1)
        time.sleep(1.5)  # ~10 failed polls, one back-off of 0.1 s each
        h.stop()
        dist.destroy_process_group()
    """)
    assert proc.stderr.count("poll failed (RuntimeError: store gone)") == 1, proc.stderr
