"""What each torch release does, torch-free: phases, what a backend name builds for each
``TORCH_DIST_USE_NCCL2`` value, default timeouts, and the NCCL libraries a release needs.

One place for version gates; the doctor, the codemod (``--target-torch``) and the
backend package read them (what is installed here is ``probe``'s).  Sources: ``docs/torch-versions.md`` ("Backend name resolution",
"NCCL in each wheel", "Reconfigure").
"""

from __future__ import annotations

import enum

# packaging (with typing) costs tens of ms to import; `import ncclx_migrate` (budget 20 ms)
# reads Phase from here, so phase_for_version imports it where it parses a version string.

__all__ = [
    "BACKEND_NAMES",
    "BUILTIN_BACKENDS",
    "DEVICE_ID_FROM",
    "ENV_UNNAMED",
    "GENERIC_TIMEOUT_MIN",
    "NAME_BUILDS",
    "NCCL_BUILDS",
    "NCCL_FLOOR",
    "NCCL_RECONFIGURE_MIN",
    "NCCL_SHRINK_GROW_MIN",
    "NCCL_TIMEOUT_MIN",
    "NCCL_TIMEOUT_NAMES",
    "RCCL_RECONFIGURE_MIN",
    "SHIM_BUILDS",
    "SUPPORTED_RELEASES",
    "TARGET_RANGE",
    "TOGGLE_VALUES",
    "USE_NCCL2_RETURNS",
    "Phase",
    "default_timeout_minutes",
    "legacy_can_run",
    "nccl_builds",
    "phase_for_registry",
    "phase_for_version",
    "release_of",
    "target_range_error",
    "toggle_meaning",
]

NCCL_FLOOR = (2, 23, 0)  # compile-time floor raised by pytorch#186292
NCCL_RECONFIGURE_MIN = (2, 28, 0)  # ncclCommRevoke; gate of supports_reconfigure (pytorch#192275)
NCCL_SHRINK_GROW_MIN = (2, 29, 0)  # ncclCommGrow/GetUniqueId; fast path compiled only from here
# pytorch#194774 (open when reviewed) gates ROCm reconfigure at RCCL 2.30.4, the first
# RCCL with ncclCommRevoke (ROCm 7.14).  Not in the 2.15 CUDA wheel: UNCONFIRMED for ROCm 2.15.
RCCL_RECONFIGURE_MIN = (2, 30, 4)

# init_process_group(device_id=...) exists from torch 2.3 (docs/torch-versions.md, "Device binding"): the
# device_id fixes (NCX130/NCX134) would be a TypeError on an older release.
DEVICE_ID_FROM = (2, 3)

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


def legacy_can_run(release: tuple[int, int]) -> bool:
    """Whether a job on ``release`` can still build the legacy ProcessGroupNCCL (its default
    before 2.15, the rollback on 2.15; the rollback was announced for 2.15 only)."""
    return phase_for_version(release) is not Phase.ROLLBACK_GONE


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


# --------------------------------------------------------------------------- per release
# What each supported release does for every toggle value, backend name and env variable
# the toolkit reasons about.  Measured on the real wheels (2.13.0 CPU; 2.14.1 and 2.15.0
# CUDA, no GPU needed) by tests/torch_probe.py: tests/test_torch_versions.py runs it under
# each release and asserts these rows, and renders docs/torch-versions.md from them.

SUPPORTED_RELEASES = ("2.13", "2.14", "2.15")
BACKEND_NAMES = ("nccl", "nccl2", "nccl-legacy", "nccl-lazy")
TOGGLE_VALUES = ("unset", "0", "1", "false", "true")  # TORCH_DIST_USE_NCCL2 values
_L, _N2, _LZ = "nccl-legacy", "nccl2", "nccl-lazy"  # implementations, by registry name

# What "nccl" builds for each TORCH_DIST_USE_NCCL2 value (2.13 builds it in: always legacy;
# 2.14's registrar opts in on the literal "1" only, 2.15's rolls back on the literal "0" only:
# distributed_c10d.py:829-842 (2.14.1), :961-983 (2.15.0)).
NCCL_BUILDS: dict[str, dict[str, str]] = {
    "2.13": dict.fromkeys(TOGGLE_VALUES, _L),
    "2.14": {"unset": _L, "0": _L, "1": _N2, "false": _L, "true": _L},
    "2.15": {"unset": _N2, "0": _L, "1": _N2, "false": _N2, "true": _N2},
}
# The release whose NCCL_BUILDS row a phase reads (each phase was measured on that release).
_PHASE_RELEASE = {Phase.NO_NCCL2: "2.13", Phase.OPT_IN: "2.14", Phase.DEFAULT: "2.15"}


def toggle_meaning(value: str | None, torch_minor: tuple[int, int] | None = None) -> str:
    """What ``TORCH_DIST_USE_NCCL2=value`` does; only the literal "0" and "1" count.

    Returns one of ``"unset"``, ``"rollback"`` (``"0"``), ``"opt-in"`` (``"1"``)
    or ``"no-effect"`` (any other spelling, e.g. "false", which does NOT roll back).
    """
    del torch_minor  # same reading on 2.14 and 2.15; kept for a future release
    if value is None:
        return "unset"
    if value == "0":
        return "rollback"
    if value == "1":
        return "opt-in"
    return "no-effect"


def nccl_builds(phase: Phase, toggle: str | None) -> str:
    """What "nccl" builds in ``phase`` with TORCH_DIST_USE_NCCL2=``toggle`` (None: unset): the
    NCCL_BUILDS cell.  With the rollback gone (announced past 2.15) it is nccl2 whatever the value."""
    if phase is Phase.ROLLBACK_GONE:
        return _N2
    # torch compares with the literals "0" and "1" only: any other value builds what "true" does.
    column = {"unset": "unset", "rollback": "0", "opt-in": "1"}.get(toggle_meaning(toggle), "true")
    return NCCL_BUILDS[_PHASE_RELEASE[phase]][column]


# What torch's own registration of each explicit name builds (None: torch has no such name).
# 2.14 already has all three (entry_points.txt; distributed_c10d.py:844-870, 2.14.1).
NAME_BUILDS: dict[str, dict[str, str | None]] = {
    "2.13": {_N2: None, _L: None, _LZ: None},
    "2.14": {_N2: _N2, _L: _L, _LZ: _LZ},
    "2.15": {_N2: _N2, _L: _L, _LZ: _LZ},
}
# Names whose groups get NCCL's default timeout without timeout=; every other name gets the
# generic one.  _get_default_timeout tests `backend == Backend.NCCL` only up to 2.14
# (distributed_c10d.py:1387-1400, 2.14.1) and lists all four in 2.15 (:1552-1565, 2.15.0).
NCCL_TIMEOUT_NAMES: dict[str, tuple[str, ...]] = {
    "2.13": ("nccl",),
    "2.14": ("nccl",),
    "2.15": BACKEND_NAMES,
}
NCCL_TIMEOUT_MIN = 10  # torch/distributed/constants.py default_pg_nccl_timeout
GENERIC_TIMEOUT_MIN = 30  # default_pg_timeout
# ncclx_migrate.backend on each release: what install_legacy_shim() and use_nccl2() return.
SHIM_BUILDS: dict[str, str] = {"2.13": "legacy", "2.14": "torch", "2.15": "torch"}
USE_NCCL2_RETURNS: dict[str, str] = {"2.13": "legacy", "2.14": "nccl2", "2.15": "nccl2"}
# Variables of the env table (_torch/envvars.py: names and replacements) that no string of torch's
# libtorch*.so or torch/distributed/*.py contains.  The 2.13 wheel is the CPU build, which
# has no libtorch_cuda.so: its NCCL-only names are absent for that reason.
ENV_UNNAMED: dict[str, tuple[str, ...]] = {
    "2.13": (
        "NCCL_DESYNC_DEBUG", "TORCH_DIST_NAN_CHECK", "TORCH_DIST_USE_NCCL2",
        "TORCH_FR_DUMP_ON_TIMEOUT", "TORCH_FR_WAIT_TIMEOUT_DUMP_MILSEC",
        "TORCH_NCCL2_RECONFIGURE_SHRINK_GROW", "TORCH_NCCL_AVOID_RECORD_STREAMS",
        "TORCH_NCCL_BCAST_UNIQUEID", "TORCH_NCCL_COORD_CHECK_MILSEC",
        "TORCH_NCCL_DEBUG_INFO_PIPE_FILE", "TORCH_NCCL_DESYNC_DEBUG", "TORCH_NCCL_DUMP_ON_TIMEOUT",
        "TORCH_NCCL_ENABLE_MONITORING", "TORCH_NCCL_EXTRA_DUMP_ON_EXEC",
        "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC", "TORCH_NCCL_LOG_CPP_STACK_ON_UNCLEAN_SHUTDOWN",
        "TORCH_NCCL_NAN_CHECK", "TORCH_NCCL_NONBLOCKING_TIMEOUT", "TORCH_NCCL_PROPAGATE_ERROR",
        "TORCH_NCCL_RETHROW_CUDA_ERRORS", "TORCH_NCCL_SHOW_EAGER_INIT_P2P_SERIALIZATION_WARNING",
        "TORCH_NCCL_TEARDOWN_ON_TIMEOUT", "TORCH_NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK",
        "TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC",
    ),
    "2.14": (
        "TORCH_FR_DUMP_ON_TIMEOUT", "TORCH_FR_WAIT_TIMEOUT_DUMP_MILSEC",
        "TORCH_NCCL2_RECONFIGURE_SHRINK_GROW", "TORCH_NCCL_TEARDOWN_ON_TIMEOUT",
    ),
    "2.15": ("TORCH_NCCL_AVOID_RECORD_STREAMS",),
}


def release_of(version: str | tuple[int, int]) -> str:
    """"2.14" for "2.14.1+cu130" or (2, 14)."""
    if isinstance(version, tuple):
        return f"{version[0]}.{version[1]}"
    return ".".join(version.split("+")[0].split(".")[:2])


def default_timeout_minutes(release: str, name: str) -> int | None:
    """Minutes a group of backend ``name`` waits on ``release`` when created without
    ``timeout=`` (None: a release this table does not cover)."""
    names = NCCL_TIMEOUT_NAMES.get(release)
    if names is None:
        return None
    return NCCL_TIMEOUT_MIN if name in names else GENERIC_TIMEOUT_MIN
