"""What IPython hands the shell for a notebook's `!` line or `%env` magic: its own
``InteractiveShell.var_expand`` (``$name``, ``{expr}``, ``$$`` and ``{{ }}`` escapes; the whole
line left as written when one field fails), in a kernel namespace that holds ``nproc = 4``."""

from __future__ import annotations

import os
import tempfile
from typing import Any

import pytest

NAMESPACE = {"nproc": 4}
_SHELL: list[Any] = []


def _shell() -> Any:
    if not _SHELL:
        pytest.importorskip("IPython", reason="IPython (the `test` extra) checks notebook shell lines")
        os.environ.setdefault("IPYTHONDIR", tempfile.mkdtemp(prefix="ncclx-ipython-"))
        from IPython.core.interactiveshell import InteractiveShell
        from traitlets.config import Config

        config = Config()
        config.HistoryManager.enabled = False
        _SHELL.append(InteractiveShell.instance(config=config))
    return _SHELL[0]


def var_expand(command: str) -> str:
    """``command`` (after the `!`, or a magic's argument) as IPython expands it: from a frame
    whose locals are the kernel's namespace, as a cell's top-level `!` line is."""
    shell = _shell()
    ns: dict[str, Any] = {**NAMESPACE, "__shell": shell, "__command": command}
    shell.user_ns.update(NAMESPACE)
    exec("__out = __shell.var_expand(__command, depth=0)", ns)
    return str(ns["__out"])
