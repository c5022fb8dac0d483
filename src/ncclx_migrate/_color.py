"""Whether a stream gets ANSI colour: the one rule every command's text output follows."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import TextIO

__all__ = ["use_color"]


def use_color(stream: TextIO | None = None, environ: Mapping[str, str] | None = None) -> bool:
    """Colour on a terminal only. ``NO_COLOR`` (any non-empty value, https://no-color.org) turns
    it off; ``FORCE_COLOR`` (https://force-color.org) turns it on in a pipe; when both are set
    NO_COLOR wins, as in ruff and CPython. ``TERM=dumb`` is off."""
    env = os.environ if environ is None else environ
    if env.get("NO_COLOR"):
        return False
    if env.get("FORCE_COLOR"):
        return True
    if env.get("TERM") == "dumb":
        return False
    stream = stream or sys.stdout
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
