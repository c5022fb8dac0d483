"""The doctor's checks, in the order they run and print.

Each check is a function ``Facts -> CheckResult``; ids are part of the CLI/JSON contract.
``min_level`` is the cheapest level the check runs at (it may say more at higher levels).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .._facts import Facts
from .._model import CheckResult
from ._env import env_vars
from ._extensions import compiled_extensions
from ._fr import flight_recorder
from ._gpu import gpu_binding
from ._nccl import fast_reconfigure, nccl_version, rccl_version
from ._probe import cluster_placeholder, probe
from ._timeout import default_timeout
from ._torch import legacy_toggle, nccl_resolution, torch_version

__all__ = ["CHECKS", "Check", "by_id"]


@dataclass(frozen=True)
class Check:
    id: str
    min_level: str
    title: str
    run: Callable[[Facts], CheckResult]


CHECKS: tuple[Check, ...] = (
    Check("torch-version", "static", "torch installed, its build and nccl2 phase", torch_version),
    Check("nccl-resolution", "static", 'what "nccl" builds under this environment', nccl_resolution),
    Check("legacy-toggle", "static", "TORCH_DIST_USE_NCCL2 and the nccl-legacy name", legacy_toggle),
    Check("default-timeout", "static", "the timeout a group of the job's backend gets by default",
          default_timeout),
    Check("nccl-version", "static", "build-time vs loaded NCCL, the 2.23 floor", nccl_version),
    Check("rccl-version", "static", "RCCL on ROCm builds vs the reconfigure minimum", rccl_version),
    Check("fast-reconfigure", "static", "reconfigure and the shrink/grow fast path", fast_reconfigure),
    Check("flight-recorder", "static", "flight recorder buffer, dump path, dump on hang", flight_recorder),
    Check("env-vars", "static", "deprecated TORCH_NCCL_* names and those nccl2 ignores", env_vars),
    Check("compiled-extensions", "static", "installed C++ extensions built for the legacy class only",
          compiled_extensions),
    Check("gpu-binding", "static", "GPUs, CUDA_VISIBLE_DEVICES and LOCAL_RANK binding", gpu_binding),
    Check("probe", "probe", "a real process group and collective suite on this node", probe),
    # Computed by the cluster gather, not by a function of one process's facts.
    Check("cluster-consistency", "cluster", "torch/NCCL/env agreement across all ranks", cluster_placeholder),
)

_BY_ID = {c.id: c for c in CHECKS}


def by_id(check_id: str) -> Check | None:
    return _BY_ID.get(check_id)
