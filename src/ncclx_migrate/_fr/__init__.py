"""Flight-recorder work: hang watchdog, dumps, ``ncclx fr`` (private package)."""

from __future__ import annotations

# Not typing.TYPE_CHECKING: importing typing costs 10+ ms of `import ncclx_migrate`
# (benchmarks/bench_import.py); mypy and ruff honour a module-level TYPE_CHECKING too.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._watchdog import HangDump

__all__ = ["enable_hang_dump"]


def enable_hang_dump(seconds: float, *, stack_traces: bool = True) -> HangDump:
    """Dump every rank's flight recorder when a collective hangs for ``seconds``.

    Starts one daemon thread per process (a second call retunes it).  When a
    collective or barrier of any process group has not completed within
    ``seconds``, this rank writes its dump of every recorder in use (gloo, nccl2,
    nccl-lazy, legacy NCCL), with stack traces, to ``<TORCH_FR_DUMP_TEMP_FILE><rank>``
    (default ``$XDG_CACHE_HOME/torch/comm_lib_trace_rank_<rank>``) and asks the other
    ranks, through the job's store, to dump too; ``ncclx fr analyze`` then names
    the culprit.  Call it before or after ``init_process_group``; torch is not
    imported here.  ``NCCLX_HANG_DUMP=SECONDS`` does the same at ``import ncclx_migrate``.
    Returns a handle with ``.stop()``, ``.dump_now()`` and ``.dumps`` (files written).
    """
    from ._watchdog import enable

    return enable(seconds, stack_traces=stack_traces)
