"""Torch-free facts about torch releases and the NCCL libraries they need.

One place for version gates; the doctor, the codemod (``--target-torch``) and the
backend package read them.  Sources: ``shared/reference/nccl2-compat.md`` §1, §6
and ``flight-recorder-and-reconfigure.md`` §2.3.
"""

from __future__ import annotations

import enum

# importlib.metadata and packaging cost ~45 ms to import; `import ncclx_migrate`
# (budget 20 ms) reads Phase from here, so both are imported where used.

__all__ = [
    "BUILTIN_BACKENDS",
    "NCCL_FLOOR",
    "NCCL_RECONFIGURE_MIN",
    "NCCL_SHRINK_GROW_MIN",
    "RCCL_RECONFIGURE_MIN",
    "TARGET_RANGE",
    "Phase",
    "backend_entry_points",
    "installed_torch_version",
    "phase_for_registry",
    "phase_for_version",
    "target_range_error",
]

NCCL_FLOOR = (2, 23, 0)  # compile-time floor raised by pytorch#186292
NCCL_RECONFIGURE_MIN = (2, 28, 0)  # ncclCommRevoke; gate of supports_reconfigure (pytorch#192275)
NCCL_SHRINK_GROW_MIN = (2, 29, 0)  # ncclCommGrow/GetUniqueId; fast path compiled only from here
# pytorch#194774 (open when reviewed) gates ROCm reconfigure at RCCL 2.30.4, the first
# RCCL with ncclCommRevoke (ROCm 7.14).  Not in the 2.15 CUDA wheel: UNCONFIRMED for ROCm 2.15.
RCCL_RECONFIGURE_MIN = (2, 30, 4)

# --target-torch: from 2.0 to one release past the newest these facts were checked on (2.15;
# 2.16 is judged by what was announced for it).  Beyond that the tool would only guess.
TARGET_RANGE = ((2, 0), (2, 16))

# Backends torch.distributed knows without any entry point (Backend.backend_list in 2.13-2.15,
# less "undefined"); entry points in the torch.distributed.backends group add to them.
BUILTIN_BACKENDS = ("gloo", "nccl", "mpi", "ucc", "xccl", "fake")


def target_range_error(target: tuple[int, int]) -> str | None:
    """Why ``target`` is outside TARGET_RANGE (None: inside)."""
    low, high = TARGET_RANGE
    if low <= target <= high:
        return None
    return (f"torch {target[0]}.{target[1]} is outside the releases this tool knows "
            f"({low[0]}.{low[1]} to {high[0]}.{high[1]})")


class Phase(enum.Enum):
    """Where a torch build stands in the nccl2 transition."""

    NO_NCCL2 = "no-nccl2"  # 2.13 and before: "nccl" is ProcessGroupNCCL, no nccl2 name
    OPT_IN = "opt-in"  # 2.14: "nccl" is legacy unless TORCH_DIST_USE_NCCL2=1
    DEFAULT = "default"  # 2.15: "nccl" is nccl2 unless TORCH_DIST_USE_NCCL2=0; nccl-legacy exists
    ROLLBACK_GONE = "rollback-gone"  # nccl2 is the default and nccl-legacy is gone


def phase_for_version(version: str | tuple[int, int]) -> Phase:
    """The phase a release is announced to be in (used for --target-torch)."""
    if isinstance(version, tuple):
        major, minor = version
    else:
        from packaging.version import InvalidVersion, Version

        try:
            rel = Version(version).release
        except InvalidVersion as exc:
            raise ValueError(f"not a torch version: {version!r}") from exc
        major, minor = rel[0], rel[1] if len(rel) > 1 else 0
    if (major, minor) < (2, 14):
        return Phase.NO_NCCL2
    if (major, minor) == (2, 14):
        return Phase.OPT_IN
    if (major, minor) == (2, 15):
        return Phase.DEFAULT
    return Phase.ROLLBACK_GONE


def phase_for_registry(names: set[str], nccl_is_nccl2_by_default: bool | None) -> Phase:
    """The phase read off the backend registry rather than the version number.

    ``names`` are the torch.distributed.backends entry points; ``nccl_is_nccl2_by_default``
    says what the "nccl" registrar picks with TORCH_DIST_USE_NCCL2 unset (None: unknown).
    """
    if "nccl2" not in names:
        return Phase.NO_NCCL2
    if nccl_is_nccl2_by_default is False:
        return Phase.OPT_IN
    if "nccl-legacy" not in names:
        return Phase.ROLLBACK_GONE
    return Phase.DEFAULT


def installed_torch_version() -> str | None:
    """torch's version from package metadata, without importing torch."""
    from importlib import metadata

    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return None


def backend_entry_points() -> dict[str, str]:
    """torch.distributed.backends entry points (name -> target), without importing torch.

    Only torch's own: ncclx-migrate registers a ``nccl-legacy`` shim in the same group.
    """
    from importlib import metadata

    return {
        ep.name: ep.value
        for ep in metadata.entry_points(group="torch.distributed.backends")
        if not ep.value.startswith("ncclx_migrate.")
    }
