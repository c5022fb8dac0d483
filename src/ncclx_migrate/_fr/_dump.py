"""Dump the flight recorder(s) of a live process, on torch 2.13, 2.14 and 2.15.

Recorders (``docs/torch-versions.md``, "Flight recorder per backend"):

* 2.15: one recorder per backend name.  gloo records natively into ``"gloo"``;
  FlightRecorderHook records nccl2 / nccl-lazy / other hooked backends into a
  recorder keyed by ``backend.name()``; read with ``_dump_fr_trace(backend=name)``.
  Legacy ProcessGroupNCCL records into its own CUDA recorder: ``_dump_nccl_trace``.
* 2.14: one shared generic recorder (``_dump_fr_trace()``, no ``backend=``), and no
  ``_dump_fr_trace_file``.  We call it ``"gloo"``, torch's default recorder name.
* 2.13: ``_dump_fr_trace`` / ``_dump_fr_trace_json`` only (CPU wheel: no NCCL at all).

torch is imported inside the functions: ``import ncclx_migrate`` stays torch-free.
"""

from __future__ import annotations

import functools
import os
import pickle
import threading
from pathlib import Path
from typing import Any

from ._paths import extra_recorder_path, rank_dump_path
from ._pickle import load_restricted

__all__ = [
    "LEGACY",
    "dump_flight_recorder",
    "dump_recorder",
    "live_pg_config",
    "recorder_for_backend",
    "recorder_status",
    "recorders_in_use",
    "write_rank_dumps",
]

LEGACY = "nccl-legacy"  # our name for legacy ProcessGroupNCCL's recorder
_DEFAULT = "gloo"  # c10d's kDefaultFRBackend; on <= 2.14 the one shared recorder

Dump = dict[str, Any]


def _c10d() -> Any:
    import torch._C._distributed_c10d as c10d

    return c10d


@functools.cache
def _per_backend() -> bool:
    """True when ``_dump_fr_trace`` takes ``backend=`` (2.15 and later)."""
    fn = getattr(_c10d(), "_dump_fr_trace", None)
    if fn is None:
        return False
    try:
        fn(includeCollectives=False, backend=_DEFAULT)
    except TypeError:
        return False
    return True


def recorder_for_backend(name: str) -> str | None:
    """The recorder a backend (``Backend.name()`` or a registered name) records into.

    None when that backend records nowhere we can read.
    """
    if name in ("nccl", "nccl-legacy", "NCCL"):
        # Legacy ProcessGroupNCCL.name() is "nccl"; nccl2's is "nccl2".
        return LEGACY if hasattr(_c10d(), "_dump_nccl_trace") else None
    if not hasattr(_c10d(), "_dump_fr_trace"):
        return None  # torch before the generic recorder
    if not _per_backend():
        return _DEFAULT  # one shared recorder
    return name


def _group_backend_names(group: Any) -> list[str]:
    import torch

    names: list[str] = []
    for device in getattr(group, "_device_types", None) or [torch.device("cpu")]:
        try:
            names.append(str(group._get_backend(device).name()))
        except (RuntimeError, ValueError, AttributeError):
            continue  # no backend for this device type
    return names


def _groups() -> list[Any]:
    from torch.distributed import distributed_c10d as dc

    world = dc._world
    for _ in range(3):  # the training thread may be creating a group right now
        try:
            return list(world.pg_names)
        except RuntimeError:
            continue
    return []


def recorders_in_use(group: Any = None) -> list[str]:
    """Recorders that the group (default: every live group) records into, without duplicates."""
    groups = [group] if group is not None else _groups()
    found: list[str] = []
    for pg in groups:
        for backend in _group_backend_names(pg):
            rec = recorder_for_backend(backend)
            if rec is not None and rec not in found:
                found.append(rec)
    return found


def _dump_bytes(recorder: str, *, collectives: bool, stack_traces: bool) -> bytes | None:
    c10d = _c10d()
    if recorder == LEGACY:
        fn = getattr(c10d, "_dump_nccl_trace", None)
        return None if fn is None else bytes(fn(collectives, stack_traces, False))
    if not hasattr(c10d, "_dump_fr_trace"):
        return None
    if _per_backend():
        return bytes(c10d._dump_fr_trace(collectives, stack_traces, False, backend=recorder))
    return bytes(c10d._dump_fr_trace(collectives, stack_traces, False))


def recorder_status(recorder: str) -> dict[str, dict[str, int]]:
    """``pg_status`` of a recorder: cheap (no entries, no stacks); {} when absent."""
    raw = _dump_bytes(recorder, collectives=False, stack_traces=False)
    if raw is None:
        return {}
    dump = load_restricted(raw, f"<{recorder} recorder>")
    status = dump.get("pg_status", {}) if isinstance(dump, dict) else {}
    return {str(k): {f: int(v) for f, v in s.items()} for k, s in status.items()}


def live_pg_config() -> dict[str, dict[str, str]]:
    """Exact ``pg_config`` from this process's groups (name, desc, global ranks in group order).

    gloo records its pg_config in the constructor, before c10d sets the name and
    ranks, so its own is keyed ``''`` and crashes torchfrtrace (``tests/fr/test_analyze_real_dumps.py``).
    """
    from torch.distributed import distributed_c10d as dc

    world = dc._world
    config: dict[str, dict[str, str]] = {}
    for pg in _groups():
        name = world.pg_names.get(pg)
        ranks_map = world.pg_group_ranks.get(pg)
        if name is None or ranks_map is None:
            continue
        ranks = [g for g, _ in sorted(ranks_map.items(), key=lambda kv: kv[1])]
        desc = str(getattr(pg, "group_desc", "") or "")
        config[str(name)] = {"name": str(name), "desc": desc, "ranks": str(ranks)}
    return config


def _repair_config(dump: Dump, live: dict[str, dict[str, str]]) -> None:
    config = dump.get("pg_config")
    if not isinstance(config, dict):
        config = {}
    config.pop("", None)  # gloo's constructor-time entry with no name
    for name, row in live.items():
        config[name] = dict(row)
    dump["pg_config"] = config


def _filter_group(dump: Dump, name: str) -> None:
    dump["entries"] = [e for e in dump.get("entries", []) if str(e["process_group"][0]) == name]
    dump["pg_config"] = {k: v for k, v in dump.get("pg_config", {}).items() if k == name}
    dump["pg_status"] = {k: v for k, v in dump.get("pg_status", {}).items() if k == name}


def dump_recorder(recorder: str, *, stack_traces: bool = True) -> Dump | None:
    """One recorder's full dump as torch writes it, with ``pg_config`` repaired from this process."""
    raw = _dump_bytes(recorder, collectives=True, stack_traces=stack_traces)
    if raw is None:
        return None
    dump = load_restricted(raw, f"<{recorder} recorder>")
    if not isinstance(dump, dict):
        return None
    dump.setdefault("entries", [])
    _repair_config(dump, live_pg_config())
    return dump


def dump_flight_recorder(group: Any = None, *, stack_traces: bool = True) -> dict[str, Dump]:
    """Dump the recorder(s) a group records into: ``{recorder name: dump}``.

    ``group=None`` means every live group (and every recorder in use).  With a
    group, entries, ``pg_config`` and ``pg_status`` are narrowed to that group.
    Recorder names: ``"gloo"``, ``"nccl2"``, ``"nccl-lazy"``, ``"nccl-legacy"``, or
    the name of another hooked backend; on torch <= 2.14 the single shared recorder
    is ``"gloo"``.  Each dump is torch's format (``version``, ``pg_config``,
    ``pg_status``, ``entries``...) with gloo's ``pg_config`` repaired.
    """
    from torch.distributed import distributed_c10d as dc

    names = recorders_in_use(group) or [_DEFAULT]
    out: dict[str, Dump] = {}
    for rec in names:
        dump = dump_recorder(rec, stack_traces=stack_traces)
        if dump is None:
            continue
        if group is not None:
            _filter_group(dump, str(dc._world.pg_names.get(group, "")))
        out[rec] = dump
    return out


class DumpLocationError(OSError):
    """The dump directory cannot be created or written; the message names it and its source."""


def _atomic_write(path: Path, data: bytes) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except OSError as exc:
        from .._torch.envvars import FR_DUMP_FILE_NAMES

        named = next((n for n in FR_DUMP_FILE_NAMES if os.environ.get(n)), None)
        origin = named or ("XDG_CACHE_HOME" if os.environ.get("XDG_CACHE_HOME") else "the home directory")
        raise DumpLocationError(
            exc.errno, f"cannot write the flight-recorder dump in {path.parent} (from {origin}): "
            f"{exc.strerror or exc}; set {FR_DUMP_FILE_NAMES[0]} to a prefix in a writable directory",
        ) from None


def write_rank_dumps(
    rank: int,
    *,
    primary: str | None = None,
    stack_traces: bool = True,
    meta: dict[str, Any] | None = None,
) -> list[Path]:
    """Write every recorder in use for this rank; returns the files written.

    The ``primary`` recorder (the one holding the stuck collective; default: the
    first in use with entries) goes to ``<prefix><rank>``, torch's own dump file,
    so torchfrtrace reads it.  Any other recorder with entries goes to
    ``ncclx-<recorder>-rank<rank>.pkl`` in the same folder.  Each pickle gets an
    extra top-level ``ncclx`` dict (recorder, rank, reason) that torchfrtrace ignores.
    """
    dumps = {rec: d for rec, d in dump_flight_recorder(stack_traces=stack_traces).items()}
    with_entries = [rec for rec, d in dumps.items() if d.get("entries")]
    if primary not in dumps:
        primary = with_entries[0] if with_entries else next(iter(dumps), None)
    written: list[Path] = []
    for rec, dump in dumps.items():
        if rec != primary and not dump.get("entries"):
            continue
        dump["ncclx"] = {"recorder": rec, "rank": rank, **(meta or {})}
        path = rank_dump_path(rank) if rec == primary else extra_recorder_path(rank, rec)
        _atomic_write(path, pickle.dumps(dump))
        written.append(path)
    return written
