"""The Python codemod: NCX1xx rules over one parse of each file."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._engine import transform_source

__all__ = ["transform_source"]


def __getattr__(name: str) -> Any:
    # libcst is imported with the engine, on first use: not by a run that reuses every result
    # (the cache asks only _layout of this package then).
    if name == "transform_source":
        from ._engine import transform_source

        return transform_source
    raise AttributeError(name)
