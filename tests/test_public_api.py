"""The public surface is small and explicit (httpx's exported-members test)."""

from __future__ import annotations

import subprocess
import sys

import ncclx_migrate

from .conftest import run_ncclx


def test_all_is_exactly_the_public_names() -> None:
    public = {n for n in dir(ncclx_migrate) if not n.startswith("_")}
    public.discard("annotations")
    submodules = {"backend"}
    assert set(ncclx_migrate.__all__) == (public - submodules) | {"__version__"}
    assert ncclx_migrate.__all__ == sorted(ncclx_migrate.__all__)


def test_warning_category_is_a_future_warning() -> None:
    assert issubclass(ncclx_migrate.LegacyNCCLWarning, FutureWarning)


def test_import_does_not_import_torch() -> None:
    code = "import sys, ncclx_migrate; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_cli_help_lists_every_command() -> None:
    res = run_ncclx("--help")
    assert res.returncode == 0
    for cmd in ("doctor", "migrate", "rules", "explain", "fr", "compare"):
        assert cmd in res.stdout


def test_python_dash_m_works() -> None:
    res = subprocess.run(
        [sys.executable, "-m", "ncclx_migrate", "--version"], capture_output=True, text=True
    )
    assert res.returncode == 0
    assert ncclx_migrate.__version__ in res.stdout
