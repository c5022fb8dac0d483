"""Version gates and the registry-based phase, on the torch this venv really has; what the
GPU count without torch makes of a ``CUDA_VISIBLE_DEVICES`` value."""

from __future__ import annotations

import pytest

from ncclx_migrate._torch.probe import (
    backend_entry_points,
    installed_torch_version,
    visible_device_limit,
)
from ncclx_migrate._torch.releases import Phase, phase_for_registry, phase_for_version


@pytest.mark.parametrize(
    ("version", "phase"),
    [("2.13.0", Phase.NO_NCCL2), ("2.14.1", Phase.OPT_IN), ("2.15.0+cu132", Phase.DEFAULT),
     ("2.16", Phase.ROLLBACK_GONE), ((2, 12), Phase.NO_NCCL2)],
)
def test_phase_for_version(version: str, phase: Phase) -> None:
    assert phase_for_version(version) is phase


def test_bad_version_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="not a torch version"):
        phase_for_version("banana")


@pytest.mark.torch
def test_registry_phase_matches_the_installed_release() -> None:
    version = installed_torch_version()
    assert version is not None
    names = set(backend_entry_points())
    expected = phase_for_version(version)
    by_default = None if expected is Phase.NO_NCCL2 else expected is not Phase.OPT_IN
    assert phase_for_registry(names, by_default) is expected


@pytest.mark.parametrize(
    ("value", "count"),
    [("0,1", 2), ("", 0), ("-1", 0), ("2, 3", 2), ("0,x,1", 1), ("GPU-8f1c-22ab,MIG-3a", 2), ("1,,2", 1)],
)
def test_visible_devices_count_up_to_the_first_entry_the_runtime_cannot_parse(value: str, count: int) -> None:
    assert visible_device_limit(value) == count
