"""Run the selected checks for one process; a crashing check becomes that check's ``error``."""

from __future__ import annotations

import traceback
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ._facts import Facts, Options
from ._model import CheckResult, Report, Status, level_index
from .checks import CHECKS, Check

if TYPE_CHECKING:
    from ._render import Progress

__all__ = ["run_checks", "selected_checks"]

CLUSTER_ID = "cluster-consistency"


def selected_checks(options: Options) -> list[tuple[Check, bool]]:
    """(check, runs at this level) in display order; --check narrows the list."""
    out = []
    for check in CHECKS:
        if options.selected and check.id not in options.selected:
            continue
        runs = level_index(check.min_level) <= level_index(options.level)
        if not runs and not options.selected:
            continue  # higher-level checks are listed only when asked for by id
        out.append((check, runs))
    return out


def _run_one(check: Check, facts: Facts) -> CheckResult:
    try:
        result = check.run(facts)
    except Exception as exc:  # one broken check must not take the report down
        frames = traceback.extract_tb(exc.__traceback__)[-3:]
        where = [f"{fr.filename.rsplit('/', 1)[-1]}:{fr.lineno}" for fr in frames]
        return CheckResult(
            check.id, Status.ERROR,
            f"the check crashed: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}".rstrip(": "),
            "report this to the ncclx-migrate maintainers with the --format json output",
            {"exception": type(exc).__name__, "where": where},
        )
    if result.id != check.id:  # keep the contract even if a check mislabels itself
        result.id = check.id
    return result


def run_checks(options: Options, environ: Mapping[str, str] | None = None,
               progress: Progress | None = None) -> tuple[Report, Facts]:
    """Run the selected checks; ``progress`` gets the header and each result as it completes."""
    facts = Facts(options, environ)
    if progress is not None:
        facts.progress = progress.status
        if facts.imports_torch:
            progress.status("importing torch...")
    torch_version: str | None
    try:
        torch_version = facts.torch_version
    except Exception:
        torch_version = None
    report = Report(level=options.level, host=facts.host, rank=facts.rank, torch=torch_version, checks=[])
    try:
        report.backend, report.backend_why = facts.job_backend
    except Exception:  # the checks that read it report the failure
        pass
    if progress is not None:
        progress.header(report)
    for check, runs in selected_checks(options):
        if check.id == CLUSTER_ID and runs:
            continue  # filled in by the cluster gather
        if not runs:
            result = CheckResult(check.id, Status.SKIP, f"runs at --level {check.min_level}")
        else:
            if progress is not None:
                progress.status(f"{check.id}...")
            result = _run_one(check, facts)
        report.checks.append(result)
        if progress is not None:
            progress.check(result)
    return report, facts
