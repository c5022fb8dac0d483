"""Load flight-recorder pickles without letting a dump run code.

A dump holds dicts, lists, tuples, strings, bytes, numbers, bools and None.
Every pickle opcode that could build anything else (GLOBAL, STACK_GLOBAL,
INST, OBJ, EXT*, REDUCE on a looked-up callable) goes through ``find_class`` or
``persistent_load``; refusing both leaves only plain containers and scalars.

Bounds: the C unpickler is iterative (no recursion, so nesting depth costs no
stack) and each opcode builds at most one object, so what it builds is bounded
by the input size, which is capped here (``max_bytes``).  What it builds may
still be deep or share one list 2**40 times through the memo: callers read it
only through depth- and size-checked accessors (``_load.py``), never ``str`` it.
"""

from __future__ import annotations

import io
import pickle

__all__ = ["DumpError", "load_restricted"]


class DumpError(Exception):
    """A dump that cannot be read; the message is one line naming the file."""


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> object:
        raise pickle.UnpicklingError(f"it asks for {module}.{name}")

    def persistent_load(self, pid: object) -> object:
        raise pickle.UnpicklingError("it asks for a persistent object")


MAX_PICKLE_BYTES = 256 << 20


def load_restricted(data: bytes, source: str, max_bytes: int = MAX_PICKLE_BYTES) -> object:
    """Unpickle ``data`` allowing only plain containers and scalars; ``source`` names the file."""
    if len(data) > max_bytes:
        raise DumpError(f"{source}: {len(data) >> 20} MB, larger than any flight-recorder dump")
    try:
        return _PlainUnpickler(io.BytesIO(data)).load()
    except pickle.UnpicklingError as exc:
        if str(exc).startswith("it asks for"):
            raise DumpError(
                f"{source}: refused to load: {exc}; a flight-recorder dump holds only plain "
                "containers and scalars, so this file is not one (do not trust it)"
            ) from None
        raise DumpError(f"{source}: not a readable pickle ({exc}); is the file truncated?") from None
    except (EOFError, ValueError, TypeError, IndexError, KeyError, AttributeError, MemoryError,
            RecursionError, OverflowError) as exc:
        raise DumpError(
            f"{source}: not a readable pickle ({type(exc).__name__}: {exc}); is the file truncated?"
        ) from None
