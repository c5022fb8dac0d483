"""The project's line length, in every spelling its formatter or linter reads (issue 17 §4)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_ncclx

from .test_cli import DEVICE_PICKS

# 96 columns once device_id is added: one line within 100, wrapped at the default 88.
SHORT = DEVICE_PICKS.replace(", init_method='env://', world_size=int(os.environ['WORLD_SIZE'])", "")
ONE_LINE = "    dist.init_process_group('nccl', device_id=torch.device(\"cuda\", torch.cuda.current_device()))\n"


@pytest.mark.parametrize("config", [
    {"pyproject.toml": "[tool.black]\nline_length = 100\n"},  # black takes both spellings
    {"pyproject.toml": "[tool.yapf]\ncolumn_limit = 100\n"},
    {".style.yapf": "[style]\nbased_on_style = pep8\ncolumn_limit = 100\n"},
    {"setup.cfg": "[yapf]\ncolumn_limit = 100\n"},
    {".ruff.toml": "line-length = 100\n"},
    {"tox.ini": "[flake8]\nmax_line_length = 100\n"},
    # The formatter wins over the linter, wherever each is set.
    {"setup.cfg": "[flake8]\nmax-line-length = 79\n", "pyproject.toml": "[tool.black]\nline_length = 100\n"},
    {".flake8": "[flake8]\nmax-line-length = 79\n", "setup.cfg": "[yapf]\ncolumn_limit = 100\n"},
], ids=["black-underscore", "yapf-pyproject", "style.yapf", "yapf-setup.cfg", ".ruff.toml", "flake8-tox",
        "black-over-flake8", "yapf-over-flake8"])
def test_the_configured_line_length_is_read(tmp_path: Path, config: dict[str, str]) -> None:
    (tmp_path / "train.py").write_text(SHORT)
    for name, text in config.items():
        (tmp_path / name).write_text(text)
    proc = run_ncclx("migrate", "--write", "--unsafe-fixes", "train.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert ONE_LINE in (tmp_path / "train.py").read_text()
    assert "warning" not in proc.stderr
