"""The ``"nccl-legacy"`` shim: the rollback name on every torch, with a LegacyNCCLWarning.

* torch 2.14/2.15 have the name: its creator is wrapped so the first group built with it
  warns (NCX103, once per process, blaming the user's ``init_process_group``/``new_group``).
* torch 2.13 (no name, "nccl" is legacy) and a torch whose rollback is gone lack it: the
  name is registered here, mapped to what exists (the legacy ProcessGroupNCCL if torch still
  has it, else nccl2), and warns the same way.

Reached three ways: ``install_legacy_shim()`` / ``use_nccl2()`` in training code, or
torch's own entry-point discovery (2.14+), which finds ``register_nccl_legacy`` through
ncclx-migrate's ``torch.distributed.backends`` entry point.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from .._warnings import warn_legacy
from ._torch import c10d, dist, torch_version

__all__ = ["LEGACY_NAME", "install_legacy_shim", "register_nccl_legacy"]

LEGACY_NAME = "nccl-legacy"
_KEY = LEGACY_NAME.upper()


def _message(kind: str) -> str:
    major, minor = torch_version()
    here = f"torch {major}.{minor}"
    if kind == "torch":
        return f'"{LEGACY_NAME}" is {here}\'s rollback name, announced for 2.15 only: use "nccl"'
    if kind == "legacy":
        return f'"{LEGACY_NAME}" is not in {here}; ncclx_migrate maps it to legacy NCCL: use "nccl"'
    return f'"{LEGACY_NAME}" is gone in {here}; ncclx_migrate maps it to nccl2: use "nccl"'


def _wrap(creator: Callable[..., Any], kind: str) -> Callable[..., Any]:
    @functools.wraps(creator)
    def create(opts: Any, backend_options: Any) -> Any:
        warn_legacy("NCX103", _message(kind), key=(LEGACY_NAME, kind))
        return creator(opts, backend_options)

    create._ncclx_shim = kind  # type: ignore[attr-defined]
    return create


def _create_nccl_process_group(opts: Any, backend_options: Any) -> Any:
    """torch 2.13 builds "nccl" inline in _new_process_group_helper: the same steps, as a
    creator (distributed_c10d.py:2179-2208, 2.13.0).  Named like torch 2.14's creator for the
    same job, which is how ``_torch.probe`` (the doctor) recognises what a name builds."""
    d = dist()
    if not d.is_nccl_available():
        raise RuntimeError("Distributed package doesn't have NCCL built in")
    pg_nccl = d.ProcessGroupNCCL
    if backend_options is None:
        backend_options = pg_nccl.Options()
        backend_options.is_high_priority_stream = False
    elif not isinstance(backend_options, pg_nccl.Options):
        raise AssertionError(
            "Expected backend_options argument to be of type ProcessGroupNCCL.Options"
        )
    backend_options._timeout = opts.timeout
    backend_options.global_ranks_in_group = opts.global_ranks_in_group
    backend_options.group_name = opts.group_id
    return pg_nccl(opts.store, opts.group_rank, opts.group_size, backend_options)


def _register(mod: Any, creator: Callable[..., Any]) -> None:
    backend = mod.Backend
    try:
        backend.register_backend(
            LEGACY_NAME,
            creator,
            extended_api=True,
            devices=["cuda"],
            _backend_type=mod.ProcessGroup.BackendType.CUSTOM,  # as torch 2.14/2.15 register it
        )
    except TypeError:  # 2.13: no _backend_type (it is CUSTOM anyway)
        backend.register_backend(LEGACY_NAME, creator, extended_api=True, devices=["cuda"])


def register_nccl_legacy() -> None:
    """Register (or wrap) "nccl-legacy"; the ``torch.distributed.backends`` entry point."""
    mod = c10d()
    backend = mod.Backend
    existing = backend._plugins.get(_KEY)
    if existing is not None and hasattr(existing.creator_fn, "_ncclx_shim"):
        return
    torch_registrar = getattr(mod, "_register_builtin_nccl_legacy_backend", None)
    if existing is None and torch_registrar is not None:
        torch_registrar()
        existing = backend._plugins.get(_KEY)
    if existing is not None:
        backend._plugins[_KEY] = backend._BackendPlugin(
            _wrap(existing.creator_fn, "torch"), existing.extended_api
        )
        return
    legacy = getattr(mod, "_create_nccl_process_group", None)
    if legacy is None and getattr(mod, "_create_nccl2_process_group", None) is None:
        legacy = _create_nccl_process_group  # 2.13
    if legacy is not None:
        _register(mod, _wrap(legacy, "legacy"))
        return
    _register(mod, _wrap(mod._create_nccl2_process_group, "nccl2"))
    # nccl2 needs the flight-recorder hook: the name must not count as self-recording.
    self_recording = getattr(mod, "_FR_SELF_RECORDING_BACKENDS", None)
    if self_recording is not None:
        self_recording.discard(LEGACY_NAME)


def install_legacy_shim() -> str:
    """Make ``backend="nccl-legacy"`` work on this torch and warn when a group uses it.

    Returns what the name builds: ``"torch"`` (torch's own rollback name, 2.14/2.15),
    ``"legacy"`` (mapped to the legacy ProcessGroupNCCL: 2.13) or ``"nccl2"`` (the
    legacy backend is gone from this torch).  Idempotent; ``use_nccl2()`` calls it.
    """
    register_nccl_legacy()
    kind: str = c10d().Backend._plugins[_KEY].creator_fn._ncclx_shim
    return kind
