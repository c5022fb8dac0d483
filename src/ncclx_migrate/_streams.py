"""Standard streams that write all they are given."""

from __future__ import annotations

import io
import os
import sys
from typing import Any

__all__ = ["fresh_line", "whole_writes"]


class _FlushedWriter(io.BufferedWriter):
    """Flushes every write: unbuffered, as asked, but a short write is written on."""

    def write(self, data: Any) -> int:
        n = super().write(data)
        self.flush()
        return n


def whole_writes() -> None:
    """Put a writer that finishes every write under an unbuffered stdout or stderr.

    Under ``PYTHONUNBUFFERED=1`` (common in job containers), sys.stdout writes straight to its
    file, and a write that the system cuts short is not retried: a signal reaching the process
    while it waits on a terminal that is not being read loses the rest of the text (the
    doctor's cluster report ended mid-line on a busy machine). A BufferedWriter's flush writes
    the rest; each write is still flushed at once, as unbuffered output expects.
    """
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        raw = getattr(stream, "buffer", None)
        # Only the interpreter's own stream: sys.__stdout__ keeps it referenced, so it never
        # closes the file under the new one.
        if stream is getattr(sys, f"__{name}__") and isinstance(stream, io.TextIOWrapper) \
                and isinstance(raw, io.FileIO):
            setattr(sys, name, io.TextIOWrapper(_FlushedWriter(raw), encoding=stream.encoding,
                                                errors=stream.errors, line_buffering=stream.line_buffering,
                                                write_through=True))


def fresh_line() -> None:
    """On a terminal, start ``ncclx``'s next stderr line at the left margin over whatever the
    line holds (a progress count, the terminal's ``^C`` echo): its own line, no blank one above."""
    if sys.stderr.isatty():
        sys.stderr.write("\r\x1b[K" if os.environ.get("TERM") != "dumb" else "\r" + " " * 79 + "\r")
        sys.stderr.flush()
