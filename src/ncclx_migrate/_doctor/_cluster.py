"""The cluster level (filled in next)."""

from __future__ import annotations

from ._facts import Options
from ._model import Report
from ._runner import run_checks


def run_cluster(options: Options) -> tuple[Report | None, int]:
    report, _ = run_checks(options)
    return report, report.exit_code(options.strict)
