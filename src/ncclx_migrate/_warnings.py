"""``LegacyNCCLWarning`` and how it is emitted: attributed to user code, once per finding.

Controls, strongest first:

* ``warnings`` filters installed by code after ``import ncclx_migrate``;
* ``NCCLX_WARNINGS=error|ignore|once|default`` (installed as a filter for
  ``LegacyNCCLWarning`` the first time one is emitted, so it beats ``-W`` and
  ``PYTHONWARNINGS`` without code changes);
* ``-W`` / ``PYTHONWARNINGS`` / ``warnings.filterwarnings`` set before the import.

Unless ``NCCLX_WARNINGS`` is ``default`` or ``error``, each finding is emitted at most
once per process (one line per rank, not one per call).
"""

from __future__ import annotations

import os
import sys
import warnings

TYPE_CHECKING = False  # `typing` costs 11 ms at import time; mypy treats this name as True
if TYPE_CHECKING:
    from collections.abc import Hashable
    from types import FrameType

__all__ = [
    "MAX_MESSAGE", "MODES", "LegacyNCCLWarning", "clipped", "emit_user_warning", "reset_for_tests", "warn_legacy",
    "warning_text", "warnings_mode",
]

_PKG_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
# importlib's Python frames: import_module() and EntryPoint.load(), through which torch's
# backend discovery imports this package (its frozen _bootstrap frames are matched by name).
_IMPORTLIB_DIR = os.path.join(os.path.dirname(os.path.abspath(os.__file__)), "importlib") + os.sep
MODES = ("error", "ignore", "once", "default")
_ENV = "NCCLX_WARNINGS"


class LegacyNCCLWarning(FutureWarning):
    """Use of the legacy NCCL backend or of a name nccl2 ignores.

    Every message starts with ``[NCX...]``, the rule code ``ncclx migrate`` reports
    for the same pattern, and says how to migrate.
    """


# No lock: importing threading costs 3 ms of the 20 ms budget, and a race can at worst
# show one finding twice.
_seen: set[Hashable] = set()
_bad_mode_reported: set[str] = set()


def reset_for_tests() -> None:
    """Forget which findings were already emitted (tests only)."""
    _seen.clear()
    _bad_mode_reported.clear()


def warnings_mode() -> str | None:
    """The ``NCCLX_WARNINGS`` mode, or None when unset or invalid (invalid: reported once)."""
    raw = os.environ.get(_ENV)
    if raw is None or not raw.strip():
        return None
    mode = raw.strip().lower()
    if mode in MODES:
        return mode
    first = raw not in _bad_mode_reported
    _bad_mode_reported.add(raw)
    if first:
        _emit(f"{_ENV}={raw!r} is not one of {', '.join(MODES)}; ignoring it", RuntimeWarning)
    return None


def _ensure_env_filter(mode: str) -> None:
    # Re-added only when missing (a catch_warnings block may have dropped it):
    # adding a filter resets every "default"/"once" registry.
    for action, _msg, category, _mod, lineno in warnings.filters:
        if category is LegacyNCCLWarning and lineno == 0 and action == mode:
            return
    warnings.filterwarnings(mode, category=LegacyNCCLWarning)  # type: ignore[arg-type]


def _skip_prefixes() -> tuple[str, ...]:
    prefixes = [_PKG_DIR, _IMPORTLIB_DIR]
    torch = sys.modules.get("torch")
    torch_file = getattr(torch, "__file__", None)
    if torch_file:
        # torch.distributed calls our backend creator from inside init_process_group.
        prefixes.append(os.path.dirname(os.path.abspath(torch_file)) + os.sep)
    return tuple(prefixes)


def _is_internal(filename: str, prefixes: tuple[str, ...]) -> bool:
    if filename.startswith(prefixes):
        return True
    # importlib's bootstrap frames sit between an `import` statement and the module body.
    return "importlib" in filename and "_bootstrap" in filename


def _user_frame(prefixes: tuple[str, ...]) -> FrameType | None:
    """The innermost frame outside this package, torch and importlib."""
    frame: FrameType | None = sys._getframe(1)
    last = frame
    while frame is not None:
        if not _is_internal(frame.f_code.co_filename, prefixes):
            return frame
        last = frame
        frame = frame.f_back
    return last


def _emit(text: str, category: type[Warning]) -> None:
    """warnings.warn(text, category), attributed to the first frame outside this package,
    torch and importlib."""
    prefixes = _skip_prefixes()
    if sys.version_info >= (3, 12):
        warnings.warn(text, category, stacklevel=2, skip_file_prefixes=prefixes)
        return
    # 3.10/3.11: no skip_file_prefixes.  No stacklevel can be computed reliably
    # (warn() does not count importlib frames, and how many there are varies), so
    # find the frame ourselves and do what warn() does with it.
    frame = _user_frame(prefixes)
    if frame is None:
        warnings.warn(text, category, stacklevel=2)
        return
    globs = frame.f_globals
    warnings.warn_explicit(
        text,
        category,
        frame.f_code.co_filename,
        frame.f_lineno,
        module=globs.get("__name__", "<string>"),
        registry=globs.setdefault("__warningregistry__", {}),
        # No module_globals: for `python -c` its loader raises ImportError.
    )


# For this package's other warnings (e.g. a bad NCCLX_HANG_DUMP): same attribution.
emit_user_warning = _emit


# A warning's message stays within this many characters: what happened and what to do; the
# why, the evidence and the full fix are one command away (`ncclx explain CODE`).
MAX_MESSAGE = 120


def warning_text(code: str, message: str) -> str:
    """The message a LegacyNCCLWarning shows for ``code``."""
    return f"[{code}] {message} (`ncclx explain {code}`)"


def clipped(value: str, limit: int = 12) -> str:
    """``repr(value)``, cut to about ``limit`` characters: a user's value never makes a long line."""
    return repr(value) if len(value) <= limit else repr(value[: limit - 3] + "...")


def warn_legacy(code: str, message: str, *, key: Hashable | None = None) -> None:
    """Warn with ``LegacyNCCLWarning``, blaming the first frame outside ncclx_migrate and torch.

    ``key`` identifies the finding for the once-per-process rule (default: code + message).
    """
    mode = warnings_mode()
    if mode == "ignore":
        return
    dedup = mode not in ("default", "error")
    finding = (code, message) if key is None else key
    if dedup and finding in _seen:
        return
    if mode is not None:
        _ensure_env_filter(mode)
    _emit(warning_text(code, message), LegacyNCCLWarning)
    # Recorded only once shown: under `-W error` every occurrence raises.
    if dedup:
        _seen.add(finding)
