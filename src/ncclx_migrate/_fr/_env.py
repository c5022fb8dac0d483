"""NCCLX_HANG_DUMP=SECONDS, read once at ``import ncclx_migrate``.

Set: a daemon thread starts and sleeps until torch.distributed has a default
group (it never imports torch; see ``_watchdog``).  Unset or empty: nothing
happens beyond one ``os.environ`` lookup.
"""

from __future__ import annotations

import os

from .._warnings import emit_user_warning

__all__ = ["ENV_VAR", "start_from_env"]

ENV_VAR = "NCCLX_HANG_DUMP"


def start_from_env() -> None:
    """Start the hang watchdog when NCCLX_HANG_DUMP is set (must not import torch)."""
    value = os.environ.get(ENV_VAR, "").strip()
    if not value or value == "0":
        return
    from ._watchdog import enable, parse_seconds

    try:
        seconds = parse_seconds(value)
    except ValueError:
        emit_user_warning(
            f"{ENV_VAR}={value!r} is not a number of seconds > 0; the hang watchdog is off "
            f"(set e.g. {ENV_VAR}=300, or unset it)",
            RuntimeWarning,
        )
        return
    enable(seconds)
