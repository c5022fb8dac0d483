"""Adding the summaries up: rows per repository, owner and job, what is left before the rollback
goes, and the trend against the previous roll-up."""

from __future__ import annotations

import base64
from collections import Counter
from datetime import datetime, timezone
from typing import Any

from .._migrate._rule_table import SEVERITIES
from ._inputs import BadReport
from ._jobs import Job
from ._repos import FILES_PER_OWNER, Owner, Repo, RepoPart, unpack

__all__ = ["SCHEMA", "Rollup"]

SCHEMA = "ncclx.report/1"


def _counts() -> dict[str, int]:
    return dict.fromkeys(SEVERITIES, 0)


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


class Rollup:
    def __init__(self) -> None:
        self.repos: dict[str, Repo] = {}
        self.owners: dict[str, Owner] = {}
        self.jobs: dict[str, Job] = {}
        self.skipped: list[tuple[str, str]] = []
        self.previous: dict[str, Any] | None = None

    # -- repositories -------------------------------------------------------------------------

    def add_repo(self, part: RepoPart) -> None:
        """Add one repository's summary; raise BadReport for a second report of the same one."""
        repo = part.repo
        first = self.repos.get(repo.key)
        if first is not None:
            raise BadReport(f"a second report of repository {repo.name} (the first: {first.source})")
        self.repos[repo.key] = repo
        for who, mine in part.owners.items():
            o = self.owners.get(who) or self.owners.setdefault(who, Owner(who))
            for k, v in mine.severity.items():
                o.severity[k] += v
            o.findings += mine.findings
            o.write += mine.write
            o.toggles += mine.toggles
            o.repositories.add(repo.key)
            o.by_repository.append((repo.name, mine.findings, mine.severity["break"], mine.toggles))
            o.files_total += len(mine.files)
            o.files.extend(mine.files[: max(0, FILES_PER_OWNER - len(o.files))])

    # -- jobs ---------------------------------------------------------------------------------

    def add_job(self, part: Job) -> None:
        """Add one job report's summary: reports with the same label are one job."""
        job = self.jobs.get(part.label)
        if job is None:
            self.jobs[part.label] = part
            return
        job.sources += part.sources
        for name in ("levels", "hosts", "torch", "builds", "nccl", "rccl", "toggle", "extensions"):
            getattr(job, name).update(getattr(part, name))
        job.failed += part.failed
        job.warned += part.warned

    # -- trend --------------------------------------------------------------------------------

    def set_previous(self, data: dict[str, Any]) -> None:
        self.previous = data

    def _trend(self) -> dict[str, Any] | None:
        if self.previous is None:
            return None
        before: dict[str, bytes] = {}
        for r in self.previous.get("repositories") or []:
            if isinstance(r, dict) and isinstance(r.get("key"), str):
                try:
                    before[r["key"]] = base64.b64decode(r.get("fingerprints") or "", validate=True)
                except ValueError:
                    before[r["key"]] = b""
        fixed = new = 0
        for repo in self.repos.values():
            if repo.key not in before:
                repo.trend = {"fixed": 0, "new": repo.findings}
                new += repo.findings
                continue
            old = Counter(unpack(before[repo.key]))
            now = Counter(unpack(repo.fingerprints))
            repo.trend = {"fixed": sum((old - now).values()), "new": sum((now - old).values())}
            fixed += repo.trend["fixed"]
            new += repo.trend["new"]
        totals = self.previous.get("totals")
        totals = totals if isinstance(totals, dict) else {}
        return {
            "previous": _str(self.previous.get("generated")),
            "fixed": fixed, "new": new,
            "findings_before": totals.get("findings") if isinstance(totals.get("findings"), int) else None,
            "repositories_not_reported": sorted(
                str(r.get("name")) for r in self.previous.get("repositories") or []
                if isinstance(r, dict) and r.get("key") not in self.repos),
            "repositories_added": sorted(r.name for r in self.repos.values() if r.key not in before),
        }

    # -- the result ---------------------------------------------------------------------------

    def to_json(self, now: datetime | None = None) -> dict[str, Any]:
        generated = (now or datetime.now(timezone.utc)).isoformat(timespec="seconds")
        trend = self._trend()
        repos = sorted(self.repos.values(),
                       key=lambda r: (-r.severity["break"], -r.toggles, -r.findings, r.name, r.key))
        sev = _counts()
        for r in repos:
            for k, v in r.severity.items():
                sev[k] += v
        jobs = sorted(self.jobs.values(), key=lambda j: (not j.legacy, -j.failed, j.label))
        totals = {
            "repositories": len(repos), "jobs": len(jobs),
            "findings": sum(r.findings for r in repos), "severity": sev,
            "write": sum(r.write for r in repos), "unsafe": sum(r.unsafe for r in repos),
            "cpp": sum(r.cpp for r in repos), "toggles": sum(r.toggles for r in repos),
            "clean": sum(r.findings == 0 and not r.errors for r in repos),
            "one_write_away": sum(r.one_write_away for r in repos),
            "jobs_legacy": sum(j.legacy for j in jobs),
        }
        history = [h for h in (self.previous or {}).get("history") or [] if isinstance(h, dict)]
        history.append({"at": generated, "findings": totals["findings"], "break": sev["break"],
                        "toggles": totals["toggles"], "jobs_legacy": totals["jobs_legacy"]})
        owners = sorted(self.owners.values(), key=lambda o: (o.name.startswith("("), -o.severity["break"],
                                                            -o.findings, o.name))
        return {
            "schema": SCHEMA,
            "generated": generated,
            "totals": totals,
            "rollback": {
                "toggles": totals["toggles"],
                "repositories_with_toggles": [r.name for r in repos if r.toggles],
                "breaks": sev["break"],
                "repositories_with_breaks": [r.name for r in repos if r.severity["break"]],
                "jobs_legacy": [j.label for j in jobs if j.legacy],
                "legacy_extensions": sorted({e for j in jobs for e in j.extensions}),
            },
            "one_write_away": sorted(r.name for r in repos if r.one_write_away),
            "trend": trend,
            "history": history,
            "repositories": [r.to_json() for r in repos],
            "owners": [o.to_json() for o in owners],
            "jobs": [j.to_json() for j in jobs],
            "skipped": [{"path": p, "why": w} for p, w in self.skipped],
        }


