"""The project's line length, in every spelling its formatter or linter reads (issue 17 §4)."""

from __future__ import annotations

import shutil
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


# --- the formatter decides, as it reads its own configuration (data-only cases) -------------------
# tests/fixtures/line_length/<case>/ is a repository (the test adds its .git); ``expected`` reads
# ``FOLDER LENGTH``: a file in FOLDER gets lines up to LENGTH.
CASES = Path(__file__).resolve().parents[1] / "fixtures" / "line_length"


@pytest.mark.parametrize("case", sorted(p.name for p in CASES.iterdir() if (p / "expected").is_file()))
def test_the_formatter_the_project_runs_decides(case: str, tmp_path: Path) -> None:
    from ncclx_migrate._migrate._python._layout import line_length

    root = tmp_path / case
    shutil.copytree(CASES / case, root)
    (root / ".git").mkdir()
    folder, length = (root / "expected").read_text(encoding="utf-8").split()
    assert line_length(str(root / folder / "train.py")) == int(length)


def test_black_at_its_default_wraps_what_flake8_would_allow(tmp_path: Path) -> None:
    """The issue's shape end to end: black at 88 and flake8 at 120 gave 96-column lines."""
    shutil.copytree(CASES / "black_default_over_flake8", tmp_path, dirs_exist_ok=True)
    (tmp_path / "train.py").write_text(SHORT)
    run_ncclx("migrate", "--write", "--unsafe-fixes", "-q", "train.py", cwd=tmp_path)
    text = (tmp_path / "train.py").read_text()
    assert "device_id=" in text and ONE_LINE not in text and max(map(len, text.splitlines())) <= 88
