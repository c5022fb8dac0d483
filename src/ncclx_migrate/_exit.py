"""A process that imported torch ends without the interpreter's last garbage collections."""

from __future__ import annotations

import atexit
import gc

__all__ = ["skip_final_gc"]


def skip_final_gc() -> None:
    """At exit, freeze every object left so the final collections skip them.

    Those collections walk every object torch made, for nothing as the process is ending:
    0.3-0.4 s of CPU per process on torch 2.13-2.15 here (docs/performance.md). Output stays
    whole: ncclx closes its files with ``with``, and Python flushes stdout/stderr itself.
    atexit runs handlers last-registered first, so those registered later (torch's) still run
    before the freeze.
    """
    atexit.register(gc.freeze)
