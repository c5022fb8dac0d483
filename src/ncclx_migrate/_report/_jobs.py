"""A job's doctor report, of any level, as one row of the roll-up."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from typing import Any

from ._inputs import BadReport, Doc

__all__ = ["Job", "summarize_doctor"]


@dataclass
class Job:
    """What the reports labelled alike say about one job (sets: a merged report holds several values)."""

    label: str
    sources: list[str] = field(default_factory=list)
    levels: set[str] = field(default_factory=set)
    hosts: set[str] = field(default_factory=set)
    torch: set[str] = field(default_factory=set)
    builds: set[str] = field(default_factory=set)
    nccl: set[str] = field(default_factory=set)
    rccl: set[str] = field(default_factory=set)
    toggle: set[str] = field(default_factory=set)
    extensions: set[str] = field(default_factory=set)
    failed: int = 0
    warned: int = 0

    @property
    def legacy(self) -> bool:
        return "nccl-legacy" in self.builds

    def to_json(self) -> dict[str, Any]:
        return {
            "label": self.label, "sources": self.sources, "levels": sorted(self.levels), "hosts": sorted(self.hosts),
            "torch": sorted(self.torch), "builds": sorted(self.builds), "legacy": self.legacy,
            "nccl": sorted(self.nccl), "rccl": sorted(self.rccl), "toggle": sorted(self.toggle),
            "legacy_extensions": sorted(self.extensions), "failed": self.failed, "warned": self.warned,
        }


def summarize_doctor(doc: Doc) -> Job:
    """One job's doctor report (any level) as a Job row; BadReport if it is not one."""
    from .._doctor._model import Report, ReportError

    try:
        report = Report.from_json(doc.data)
    except ReportError as exc:
        raise BadReport(str(exc)) from None
    base = posixpath.basename(doc.path.replace("\\", "/"))
    job = Job(report.label or f"{report.host} ({base})")
    job.sources.append(doc.path)
    job.levels.add(report.level)
    job.hosts.add(report.host)
    if report.torch:
        job.torch.add(report.torch)
    for c in report.checks:
        job.failed += c.status.value in ("fail", "error")
        job.warned += c.status.value == "warn"
    facts = _doctor_facts(report)
    for fact, into in (("nccl-resolution.implementation", job.builds), ("nccl-version.runtime", job.nccl),
                       ("rccl-version.runtime", job.rccl), ("legacy-toggle.value", job.toggle)):
        into.update(str(v) for v in facts.get(fact, ()) if v is not None)
    for v in facts.get("compiled-extensions.legacy_only_packages", ()):
        if isinstance(v, list):
            job.extensions.update(str(x) for x in v)
    return job


def _doctor_facts(report: Any) -> dict[str, list[Any]]:
    """Each fingerprint fact's values in a job's report: read from the checks of one process's
    report, or from cluster-consistency's agreed and divergent facts in a merged one."""
    out: dict[str, list[Any]] = {}
    consistency = report.get("cluster-consistency")
    if consistency is not None and isinstance(consistency.details.get("divergent"), list):
        agreed = consistency.details.get("agreed")
        for fact, value in (agreed.items() if isinstance(agreed, dict) else ()):
            out.setdefault(fact, []).append(value)
        for d in consistency.details["divergent"]:
            if isinstance(d, dict) and isinstance(d.get("fact"), str):
                vals = out.setdefault(d["fact"], [])
                vals.append(d.get("majority"))
                vals.extend(m.get("value") for m in d.get("minority") or [] if isinstance(m, dict))
        if out or report.level in ("merge", "cluster"):
            return out
    for cid, key in (("nccl-resolution", "implementation"), ("nccl-version", "runtime"),
                     ("rccl-version", "runtime"), ("legacy-toggle", "value"),
                     ("compiled-extensions", "legacy_only_packages")):
        check = report.get(cid)
        if check is None:
            continue
        value = check.details.get(key)
        if value is None and key == "runtime":  # --level static loads nothing: the pinned wheel says
            pinned = check.details.get("pinned")
            value = pinned.partition("==")[2] or None if isinstance(pinned, str) else check.details.get("build")
        if key in check.details or value is not None:
            out[f"{cid}.{key}"] = [value]
    return out
