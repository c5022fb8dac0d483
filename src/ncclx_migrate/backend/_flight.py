"""``dump_flight_recorder()``: the flight recorder(s) a group records into, on torch 2.13-2.15."""

from __future__ import annotations

from typing import Any

from ._torch import dist

__all__ = ["dump_flight_recorder"]


def dump_flight_recorder(group: Any = None, *, stack_traces: bool = True) -> dict[str, dict[str, Any]]:
    """``{recorder: dump}`` for the recorder(s) ``group`` records into (default: every group).

    Replaces ``_dump_nccl_trace()``, which is empty for nccl2 groups, and
    ``_dump_fr_trace()`` without ``backend=``, which reads gloo's recorder on 2.15 (NCX121).
    Recorders: ``"gloo"``, ``"nccl2"``, ``"nccl-lazy"``, ``"nccl-legacy"`` (legacy
    ProcessGroupNCCL's own), or another hooked backend's name; torch <= 2.14 has one shared
    recorder, reported as ``"gloo"``.  Each dump is torch's format (``version``,
    ``pg_config``, ``pg_status``, ``entries``); with a group, narrowed to that group.
    The flight-recorder package (``ncclx fr``) implements it; this is its stable entry.
    """
    dist()  # one-line error without torch
    from .._fr._dump import dump_flight_recorder as dump

    return dump(group, stack_traces=stack_traces)
