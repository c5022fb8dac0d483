"""The roll-up's inputs: files, folders and globs, read one at a time.

Each input is read, judged and handed on before the next is opened, so memory holds one
report at a time whatever the fleet's size.  An input that is not a report is one line
(``Skip``), never an exception.
"""

from __future__ import annotations

import glob
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["MAX_INPUT_BYTES", "BadReport", "Doc", "Skip", "expand", "read"]

MAX_INPUT_BYTES = 1 << 30  # a migrate report of 200 findings is ~100 KB; a GB is not a report
SCHEMAS = ("ncclx.migrate/1", "ncclx.doctor/1")


class BadReport(ValueError):
    """A report whose schema is right but whose content is not (one-line reason)."""


@dataclass(frozen=True)
class Doc:
    path: str
    schema: str
    data: dict[str, Any]


@dataclass(frozen=True)
class Skip:
    path: str
    why: str


def expand(args: tuple[str, ...]) -> Iterator[str | Skip]:
    """Every input file, in a stable order: a folder gives its *.json files (recursively), a
    glob its matches; a name that is none of these is a Skip."""
    seen: set[str] = set()

    def walk(folder: str) -> Iterator[str]:
        for dirpath, dirnames, filenames in os.walk(folder):
            dirnames.sort()
            for name in sorted(filenames):
                if name.endswith(".json"):
                    yield os.path.join(dirpath, name)

    for arg in args:
        if os.path.isdir(arg):
            found: Iterator[str] = walk(arg)
        elif os.path.exists(arg):
            found = iter([arg])
        elif glob.has_magic(arg):
            matches = sorted(glob.glob(arg, recursive=True))
            if not matches:
                yield Skip(arg, "no file matches this pattern")
                continue
            found = (f for m in matches for f in (walk(m) if os.path.isdir(m) else [m]))
        else:
            yield Skip(arg, "no such file or folder")
            continue
        for path in found:
            key = os.path.normpath(path)
            if key not in seen:
                seen.add(key)
                yield path


def _why_not(data: Any) -> str:
    if not isinstance(data, dict):
        return f"not an ncclx report (a JSON {type(data).__name__.replace('dict', 'object')})"
    schema = data.get("schema")
    if schema == "ncclx.report/1":
        return "a roll-up, not a repository's or job's report; pass it with --previous"
    if str(data.get("version")) == "2.1.0" and "runs" in data:
        return "a SARIF file; save repository reports with ncclx migrate --format json"
    shown = json.dumps(schema)[:40] if schema is not None else "missing"
    return f"not an ncclx migrate or doctor report (schema {shown}; expected one of {', '.join(SCHEMAS)})"


def read(path: str) -> Doc | Skip:
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_INPUT_BYTES + 1)
    except OSError as exc:
        return Skip(path, f"cannot read it ({exc.strerror or exc})")
    if len(raw) > MAX_INPUT_BYTES:
        return Skip(path, f"over {MAX_INPUT_BYTES >> 20} MB, not an ncclx report")
    try:
        data = json.loads(raw)
    except RecursionError:
        return Skip(path, "not JSON (nested too deeply)")
    except json.JSONDecodeError as exc:
        return Skip(path, f"not JSON, or cut short ({exc.msg} at line {exc.lineno})")
    except (ValueError, UnicodeDecodeError) as exc:
        return Skip(path, f"not JSON ({str(exc).splitlines()[0][:80]})")
    if isinstance(data, dict) and data.get("schema") in SCHEMAS:
        return Doc(path, data["schema"], data)
    return Skip(path, _why_not(data))
