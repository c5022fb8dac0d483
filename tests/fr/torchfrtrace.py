"""Run torch's own analyzer (torchfrtrace) on folders and read its verdicts."""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..forked import run_forked

SORTED = Path(__file__).with_name("fr_trace_sorted.py")


@dataclass
class Verdict:
    output: str
    returncode: int
    missing_ranks: set[int]  # "Not all ranks joining collective ... missing ranks: {..}"
    culprit_ranks: set[int]  # "Culprit rank R"
    undecided_no_dump: set[int]  # "missed FR dumps from ranks ({..})"


def _ints(text: str) -> set[int]:
    return {int(x) for x in re.findall(r"\d+", text)}


def torchfrtrace_runs(runs: Sequence[Sequence[str | Path]]) -> list[Verdict]:
    """torchfrtrace's verdict on each ``(folder, *args)``: forks of one interpreter that
    imported torch (tests/forked.py), so torch starts once for them all."""
    with tempfile.TemporaryDirectory() as tmp:
        ran = run_forked(SORTED, [[str(a) for a in run] for run in runs], Path(tmp) / "run", env=dict(os.environ))
    verdicts = []
    for res in ran:
        out = res.stdout + res.stderr
        missing = set().union(*(_ints(m) for m in re.findall(r"missing ranks: \{([^}]*)\}", out)))
        culprits = {int(m) for m in re.findall(r"Culprit rank (\d+)", out)}
        nodump = set().union(*(_ints(m) for m in re.findall(r"missed FR dumps from ranks \(\{([^}]*)\}\)", out)))
        verdicts.append(Verdict(out, res.returncode, missing, culprits, nodump))
    return verdicts


def torchfrtrace(folder: Path, *args: str) -> Verdict:
    (verdict,) = torchfrtrace_runs([(folder, *args)])
    return verdict
