"""What a ``--train`` command printed: each line with its stream and arrival time, the
command's own error out of a torchrun summary, and the step each metric line names.

The lines are read as they come (one thread per stream), so the time between two steps'
lines is the step time, and stderr stays apart for the failure's tail while the metrics are
searched in stdout and stderr in the order they arrived.
"""

from __future__ import annotations

import re
import subprocess
import threading
import time
from dataclasses import dataclass, field
from typing import IO

__all__ = ["Captured", "child_error", "read_streams", "step_name"]

_TAIL = 12  # stderr lines kept per arm (the report shows the last 6)


@dataclass
class Captured:
    lines: list[tuple[float, str, str]] = field(default_factory=list)  # (monotonic, "out"/"err", text)

    @property
    def text(self) -> str:
        return "\n".join(t for _, _, t in self.lines)

    @property
    def stderr(self) -> list[str]:
        return [t for _, s, t in self.lines if s == "err"]


def read_streams(proc: subprocess.Popen[bytes]) -> tuple[Captured, list[threading.Thread]]:
    """Start one reader per pipe of ``proc``; join the threads once it has ended."""
    got = Captured()
    lock = threading.Lock()

    def pump(stream: IO[bytes], name: str) -> None:
        for raw in iter(stream.readline, b""):
            line = raw.decode(errors="replace").rstrip("\r\n")
            with lock:
                got.lines.append((time.monotonic(), name, line))
        stream.close()

    threads = [threading.Thread(target=pump, args=(s, n), daemon=True)
               for s, n in ((proc.stdout, "out"), (proc.stderr, "err")) if s is not None]
    for t in threads:
        t.start()
    return got, threads


# torchrun's own lines: its log records ("E1203 11:45:06.873000 11107 torch/distributed/...")
# and, after a child failed, its traceback ending in ChildFailedError and the "Failures:" table.
_LAUNCHER_LOG = re.compile(r"^[DIWEF]\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ \S*torch/distributed/")
_SUMMARY = "torch.distributed.elastic.multiprocessing.errors.ChildFailedError"
# An exception line, as Python prints it, with torchrun's "[rank0]: " prefix where a child's.
_EXCEPTION = re.compile(r"^(?:\[(?:default)?rank\d+\]:\s*)?(?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit|"
                        r"Interrupt|Failure)(?::\s.*)?$")


def child_error(stderr: list[str]) -> tuple[list[str], str | None]:
    """(the last stderr lines that are the command's own, the error line among them).

    Under torchrun the last lines are its summary ("ChildFailedError ... Failures: ...
    traceback : To enable traceback see ..."), which says only that a rank failed: the
    child's own traceback, printed before it, is what the user needs to see."""
    lines = list(stderr)
    if any(_SUMMARY in t for t in lines):
        cut = max((i for i, t in enumerate(lines) if t.startswith("Traceback (most recent call last):")), default=None)
        if cut is not None and any(_SUMMARY in t for t in lines[cut:]):
            lines = lines[:cut]
    own = [t for t in lines if not _LAUNCHER_LOG.match(t)]
    while own and not own[-1].strip():
        own.pop()
    error = next((t.strip() for t in reversed(own) if _EXCEPTION.match(t.strip())), None)
    return own[-_TAIL:], error


_STEP = re.compile(r"\b(?:global[_ ])?(?:step|iter|iteration)\b\s*[=:#]?\s*(\d+)", re.IGNORECASE)


def step_name(line: str) -> int | None:
    """The step number a metric line names ("step 3", "step=3", "iter: 3"), or None."""
    m = _STEP.search(line)
    return int(m.group(1)) if m else None
