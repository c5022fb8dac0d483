"""Real gloo runs shared by the flight-recorder tests (each scenario runs once per session,
across pytest-xdist workers too)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import asdict

import pytest

from ..conftest import once
from .scenarios import Run, run_scenario

_cache: dict[tuple[str, ...], Run] = {}


@pytest.fixture(scope="session")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Run]:
    """``scenario(name, world=, culprit=, mode=)``: run it once per session, return the Run."""
    pytest.importorskip("torch")

    def get(name: str, *, world: int = 3, culprit: int = 1, mode: str = "manual", **env: str) -> Run:
        key = (name, str(world), str(culprit), mode, *sorted(f"{k}={v}" for k, v in env.items()))
        if key not in _cache:
            def make(tmp):  # type: ignore[no-untyped-def]
                run = run_scenario(tmp, name, world=world, culprit=culprit, mode=mode,
                                   python=sys.executable, extra_env=env)
                return {k: v for k, v in asdict(run).items() if k != "folder"}

            tmp, got = once(tmp_path_factory, "fr-" + "-".join(key), make)
            _cache[key] = Run(tmp / "dumps", **got)
        return _cache[key]

    return get
