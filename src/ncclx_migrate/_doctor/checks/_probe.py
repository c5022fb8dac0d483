"""probe (a real process group on this node) and the cluster-consistency slot."""

from __future__ import annotations

from .._facts import Facts
from .._model import CheckResult, Status


def probe(f: Facts) -> CheckResult:
    from .._probe import run_probe

    return run_probe(f)


def cluster_placeholder(f: Facts) -> CheckResult:
    # The runner replaces this with the gather's result; reaching it means no gather ran.
    return CheckResult("cluster-consistency", Status.SKIP, "only at --level cluster under torchrun/srun")
