"""Ctrl-C during `ncclx migrate --write` on a terminal (issue 37): it says how many files were
already rewritten (each whole: the workers finish the file in hand), and `ncclx: interrupted`
comes on its own line, over the progress count, with no blank line before it."""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import ncclx_exe

from .conftest import env, signals_at_default

BEFORE = "import torch.distributed as dist\n\n\ndef is_nccl(pg):\n    return isinstance(pg, dist.ProcessGroupNCCL)\n"
FILES = 800


@pytest.mark.slow  # its worker processes take ~13 s of CPU
def test_ctrl_c_during_write_counts_the_files_rewritten(tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    for i in range(FILES):
        (project / f"m{i:03}.py").write_text(BEFORE)
    leader, follower = pty.openpty()
    proc = subprocess.Popen([ncclx_exe(), "migrate", "--write", "--no-cache", "."], cwd=project,
                            env={**env(), "TERM": "xterm"}, stdin=subprocess.DEVNULL, stdout=follower,
                            stderr=follower, preexec_fn=signals_at_default(signal.SIGINT))
    screen, sent, deadline = b"", False, time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 0.1)
            if ready:
                try:
                    screen += os.read(leader, 65536)
                except OSError:
                    break
            if not sent and f"ncclx migrate: 50/{FILES} files".encode() in screen:
                assert proc.poll() is None, "it finished before the test could interrupt it"
                proc.send_signal(signal.SIGINT)  # as Ctrl-C does, once the first files are done
                sent = True
            if sent and proc.poll() is not None and not ready:
                break
    finally:
        proc.kill()
        proc.wait()
        os.close(follower)
        os.close(leader)
    text = screen.decode()
    assert proc.returncode == 130, text[-2000:]
    rewritten = [p for p in project.iterdir() if p.read_text() != BEFORE]
    for p in rewritten:  # each one whole: the complete fix, as a run to the end writes it
        assert "_NCCL_PG_CLASSES" in p.read_text() and compile(p.read_text(), str(p), "exec")
    said = (f"\r\x1b[Kncclx migrate: {len(rewritten):,} of {FILES:,} files already rewritten, each in full; "
            "the others are as they were\r\n\r\x1b[Kncclx: interrupted\r\n")
    assert text.endswith(said), text[-600:]
    assert "\r\n\r\n" not in text[-600:]  # no blank line
