"""Run torch's own analyzer (torchfrtrace) on a folder and read its verdict."""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

# torchfrtrace takes the first rank it reads as the reference when it compares
# collectives, and reads files in directory order; sort them so that rank 0 is
# the reference (our analyzer breaks ties towards the lowest rank too).
_DRIVER = (
    "import os, sys; _walk = os.walk\n"
    "os.walk = lambda *a, **k: ((r, d, sorted(f)) for r, d, f in _walk(*a, **k))\n"
    "from torch.distributed.flight_recorder.fr_trace import main\n"
    "main(sys.argv[1:])\n"
)


@dataclass
class Verdict:
    output: str
    returncode: int
    missing_ranks: set[int]  # "Not all ranks joining collective ... missing ranks: {..}"
    culprit_ranks: set[int]  # "Culprit rank R"
    undecided_no_dump: set[int]  # "missed FR dumps from ranks ({..})"


def _ints(text: str) -> set[int]:
    return {int(x) for x in re.findall(r"\d+", text)}


def torchfrtrace(folder: Path, *args: str) -> Verdict:
    res = subprocess.run(
        [sys.executable, "-c", _DRIVER, str(folder), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = res.stdout + res.stderr
    missing = set().union(*(_ints(m) for m in re.findall(r"missing ranks: \{([^}]*)\}", out)))
    culprits = {int(m) for m in re.findall(r"Culprit rank (\d+)", out)}
    nodump = set().union(*(_ints(m) for m in re.findall(r"missed FR dumps from ranks \(\{([^}]*)\}\)", out)))
    return Verdict(out, res.returncode, missing, culprits, nodump)
