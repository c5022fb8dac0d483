"""Where torch writes flight-recorder dumps, read the way c10d reads it (torch-free)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from .._torch.envvars import FR_DUMP_FILE_NAMES

__all__ = ["default_prefix", "dump_prefix", "extra_recorder_path", "rank_dump_path"]


def default_prefix(environ: Mapping[str, str]) -> str:
    """``$XDG_CACHE_HOME/torch/comm_lib_trace_rank_`` (``~/.cache`` when unset), as c10d."""
    cache = environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return str(Path(cache) / "torch" / "comm_lib_trace_rank_")


def dump_prefix(environ: Mapping[str, str] | None = None) -> str:
    """The dump file prefix: first of TORCH_FR_DUMP_TEMP_FILE, its old alias, the default.

    c10d's getCvar takes the first name that is set and non-empty (observed on 2.15.0).
    """
    env = os.environ if environ is None else environ
    for name in FR_DUMP_FILE_NAMES:
        value = env.get(name)
        if value:
            return value
    return default_prefix(env)


def rank_dump_path(rank: int, environ: Mapping[str, str] | None = None) -> Path:
    """``<prefix><rank>``: the file torch's own DebugInfoWriter writes for this rank.

    TORCH_FR_DUMP_DYNAMIC_FILE_NAME=1 makes torch drop the rank suffix so ranks
    overwrite each other (observed on 2.15.0); ncclx always appends the rank.
    """
    return Path(dump_prefix(environ) + str(rank))


def extra_recorder_path(rank: int, recorder: str, environ: Mapping[str, str] | None = None) -> Path:
    """Where a rank's second (third...) recorder goes, next to ``<prefix><rank>``.

    The name neither contains the prefix nor ends in a digit, so torchfrtrace
    (which reads every file containing the prefix, and infers prefixes from
    names ending in digits) skips it; ``ncclx fr analyze`` reads it.
    """
    folder = Path(dump_prefix(environ) + "0").parent
    return folder / f"ncclx-{recorder}-rank{rank}.pkl"
