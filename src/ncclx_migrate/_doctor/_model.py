"""The doctor's data model: one CheckResult per check, one Report per process.

The JSON form is a contract (schema ``ncclx.doctor/1``): exactly the keys written by
``Report.to_json`` and nothing else, so Slurm prologs, CI and ``ncclx doctor merge`` can
read it back.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "LEVELS",
    "SCHEMA",
    "CheckResult",
    "Report",
    "ReportError",
    "Status",
    "level_index",
]

SCHEMA = "ncclx.doctor/1"
LEVELS = ("static", "local", "probe", "cluster")


def level_index(level: str) -> int:
    return LEVELS.index(level)


class Status(str, enum.Enum):
    OK = "ok"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"
    ERROR = "error"


@dataclass
class CheckResult:
    id: str
    status: Status
    message: str
    remedy: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "status": self.status.value,
            "message": self.message,
            "remedy": self.remedy,
            "details": self.details,
        }


class ReportError(ValueError):
    """A JSON document that is not an ncclx.doctor/1 report (one-line reason)."""


@dataclass
class Report:
    level: str
    host: str
    rank: int | None
    torch: str | None
    checks: list[CheckResult] = field(default_factory=list)

    def summary(self) -> dict[str, int]:
        counts = {s.value: 0 for s in Status}
        for c in self.checks:
            counts[c.status.value] += 1
        return counts

    def exit_code(self, strict: bool = False) -> int:
        bad = {Status.FAIL, Status.ERROR} | ({Status.WARN} if strict else set())
        return 1 if any(c.status in bad for c in self.checks) else 0

    def get(self, check_id: str) -> CheckResult | None:
        return next((c for c in self.checks if c.id == check_id), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "level": self.level,
            "host": self.host,
            "rank": self.rank,
            "torch": self.torch,
            "summary": self.summary(),
            "checks": [c.to_json() for c in self.checks],
        }

    @classmethod
    def from_json(cls, data: Any) -> Report:
        if not isinstance(data, dict):
            raise ReportError("not a JSON object")
        if data.get("schema") != SCHEMA:
            raise ReportError(f"schema is {data.get('schema')!r}, expected {SCHEMA!r}")
        try:
            checks = [
                CheckResult(
                    id=str(c["id"]),
                    status=Status(c["status"]),
                    message=str(c.get("message", "")),
                    remedy=str(c.get("remedy", "")),
                    details=dict(c.get("details") or {}),
                )
                for c in data["checks"]
            ]
            rank = data.get("rank")
            return cls(
                level=str(data["level"]),
                host=str(data["host"]),
                rank=int(rank) if rank is not None else None,
                torch=data.get("torch"),
                checks=checks,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ReportError(f"malformed report ({type(exc).__name__}: {exc})") from None
