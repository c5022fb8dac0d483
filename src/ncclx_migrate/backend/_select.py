"""``use_nccl2()``: make ``backend="nccl"`` build ProcessGroupNCCL2 on every torch that has it.

Why a selection call and not a backend name of our own: torch keys behaviour off the
*name* "nccl" and ``BackendType.NCCL`` (default timeout, ``nn.functional``, sharded
tensors, pipelining, ``c10d_logger``); any other name is CUSTOM and loses all of it
(docs/backend.md lists the places).  So we keep the name and choose its creator: torch's
own ``_register_builtin_nccl_backend`` runs once with the toggle read as opt-in, which
registers torch's ``_create_nccl2_process_group`` with ``BackendType.NCCL`` and keeps the
2.15 flight-recorder bookkeeping (``_FR_SELF_RECORDING_BACKENDS``) in step.
"""

from __future__ import annotations

import os
from typing import Any

from .._warnings import clipped, warn_legacy
from ._legacy import install_legacy_shim
from ._torch import c10d, torch_version

__all__ = ["BackendSelectionError", "nccl_creator", "use_nccl2"]

_TOGGLE = "TORCH_DIST_USE_NCCL2"
_REQUIRE = "NCCLX_REQUIRE_NCCL2"
_LABELS = {"nccl-legacy": "the legacy ProcessGroupNCCL", "nccl-lazy": "ProcessGroupNCCLLazy"}


class BackendSelectionError(RuntimeError):
    """``use_nccl2()`` cannot make "nccl" build nccl2 in this process."""


def nccl_creator() -> str | None:
    """What "nccl" is registered to now: "nccl2", "nccl-legacy", another creator's name, or
    None when "nccl" is not registered yet (or built in: torch 2.13)."""
    from .._torch.probe import registered_implementation

    return registered_implementation("nccl")


def _register_nccl_as_nccl2(mod: Any) -> None:
    registrar = getattr(mod, "_register_builtin_nccl_backend", None)
    if registrar is None:
        _register_directly(mod)
        return
    saved = os.environ.get(_TOGGLE)
    # 2.14 opts in on the literal "1"; 2.15 rolls back only on "0".
    os.environ[_TOGGLE] = "1"
    try:
        registrar()
    finally:
        if saved is None:
            del os.environ[_TOGGLE]
        else:
            os.environ[_TOGGLE] = saved


def _register_directly(mod: Any) -> None:
    """Fallback for a torch whose registrar is missing or ignores the toggle: what torch's
    registrar does for nccl2 (distributed_c10d.py:961-983, 2.15.0)."""
    backend = mod.Backend
    backend.register_backend(
        backend.NCCL,
        mod._create_nccl2_process_group,
        extended_api=True,
        devices=backend.backend_capability[backend.NCCL],
        _backend_type=mod.ProcessGroup.BackendType.NCCL,
    )
    self_recording = getattr(mod, "_FR_SELF_RECORDING_BACKENDS", None)
    if self_recording is not None:
        self_recording.discard(backend.NCCL)


OVERRIDDEN = f'{_TOGGLE}=0 is overridden by use_nccl2(): "nccl" is nccl2 here; unset it'


def no_nccl2_message(major: int, minor: int, require: str) -> str:
    """NCX103 from use_nccl2() on a torch without nccl2, NCCLX_REQUIRE_NCCL2 at ``require``."""
    # A "true"/"yes" that silently falls back would defeat the variable: say it did not apply.
    why = f'{_REQUIRE}={clipped(require, 8)} is not "1"' if require not in ("", "0") else f"{_REQUIRE}=1 fails instead"
    return f"torch {major}.{minor} has no nccl2: upgrade to 2.14+ ({why})"


def use_nccl2() -> str:
    """Make ``backend="nccl"`` build ``ProcessGroupNCCL2`` whatever ``TORCH_DIST_USE_NCCL2`` says.

    Call it before the first process group (``init_process_group`` or ``new_group``
    naming "nccl", explicitly or through ``"cpu:gloo,cuda:nccl"`` / the CUDA default,
    registers it and torch reads the toggle then).
    Also installs the ``"nccl-legacy"`` shim (``install_legacy_shim()``).
    Idempotent.  Returns what "nccl" builds: ``"nccl2"``, or ``"legacy"`` on a torch
    without nccl2 (2.13), where it warns (``LegacyNCCLWarning``, NCX103) or, with
    ``NCCLX_REQUIRE_NCCL2=1``, raises ``BackendSelectionError``.  The return says what
    "nccl" builds, not that it can run: without a visible GPU it is still ``"nccl2"`` and
    ``init_process_group("nccl")`` raises torch's "nccl2 requires at least one CUDA device".
    """
    mod = c10d()
    install_legacy_shim()
    if getattr(mod, "_create_nccl2_process_group", None) is None:
        major, minor = torch_version()
        require = os.environ.get(_REQUIRE, "")
        if require == "1":
            raise BackendSelectionError(
                f"torch {major}.{minor} has no nccl2 and {_REQUIRE}=1 requires it: "
                "upgrade to torch 2.14 or later, or unset NCCLX_REQUIRE_NCCL2 to run the legacy backend"
            )
        warn_legacy("NCX103", no_nccl2_message(major, minor, require), key="use_nccl2:no-nccl2")
        return "legacy"
    current = nccl_creator()
    if current == "nccl2":
        return "nccl2"
    if current is not None:
        raise BackendSelectionError(
            f'"nccl" is already registered to {_LABELS.get(current, current)} in this process '
            f"({_TOGGLE}={os.environ.get(_TOGGLE)!r} was read when the first process group "
            'or new_group naming "nccl" registered it): call '
            "ncclx_migrate.backend.use_nccl2() before the first process group"
        )
    if os.environ.get(_TOGGLE) == "0":
        warn_legacy("NCX101", OVERRIDDEN, key="use_nccl2:toggle-overridden")
    _register_nccl_as_nccl2(mod)
    if nccl_creator() != "nccl2":
        # A torch whose registrar no longer reads the toggle: register torch's creator ourselves.
        mod.Backend._plugins.pop("NCCL", None)
        _register_directly(mod)
    if nccl_creator() != "nccl2":
        raise BackendSelectionError(
            f'could not register "nccl" with nccl2 on torch {".".join(map(str, torch_version()))}; '
            "please report this with `ncclx doctor` output"
        )
    return "nccl2"
