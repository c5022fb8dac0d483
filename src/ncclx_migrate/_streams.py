"""Standard streams that write all they are given."""

from __future__ import annotations

import io
import sys

__all__ = ["whole_writes"]


def whole_writes() -> None:
    """Put a buffered writer under an unbuffered stdout or stderr.

    Under ``PYTHONUNBUFFERED=1`` (common in job containers), sys.stdout writes straight to its
    file, and a write that the system cuts short is not retried: a signal reaching the process
    while it waits on a terminal that is not being read loses the rest of the text (the
    doctor's cluster report ended mid-line on a busy machine). A BufferedWriter writes the rest.
    Each write is still flushed at once, as unbuffered output expects.
    """
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        raw = getattr(stream, "buffer", None)
        if isinstance(stream, io.TextIOWrapper) and isinstance(raw, io.FileIO):
            # The old wrapper stays referenced by sys.__stdout__/__stderr__, so it never closes
            # the file under the new one.
            setattr(sys, name, io.TextIOWrapper(io.BufferedWriter(raw), encoding=stream.encoding,
                                                errors=stream.errors, line_buffering=stream.line_buffering,
                                                write_through=True))
