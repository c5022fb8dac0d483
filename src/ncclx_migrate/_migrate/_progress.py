"""Progress of ``ncclx migrate`` on a terminal (stderr a tty, no ``--quiet``): the files done,
and, within one file that takes a while (a notebook of many cells), how far its scan is.

A scanner calls :func:`step` as it goes; that costs a global lookup unless a terminal
display is on and the file is scanned in this process (one file, or a few: the in-file
count of a pool worker's file is not shown).  Nothing shows for a file before
:data:`_DELAY` seconds, so that small files do not flicker.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator
from typing import TextIO

__all__ = ["Terminal", "in_file", "step"]

_DELAY = 0.25  # seconds into a file before its own count shows
_EVERY = 0.1  # seconds between two redraws


class Terminal:
    """The stderr line: ``ncclx migrate: 3/40 files`` and, in a long file, what of it is done."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream
        self.width = 0  # of the line written last, cleared before the next
        self.path = ""
        self.files = (0, 0)
        self.started = 0.0
        self.drawn = 0.0

    def _write(self, line: str) -> None:
        stream = self.stream or sys.stderr
        stream.write("\r" + line + " " * max(0, self.width - len(line)))
        self.width = len(line)
        stream.flush()

    def __call__(self, done: int, total: int) -> None:
        """``done`` of ``total`` files are scanned."""
        self.files = (done, total)
        if done == total:
            self._write("")
            (self.stream or sys.stderr).write("\r")
            self.width = 0
        elif done % 50 == 0 or self.width > 0:
            self._write(f"ncclx migrate: {done:,}/{total:,} files")

    def within(self, done: int, total: int, what: str) -> None:
        now = time.monotonic()
        if now - self.started < _DELAY or (total and now - self.drawn < _EVERY):
            return  # (a step without a count starts a phase: always drawn)
        self.drawn = now
        head = f"ncclx migrate: {self.files[0]:,}/{self.files[1]:,} files, " if self.files[1] > 1 else "ncclx migrate: "
        count = f"{done:,}/{total:,} " if total else ""
        self._write(f"{head}{_short(self.path)}: {count}{what}")


def _short(path: str, room: int = 40) -> str:
    return path if len(path) <= room else "..." + path[-(room - 3):]


_active: Terminal | None = None


@contextlib.contextmanager
def in_file(display: object, path: str, done: int, total: int) -> Iterator[None]:
    """While ``path`` (the ``done + 1``-th of ``total`` files) is scanned here, :func:`step`
    draws on ``display`` when it is the terminal one."""
    global _active
    if not isinstance(display, Terminal):
        yield
        return
    display.path, display.files, display.started = path, (done, total), time.monotonic()
    _active = display
    try:
        yield
    finally:
        _active = None


def step(done: int, total: int, what: str) -> None:
    """``done`` of ``total`` units (``what``: "cells read") of the current file are done;
    ``total`` 0: ``what`` says it all (a phase that has no count)."""
    if _active is not None:
        _active.within(done, total, what)
