"""``ncclx migrate`` as a library call (``_migrate/api.py``): the command's report and exit status
from a request, and a request that cannot run refused as the command refuses it."""

from __future__ import annotations

from pathlib import Path

import pytest

from ncclx_migrate._migrate.api import MigrateRequest, RequestError, migrate

TOGGLE = 'import os\nos.environ["TORCH_DIST_USE_NCCL2"] = "0"\n'


def test_a_request_gets_the_commands_report_and_exit_status(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "train.py").write_text(TOGGLE)
    monkeypatch.chdir(tmp_path)
    assert migrate(MigrateRequest(paths=("train.py",), jobs=1, no_cache=True, quiet=True)) == 1
    out = capsys.readouterr().out
    assert out.startswith("train.py:2:1: NCX101 TORCH_DIST_USE_NCCL2=0 rolls back to legacy")
    assert "Found 1 finding in 1 file." in out
    assert migrate(MigrateRequest(paths=("train.py",), write=True, unsafe_fixes=True, jobs=1, no_cache=True,
                                  quiet=True)) == 0
    assert "TORCH_DIST_USE_NCCL2" not in (tmp_path / "train.py").read_text()


@pytest.mark.parametrize(("request_", "message", "hint"), [
    (MigrateRequest(diff=True, write=True), "--diff and --write are exclusive", None),
    (MigrateRequest(target_torch="1.2"), "torch 1.2 is outside the releases this tool knows", "--target-torch"),
    (MigrateRequest(select=("XYZ",)), "'XYZ' matches no rule code", None),
])
def test_a_request_that_cannot_run_is_refused(request_: MigrateRequest, message: str, hint: str | None,
                                             tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(RequestError, match=message) as info:
        migrate(request_)
    assert info.value.param_hint == hint
