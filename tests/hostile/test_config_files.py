"""A project config file that cannot be read is said in one line on stderr, in every output
format, never silently replaced by the defaults (issue 18)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import run_bounded, without_root_file_access
from .test_migrate import REDUNDANT


@pytest.mark.parametrize("fmt", ["text", "json", "sarif", "github"])
def test_unreadable_and_invalid_config_files_are_warned(tmp_path: Path, fmt: str) -> None:
    prefix = without_root_file_access()
    if prefix is None:
        pytest.skip("running as root without setpriv: a mode-000 file would still be read")
    (tmp_path / "m.py").write_text(REDUNDANT)
    (tmp_path / "pyproject.toml").write_text('[project\nname = "x"\ndependencies = ["torch>=2.13"]\n')
    (tmp_path / "setup.cfg").write_text("max-line-length = 100\n")  # no section header
    flake8 = tmp_path / ".flake8"
    flake8.write_text("[flake8]\nmax-line-length = 100\n")
    flake8.chmod(0)
    proc = run_bounded("migrate", "--format", fmt, ".", cwd=tmp_path, prefix=prefix)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stderr.splitlines()
    assert ("pyproject.toml: warning: cannot read it (invalid TOML: Expected ']' at the end of a table declaration "
            "(at line 1, column 9)); assumed it requires no torch version and sets no line length") in lines
    assert ("setup.cfg: warning: cannot read it (invalid INI at line 1: File contains no section headers.); "
            "assumed it sets no line length") in lines
    assert ".flake8: warning: cannot read it (Permission denied); assumed it sets no line length" in lines
    assert len(lines) == 3, proc.stderr
    if fmt in ("json", "sarif"):
        json.loads(proc.stdout)  # stdout stays a document
