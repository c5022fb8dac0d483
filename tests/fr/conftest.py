"""Real gloo runs shared by the flight-recorder tests (each scenario runs once per session)."""

from __future__ import annotations

import sys
from collections.abc import Callable

import pytest

from .scenarios import Run, run_scenario

_cache: dict[tuple[str, ...], Run] = {}


@pytest.fixture(scope="session")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Run]:
    """``scenario(name, world=, culprit=, mode=)``: run it once per session, return the Run."""
    pytest.importorskip("torch")

    def get(name: str, *, world: int = 3, culprit: int = 1, mode: str = "manual", **env: str) -> Run:
        key = (name, str(world), str(culprit), mode, *sorted(f"{k}={v}" for k, v in env.items()))
        if key not in _cache:
            tmp = tmp_path_factory.mktemp("-".join(key[:4]))
            _cache[key] = run_scenario(
                tmp, name, world=world, culprit=culprit, mode=mode, python=sys.executable, extra_env=env
            )
        return _cache[key]

    return get


