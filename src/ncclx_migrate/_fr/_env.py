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
# _torch.envvars.FR_BUFFER_NAMES, repeated: importing that table costs ~40 ms of `import ncclx_migrate`
# (tests/fr/test_api_errors.py keeps the two equal).
BUFFER_NAMES = ("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE")


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
    _warn_unusable_buffer()
    enable(seconds)


def _warn_unusable_buffer() -> None:
    """A non-integer buffer size kills the job at group creation: say so before it happens."""
    for name in BUFFER_NAMES:  # c10d: the first one set wins
        if name not in os.environ:
            continue
        value = os.environ[name]
        if not value.strip().lstrip("+-").isdigit():
            emit_user_warning(
                f"{name}={value!r} is not an integer: torch aborts the process (SIGABRT) or raises "
                f"ValueError at init_process_group, before any hang can be dumped; set {name} to a whole "
                "number of entries (default 2000) or unset it",
                RuntimeWarning,
            )
        return
