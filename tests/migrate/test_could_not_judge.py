"""Issue 35 §4: an init behind an accelerator layer the rule cannot follow gets one "could not
judge" note on stderr, which is not a finding: the run exits 0, so a clean report means checked."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import run_ncclx

ENGINE = ("import torch.distributed as dist\n\n\nclass Engine:\n    def setup(self):\n"
          "        self.accelerator.set_device(self.local_rank)\n"
          "        dist.init_process_group(backend=self.backend)\n")


def test_a_note_per_unjudged_init_on_stderr_and_exit_0(tmp_path: Path) -> None:
    (tmp_path / "engine.py").write_text(ENGINE)
    proc = run_ncclx("migrate", "engine.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    notes = [line for line in proc.stderr.splitlines() if "could not judge" in line]
    assert notes == ["engine.py:7: warning: NCX130 could not judge: cannot follow the GPU pick on line 6: "
                     "pass device_id= if it picks one"]
    report = json.loads(run_ncclx("migrate", "--format", "json", "engine.py", cwd=tmp_path).stdout)
    assert report["findings"] == []
