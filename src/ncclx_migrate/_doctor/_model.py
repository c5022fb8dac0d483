"""The doctor's data model: one CheckResult per check, one Report per process.

The JSON form is a contract (schema ``ncclx.doctor/1``): exactly the keys written by
``Report.to_json`` and nothing else, so Slurm prologs, CI and ``ncclx doctor merge`` can
read it back.
"""

from __future__ import annotations

import enum
import json
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
    # The backend the checks judged (an IMPL_* name) and why; None in a merged report.
    backend: str | None = None
    backend_why: str = ""
    # Which job this report speaks for (``--label``, else host and Slurm/torchrun job id): the
    # key ``ncclx report`` rolls jobs up by.  None in reports written before it existed.
    label: str | None = None

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
            "label": self.label,
            "rank": self.rank,
            "torch": self.torch,
            "backend": None if self.backend is None else {"judged": self.backend, "why": self.backend_why},
            "summary": self.summary(),
            "checks": [c.to_json() for c in self.checks],
        }

    @classmethod
    def from_text(cls, text: str | bytes) -> Report:
        """A report from JSON text (a saved file, a rank's message in the gather)."""
        try:
            data = json.loads(text)
        except RecursionError:
            raise ReportError(f"not JSON (nested deeper than {MAX_DEPTH} levels)") from None
        except json.JSONDecodeError as exc:
            raise ReportError(f"not JSON ({exc.msg} at line {exc.lineno})") from None
        except (ValueError, UnicodeDecodeError) as exc:  # a 5,000-digit number; not UTF-8
            raise ReportError(f"not JSON ({str(exc).splitlines()[0]})") from None
        return cls.from_json(data)

    @classmethod
    def from_json(cls, data: Any) -> Report:
        """Validate every field's type (a report is input from another machine)."""
        if not isinstance(data, dict):
            raise ReportError("not a JSON object")
        if data.get("schema") != SCHEMA:
            raise ReportError(f"schema is {_short(data.get('schema'))}, expected {SCHEMA!r}")
        rank = data.get("rank")
        if rank is not None and not (type(rank) is int and 0 <= rank < 2**31):
            raise ReportError(f'"rank" is {_short(rank)}, expected a rank number or null')
        checks = data.get("checks")
        if not isinstance(checks, list):
            raise ReportError(f'"checks" is {_short(checks)}, expected a list')
        out = []
        for n, c in enumerate(checks):
            if not isinstance(c, dict):
                raise ReportError(f"checks[{n}] is {_short(c)}, expected an object")
            try:
                status = Status(c.get("status"))
            except ValueError:
                raise ReportError(f'checks[{n}].status is {_short(c.get("status"))}') from None
            details = c.get("details") or {}
            if not isinstance(details, dict):
                raise ReportError(f"checks[{n}].details is {_short(details)}, expected an object")
            if _depth(details) > MAX_DEPTH:
                raise ReportError(f"checks[{n}].details is nested deeper than {MAX_DEPTH} levels")
            out.append(CheckResult(
                id=_text(c, "id", f"checks[{n}].", required=True), status=status,
                message=_text(c, "message", f"checks[{n}]."), remedy=_text(c, "remedy", f"checks[{n}]."),
                details=details,
            ))
        torch = data.get("torch")
        if torch is not None and not isinstance(torch, str):
            raise ReportError(f'"torch" is {_short(torch)}, expected a version string or null')
        backend = data.get("backend")  # absent in reports written before it existed
        if backend is not None and not (isinstance(backend, dict) and isinstance(backend.get("judged"), str)):
            raise ReportError(f'"backend" is {_short(backend)}, expected {{"judged": NAME, "why": TEXT}} or null')
        return cls(level=_text(data, "level", "", required=True), host=_text(data, "host", "", required=True),
                   rank=rank, torch=torch, checks=out, label=_text(data, "label", "") or None,
                   backend=backend["judged"] if backend else None,
                   backend_why=_text(backend, "why", "backend.") if backend else "")


# Deeper than any report the doctor writes (details hold flat facts and small tables).
MAX_DEPTH = 32


def _short(value: Any) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _text(obj: dict[str, Any], key: str, where: str, required: bool = False) -> str:
    value = obj.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise ReportError(f'{where}{key} is {_short(value) if key in obj else "missing"}, expected a string')
    return value


def _depth(value: Any) -> int:
    """Nesting depth of a JSON value, without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, depth)
            if depth > MAX_DEPTH:
                return depth
            stack.extend((v, depth + 1) for v in (item.values() if isinstance(item, dict) else item))
    return deepest
