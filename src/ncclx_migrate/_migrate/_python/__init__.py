"""The Python codemod: NCX1xx rules over one parse of each file."""

from __future__ import annotations

from ._engine import transform_source

__all__ = ["transform_source"]
