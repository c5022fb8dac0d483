"""Replacements for what the legacy ProcessGroupNCCL had and nccl2 lacks (torch 2.13-2.15)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

from ._torch import c10d, dist, torch_version

__all__ = [
    "NCCL_BACKEND_NAMES",
    "build_nccl_version",
    "coalescing",
    "is_nccl",
    "is_nccl_backend",
    "runtime_nccl_version",
    "set_timeout",
]

#: Every backend name that builds an NCCL implementation (legacy, nccl2 or lazy).
NCCL_BACKEND_NAMES = frozenset({"nccl", "nccl2", "nccl-legacy", "nccl-lazy"})


def _name_is_nccl(name: str) -> bool:
    # "cpu:gloo,cuda:nccl" is NCCL on its CUDA half.
    for part in name.lower().split(","):
        if part.rsplit(":", 1)[-1].strip() in NCCL_BACKEND_NAMES:
            return True
    return False


def _nccl_classes(d: Any) -> tuple[type, ...]:
    names = ("ProcessGroupNCCL", "ProcessGroupNCCL2", "ProcessGroupNCCLLazy")
    return tuple(cls for cls in (getattr(d, n, None) for n in names) if isinstance(cls, type))


def _backend_is_nccl(d: Any, backend: Any) -> bool:
    wrapper = getattr(c10d(), "_ProcessGroupWrapper", None)
    # TORCH_DISTRIBUTED_DEBUG=DETAIL wraps every backend.
    while wrapper is not None and isinstance(backend, wrapper):
        backend = backend.wrapped_pg
    classes = _nccl_classes(d)
    if classes and isinstance(backend, classes):
        return True
    try:
        return _name_is_nccl(str(backend.name()))
    except Exception:
        return False


def is_nccl(obj: object) -> bool:
    """True when ``obj`` is NCCL in any implementation (legacy, nccl2, nccl-lazy).

    ``obj``: a ProcessGroup, a backend object (``_ProcessGroupWrapper`` is unwrapped)
    or a backend name such as ``"nccl"``, ``"nccl-legacy"`` or ``"cpu:gloo,cuda:nccl"``.
    Anything else (None, a class, a number) is not NCCL: False, as ``isinstance`` says.
    Replaces ``get_backend(g) == "nccl"`` and ``pg.name() == "nccl"``, which turn false
    for explicit names (NCX110).
    """
    if isinstance(obj, str):
        return _name_is_nccl(obj)
    if obj is None or isinstance(obj, type):
        return False
    d = dist()
    if isinstance(obj, d.ProcessGroup):
        try:
            if _name_is_nccl(str(d.get_backend(obj))):
                return True
        except (ValueError, RuntimeError, KeyError):
            pass  # not a registered group (built by hand): look at its backends
        for device in getattr(obj, "_device_types", ()):
            try:
                if _backend_is_nccl(d, obj._get_backend(device)):
                    return True
            except RuntimeError:
                continue
        return False
    import torch._C._distributed_c10d as c_api  # dist.Backend is the name enum, not this

    if isinstance(obj, c_api.Backend):
        return _backend_is_nccl(d, obj)
    return False


def is_nccl_backend(obj: object) -> bool:
    """``isinstance(obj, ProcessGroupNCCL)`` for every NCCL class this torch has.

    True for an instance of ``ProcessGroupNCCL``, ``ProcessGroupNCCL2`` or
    ``ProcessGroupNCCLLazy`` (their subclasses too); False for anything else, as
    ``isinstance`` is: None, names, classes, groups, gloo backends and the
    ``_ProcessGroupWrapper`` of ``TORCH_DISTRIBUTED_DEBUG=DETAIL`` (use :func:`is_nccl` to
    ask about a group or a name).  Replaces ``isinstance(b, ProcessGroupNCCL)``, which is
    False for nccl2, a sibling class (NCX110).  A CPU build has no NCCL class: False.
    """
    if obj is None or isinstance(obj, (str, type)):
        return False  # without importing torch
    classes = _nccl_classes(dist())
    return bool(classes) and isinstance(obj, classes)


def set_timeout(timeout: timedelta | float, group: Any = None) -> None:
    """Set the default timeout of every backend of ``group`` (default: the world).

    Replaces legacy ``backend._set_default_timeout(td)``, which nccl2 lacks (NCX111).
    ``timeout``: what that took, a ``datetime.timedelta`` or a float of seconds.
    torch 2.14+: ``torch.distributed.set_timeout``; 2.13: ``_set_pg_timeout``.
    """
    if isinstance(timeout, float):
        timeout = timedelta(seconds=timeout)  # torch's binding converts a float as seconds
    if not isinstance(timeout, timedelta):
        raise TypeError("set_timeout() needs a datetime.timedelta or a float of seconds, "
                        f"not {type(timeout).__name__}")
    d = dist()
    public = getattr(d, "set_timeout", None)
    if public is not None:
        public(timeout, group)
        return
    c10d()._set_pg_timeout(timeout, group)


def _no_nccl() -> RuntimeError:
    major, minor = torch_version()
    return RuntimeError(
        f"torch {major}.{minor} was built without NCCL (a CPU-only build): "
        "there is no NCCL version to report"
    )


def _triple(version: tuple[int, ...] | None) -> tuple[int, int, int]:
    if version is None or len(version) < 3:
        raise _no_nccl()
    return version[0], version[1], version[2]


def runtime_nccl_version() -> tuple[int, int, int]:
    """The NCCL library actually loaded (``ncclGetVersion``), as (major, minor, patch).

    Replaces ``backend.get_runtime_nccl_version()`` on an instance, which nccl2 lacks
    (NCX111).  Works without a GPU.
    """
    dist()
    from .._torch.probe import runtime_nccl_version as runtime

    return _triple(runtime())


def build_nccl_version() -> tuple[int, int, int]:
    """The NCCL version torch was compiled against, as (major, minor, patch).

    What ``torch.cuda.nccl.version()`` reports; not necessarily the loaded library.
    """
    dist()
    from .._torch.probe import build_nccl_version as build

    return _triple(build())


@contextlib.contextmanager
def coalescing(group: Any = None, device: Any = None) -> Iterator[Any]:
    """Batch the collectives issued inside the block, on any backend.

    Replaces legacy ``backend._group_start()`` / ``backend._group_end()``, which nccl2
    lacks (NCX111).  Uses torch's ``_coalescing_manager`` (2.13-2.15): the block waits
    for the batch on exit, and all collectives in it must be of one kind (all_reduce,
    all_gather_into_tensor or reduce_scatter_tensor), torch's limit.  Unlike the bare
    manager, an exception inside the block leaves the group usable.
    """
    mod = c10d()
    pg = group if group is not None else mod._get_default_group()
    try:
        with mod._coalescing_manager(pg, device) as cm:
            yield cm
    except BaseException:
        # torch leaves the ops recorded so far in the group's coalescing state, and every
        # later coalescing block then fails with "non-empty op list": drop them.
        mod._world.pg_coalesce_state.pop(pg, None)
        raise
