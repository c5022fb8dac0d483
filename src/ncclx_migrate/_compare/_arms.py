"""The default arms: what ``"nccl"`` builds here against the rollback, from torch's own registry."""

from __future__ import annotations

from .._torch.envvars import TOGGLE_VAR
from .._torch.probe import backend_entry_points, installed_torch_version
from .._torch.releases import Phase, nccl_builds
from ._spec import Arm

__all__ = ["NoComparison", "default_arms"]


class NoComparison(Exception):
    """This torch has nothing to compare (no nccl2, or no rollback left)."""


def default_arms() -> list[Arm]:
    """[baseline, candidate]: the rollback (legacy ProcessGroupNCCL) first, then what "nccl"
    builds with the toggle as the switch leaves it (nccl2).  torch 2.15: TORCH_DIST_USE_NCCL2=0
    against unset; 2.14 (opt-in): unset against =1 (distributed_c10d.py:961-983, 2.15.0;
    :829-842, 2.14.1)."""
    version = installed_torch_version() or "?"
    if "nccl2" not in backend_entry_points():
        raise NoComparison(
            f"torch {version} has no nccl2 backend (it came in 2.14 as an opt-in and is what \"nccl\" "
            "builds from 2.15): there is nothing to compare; name two arms with --arm A --arm B")
    from .._torch.probe import registry_phase

    phase = registry_phase()
    if phase is Phase.ROLLBACK_GONE:
        raise NoComparison(f"torch {version} has no rollback left (no nccl-legacy): \"nccl\" can only build "
                           "nccl2; name two arms with --arm A --arm B")
    if phase is Phase.OPT_IN:  # "nccl" is legacy unless the literal "1" opts in
        rollback, switched = None, "1"
        specs = (f"nccl with {TOGGLE_VAR} unset (legacy)", f"nccl,{TOGGLE_VAR}=1 (the opt-in)")
    else:  # "nccl" is nccl2 unless the literal "0" rolls back
        rollback, switched = "0", None
        specs = (f"nccl,{TOGGLE_VAR}=0 (the rollback)", f"nccl with {TOGGLE_VAR} unset (the default)")
    return [Arm("A", specs[0], "nccl", {TOGGLE_VAR: rollback}, nccl_builds(phase, rollback)),
            Arm("B", specs[1], "nccl", {TOGGLE_VAR: switched}, nccl_builds(phase, switched))]
