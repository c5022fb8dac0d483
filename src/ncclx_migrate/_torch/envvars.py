"""The one table of environment variables that the codemod, the doctor and the
import-time warnings all read.

Every row was established on the real 2.13.0 / 2.14.1 / 2.15.0 wheels (see
``docs/torch-versions.md``, "Environment variables: who reads which" and "Flight recorder per
backend"); ``evidence`` names the place.  Nothing here imports torch.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

from .releases import legacy_can_run

__all__ = [
    "ENV_VARS",
    "FR_BUFFER_NAMES",
    "FR_DUMP_FILE_NAMES",
    "FR_DUMP_ON_TIMEOUT_NAMES",
    "SHRINK_GROW_VAR",
    "TOGGLE_VAR",
    "EnvKind",
    "EnvVar",
    "Fix",
    "drop_allowed",
    "env_findings",
    "legacy_note",
    "lookup",
]

TOGGLE_VAR = "TORCH_DIST_USE_NCCL2"
SHRINK_GROW_VAR = "TORCH_NCCL2_RECONFIGURE_SHRINK_GROW"

# Precedence lists: c10d's getCvar takes the first name that is set.
FR_BUFFER_NAMES = ("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE")
FR_DUMP_FILE_NAMES = ("TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE")
FR_DUMP_ON_TIMEOUT_NAMES = ("TORCH_FR_DUMP_ON_TIMEOUT", "TORCH_NCCL_DUMP_ON_TIMEOUT")


class EnvKind(enum.Enum):
    TOGGLE = "toggle"  # TORCH_DIST_USE_NCCL2
    DEPRECATED = "deprecated"  # old spelling; a newer name exists (FR or TORCH_ prefix)
    IGNORED = "ignored"  # read by legacy only; nccl2 in 2.15 silently ignores it
    OBSOLETE = "obsolete"  # read by no backend in 2.15
    CURRENT = "current"  # a current name, listed so the doctor can explain it


class Fix(enum.Enum):
    ADD = "add"  # add the new name next to the old one (safe only in a form that defers to an inherited new name)
    RENAME = "rename"  # replace the old name (unsafe: removing a name is never safe)
    FLAG = "flag"  # explain only


_FIELDS = (
    "name", "kind", "replacement", "fix", "py_code", "file_code", "why", "evidence", "unsafe_fix"
)


class EnvVar:
    """One row; immutable.  Hand-written rather than ``@dataclass(frozen=True)``: importing
    dataclasses pulls in inspect (7-25 ms), and ``import ncclx_migrate`` loads this table
    whenever the environment holds a finding (budget 20 ms, benchmarks/bench_import.py)."""

    __slots__ = _FIELDS
    name: str
    kind: EnvKind
    replacement: str | None
    fix: Fix
    py_code: str  # rule code in Python files
    file_code: str  # rule code in shell/YAML/Dockerfile/.env files
    why: str
    evidence: str
    # Unsafe alternative to the safe fix (rename, or delete an obsolete name).
    unsafe_fix: Fix | None

    def __init__(
        self, name: str, kind: EnvKind, replacement: str | None, fix: Fix, py_code: str,
        file_code: str, why: str, evidence: str, unsafe_fix: Fix | None = None,
    ) -> None:
        values = (name, kind, replacement, fix, py_code, file_code, why, evidence, unsafe_fix)
        for field, value in zip(_FIELDS, values, strict=True):
            object.__setattr__(self, field, value)

    def __setattr__(self, field: str, value: object) -> None:
        raise AttributeError(f"EnvVar is immutable (tried to set {field})")

    def _values(self) -> tuple[object, ...]:
        return tuple(getattr(self, f) for f in _FIELDS)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, EnvVar) and self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        return "EnvVar(" + ", ".join(f"{f}={getattr(self, f)!r}" for f in _FIELDS) + ")"


_FR = "NCX120"
_IGN = "NCX122"
_OLD = "NCX123"
_FILES = "NCX203"

ENV_VARS: tuple[EnvVar, ...] = (
    EnvVar(
        TOGGLE_VAR, EnvKind.TOGGLE, None, Fix.FLAG, "NCX101", "NCX201",
        'Rollback toggle. 2.15: only the literal "0" makes "nccl" build the legacy '
        'ProcessGroupNCCL; 2.14: only the literal "1" opts in to nccl2. Read once, when '
        '"nccl" is first registered. The rollback was announced for 2.15 only.',
        "distributed_c10d.py:961-983 (2.15.0), :829-842 (2.14.1); pytorch#192281",
    ),
    # --- flight recorder: deprecated TORCH_NCCL_* spellings of TORCH_FR_* names ---
    EnvVar(
        "TORCH_NCCL_TRACE_BUFFER_SIZE", EnvKind.DEPRECATED, "TORCH_FR_BUFFER_SIZE", Fix.ADD,
        _FR, _FILES,
        "Deprecated alias (warns); when both are set the FR name wins. The legacy constructor "
        "(the default before 2.15, the rollback on 2.15) reads only the old name.",
        "alias table (2.15.0); runtime buffer-precedence check; docs/torch-versions.md",
    ),
    EnvVar(
        "TORCH_NCCL_DEBUG_INFO_TEMP_FILE", EnvKind.DEPRECATED, "TORCH_FR_DUMP_TEMP_FILE", Fix.ADD,
        _FR, _FILES,
        "Deprecated alias of the dump-file prefix; one DebugInfoWriter serves every backend "
        "and the FR name wins. Renaming is verified on 2.15 only.",
        "runtime 2.15.0 dump-path check; docs/torch-versions.md",
        unsafe_fix=Fix.RENAME,
    ),
    EnvVar(
        "TORCH_NCCL_DUMP_ON_TIMEOUT", EnvKind.DEPRECATED, "TORCH_FR_DUMP_ON_TIMEOUT", Fix.ADD,
        _FR, _FILES,
        "Legacy reads only this name; the nccl2 FR hook prefers TORCH_FR_DUMP_ON_TIMEOUT. "
        "Set both to control both backends; do not rename.",
        "alias table (2.15.0) FlightRecorderHook::onAbort; docs/torch-versions.md",
    ),
    EnvVar(
        "TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC", EnvKind.DEPRECATED,
        "TORCH_FR_WAIT_TIMEOUT_DUMP_MILSEC", Fix.ADD, _FR, _FILES,
        "Legacy and nccl2 abortProcess read only this name; the FR hook prefers the FR name. "
        "Keep the old one.",
        "alias table (2.15.0); docs/torch-versions.md",
    ),
    EnvVar(
        "TORCH_NCCL_TRACE_CPP_STACK", EnvKind.DEPRECATED, "TORCH_FR_CPP_STACK", Fix.ADD,
        _FR, _FILES,
        "The FlightRecorder constructors read TORCH_FR_CPP_STACK first.",
        "disassembly of the FlightRecorder constructors (2.15.0)",
    ),
    # --- unprefixed names c10d still accepts with a deprecation warning ---
    EnvVar(
        "NCCL_ASYNC_ERROR_HANDLING", EnvKind.DEPRECATED, "TORCH_NCCL_ASYNC_ERROR_HANDLING",
        Fix.ADD, _OLD, _FILES,
        "Old unprefixed spelling; both backends accept it as an alias with a deprecation warning.",
        "alias table (2.15.0); pytorch#114077",
    ),
    EnvVar(
        "NCCL_BLOCKING_WAIT", EnvKind.DEPRECATED, "TORCH_NCCL_BLOCKING_WAIT", Fix.ADD, _OLD, _FILES,
        "Old unprefixed spelling; both backends accept it as an alias with a deprecation warning.",
        "alias table (2.15.0); pytorch#114077",
    ),
    EnvVar(
        "NCCL_ENABLE_TIMING", EnvKind.DEPRECATED, "TORCH_NCCL_ENABLE_TIMING", Fix.ADD, _OLD, _FILES,
        "Old unprefixed spelling; both backends accept it as an alias with a deprecation warning.",
        "alias table (2.15.0); pytorch#114077",
    ),
    # --- read by legacy only; silently ignored by nccl2 in 2.15 ---
    EnvVar(
        "TORCH_NCCL_NAN_CHECK", EnvKind.IGNORED, "TORCH_DIST_NAN_CHECK", Fix.FLAG, _IGN, _FILES,
        "nccl2 ignores it. TORCH_DIST_NAN_CHECK=1 attaches NanCheckHook to every group (2.14+), "
        "which checks inputs only and, under legacy, adds a second check.",
        "distributed_c10d.py:3186-3189 (2.15.0); docs/torch-versions.md",
        unsafe_fix=Fix.ADD,
    ),
    *(
        EnvVar(
            name, EnvKind.IGNORED, None, Fix.FLAG, _IGN, _FILES,
            "Read by the legacy ProcessGroupNCCL only; nccl2 in 2.15 silently ignores it "
            "(no heartbeat monitor, no desync debug). It may start to apply in a later release.",
            "disassembly and alias tables (2.15.0); docs/torch-versions.md",
        )
        for name in (
            "TORCH_NCCL_ENABLE_MONITORING",
            "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC",
            "TORCH_NCCL_COORD_CHECK_MILSEC",
            "TORCH_NCCL_LOG_CPP_STACK_ON_UNCLEAN_SHUTDOWN",
            "TORCH_NCCL_DESYNC_DEBUG",
            "NCCL_DESYNC_DEBUG",
            "TORCH_NCCL_PROPAGATE_ERROR",
            "TORCH_NCCL_RETHROW_CUDA_ERRORS",
            "TORCH_NCCL_TEARDOWN_ON_TIMEOUT",
            "TORCH_NCCL_EXTRA_DUMP_ON_EXEC",
            "TORCH_NCCL_BCAST_UNIQUEID",
            "TORCH_NCCL_DEBUG_INFO_PIPE_FILE",
            "TORCH_NCCL_SHOW_EAGER_INIT_P2P_SERIALIZATION_WARNING",
            "TORCH_NCCL_NONBLOCKING_TIMEOUT",
            "TORCH_NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK",
        )
    ),
    EnvVar(
        "TORCH_NCCL_AVOID_RECORD_STREAMS", EnvKind.OBSOLETE, None, Fix.FLAG, _IGN, _FILES,
        "Deprecated in 2.14 (it became the default); gone from every 2.15 library, so it does "
        "nothing. Delete it unless your own code reads it back.",
        "binary string (2.14.1 libtorch_cuda.so); absent from 2.15.0 binaries",
        unsafe_fix=Fix.RENAME,  # RENAME with no replacement = delete the line
    ),
    # --- current names, for the doctor's explanations ---
    EnvVar(
        SHRINK_GROW_VAR, EnvKind.CURRENT, None, Fix.FLAG, "", "",
        "Opt-in fast reconfigure (ncclCommShrink/Grow) for nccl2; needs NCCL >= 2.29 and must "
        "be set on every rank.",
        "2.15.0 libtorch_cuda.so strings; docs/torch-versions.md",
    ),
    EnvVar(
        "TORCH_FR_DUMP_DYNAMIC_FILE_NAME", EnvKind.CURRENT, None, Fix.FLAG, "", "",
        "When 1 the dump path is used with no rank suffix, so ranks overwrite each other.",
        "observed on 2.15.0 (dynamic file name); docs/torch-versions.md",
    ),
)

_BY_NAME: dict[str, EnvVar] = {v.name: v for v in ENV_VARS}


# The oldest release on which a fix may drop a row's old name (delete it, or rename it away):
# an obsolete name is absent from every 2.15 library but read before it (TORCH_NCCL_AVOID_RECORD_
# STREAMS: 2.14.1's libtorch_cuda.so); a rename is verified on 2.15 only, and the legacy
# ProcessGroupNCCL of earlier releases reads only the old names.
DROP_FROM = (2, 15)


def drop_allowed(row: EnvVar, oldest: tuple[int, int]) -> bool:
    """Whether a fix may remove ``row``'s name from a project whose oldest supported torch is
    ``oldest`` (``--target-torch``, else the project's own bound): not while a release it
    supports still reads the name."""
    return row.kind is EnvKind.TOGGLE or oldest >= DROP_FROM


def drop_blocked(row: EnvVar, oldest: tuple[int, int]) -> str:
    """The detail's sentence on why the name stays."""
    return (f" Kept: torch {oldest[0]}.{oldest[1]}, the oldest release this project supports, still reads "
            f"{row.name} (removing it is right from torch {DROP_FROM[0]}.{DROP_FROM[1]} on); raise the "
            "project's torch bound (or --target-torch) to have a fix remove it.")


def legacy_note(row: EnvVar, target: tuple[int, int]) -> str:
    """The detail's sentence on the legacy backend for a project whose oldest torch is
    ``target``: on a release without it, nothing legacy reads the old name any more."""
    if legacy_can_run(target) or row.kind not in (EnvKind.DEPRECATED, EnvKind.IGNORED):
        return ""
    return (f" Torch {target[0]}.{target[1]}, the oldest release this project supports, has no legacy "
            f"backend: only jobs on older releases read {row.name}.")


def lookup(name: str) -> EnvVar | None:
    """The table row for ``name``, or None."""
    return _BY_NAME.get(name)


def env_findings(environ: Mapping[str, str]) -> list[EnvVar]:
    """Rows of the table (not CURRENT) whose variable is set in ``environ``, in table order."""
    return [v for v in ENV_VARS if v.kind is not EnvKind.CURRENT and v.name in environ]
