"""ncclx_migrate.backend: an explicit, small public surface that imports torch lazily."""

from __future__ import annotations

import subprocess
import sys
import types

import ncclx_migrate.backend as nb


def test_all_is_exactly_the_public_names() -> None:
    public = {
        n for n, v in vars(nb).items() if not n.startswith("_") and not isinstance(v, types.ModuleType)
    }
    public.discard("annotations")
    assert set(nb.__all__) == public
    assert len(nb.__all__) == len(public)  # no duplicates (ruff RUF022 keeps the order)


def test_importing_backend_does_not_import_torch() -> None:
    code = "import sys, ncclx_migrate.backend; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
