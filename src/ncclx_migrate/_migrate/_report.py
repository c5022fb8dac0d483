"""Output formats: text, json ("ncclx.migrate/1"), sarif (2.1.0), github annotations."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import quote

from .. import __version__
from ._model import FileResult, Finding, FixKind
from ._rules import RULES

__all__ = ["FORMATS", "SCHEMA", "render"]

SCHEMA = "ncclx.migrate/1"
FORMATS = ("text", "json", "sarif", "github")
_DOCS = "https://github.com/ncclx-migrate/ncclx-migrate/blob/main/docs/rules.md"


def _all_findings(results: Sequence[FileResult]) -> list[Finding]:
    out = [f for r in results for f in r.findings]
    out.sort(key=lambda f: (f.path, f.line, f.column, f.code))
    return out


def _errors(results: Sequence[FileResult]) -> list[dict[str, str]]:
    return [{"path": r.path, "message": r.error} for r in results if r.error]


def render_json(results: Sequence[FileResult], files_scanned: int) -> str:
    doc = {
        "schema": SCHEMA,
        "files_scanned": files_scanned,
        "findings": [f.as_json() for f in _all_findings(results)],
        "errors": _errors(results),
    }
    return json.dumps(doc, indent=2) + "\n"


def _marker(f: Finding, dry_run: bool) -> str:
    if f.applied:
        return "[would fix] " if dry_run else "[fixed] "
    if f.fix is FixKind.SAFE:
        return "[*] "
    if f.fix is FixKind.UNSAFE:
        return "[unsafe-fix] "
    return ""


def render_text(results: Sequence[FileResult], files_scanned: int, dry_run: bool = False) -> str:
    """``dry_run``: --diff without --write, so "applied" fixes were only shown, not written."""
    lines = []
    findings = _all_findings(results)
    for f in findings:
        lines.append(f"{f.path}:{f.line}:{f.column}: {f.code} {_marker(f, dry_run)}{f.message}")
    for e in _errors(results):
        lines.append(f"{e['path']}: error: {e['message']}")
    left = [f for f in findings if not f.applied]
    fixed = len(findings) - len(left)
    safe = sum(1 for f in left if f.fix is FixKind.SAFE)
    unsafe = sum(1 for f in left if f.fix is FixKind.UNSAFE)
    summary = f"Found {len(findings)} finding{'s' if len(findings) != 1 else ''} in {files_scanned} file{'s' if files_scanned != 1 else ''}"
    if fixed:
        done = "would be fixed by --write" if dry_run else "fixed"
        summary += f" ({fixed} {done}, {len(left)} left)"
    summary += "."
    if safe:
        summary += f" {safe} fixable with --write ([*])."
    if unsafe:
        summary += f" {unsafe} more with --write --unsafe-fixes."
    if _errors(results):
        summary += f" {len(_errors(results))} file(s) could not be processed."
    lines.append(summary if findings or _errors(results) else f"No findings in {files_scanned} files.")
    return "\n".join(lines) + "\n"


def _gh_escape(s: str, prop: bool = False) -> str:
    s = s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    if prop:
        s = s.replace(":", "%3A").replace(",", "%2C")
    return s


def render_github(results: Sequence[FileResult], files_scanned: int) -> str:
    lines = []
    for f in _all_findings(results):
        if f.applied:
            continue
        level = "warning"
        lines.append(
            f"::{level} title={_gh_escape(f.code, True)},file={_gh_escape(f.path, True)},"
            f"line={f.line},col={f.column}::{_gh_escape(f.code + ' ' + f.message)}"
        )
    for e in _errors(results):
        lines.append(f"::error file={_gh_escape(e['path'], True)}::{_gh_escape(e['message'])}")
    return "\n".join(lines) + ("\n" if lines else "")


def _artifact(path: str) -> dict[str, str]:
    """A SARIF artifactLocation: relative to the working directory (what GitHub code
    scanning resolves against the checkout) when the file is under it, else a file URI."""
    p = Path(path)
    try:
        rel = p.resolve().relative_to(Path.cwd().resolve()) if p.is_absolute() else Path(os.path.normpath(path))
    except ValueError:
        return {"uri": p.resolve().as_uri()}
    if rel.parts and rel.parts[0] == "..":
        return {"uri": p.resolve().as_uri()}
    return {"uri": quote(rel.as_posix()), "uriBaseId": "%SRCROOT%"}


def render_sarif(results: Sequence[FileResult], files_scanned: int) -> str:
    rules = [
        {
            "id": r.code,
            "name": r.name,
            "shortDescription": {"text": r.summary},
            "helpUri": f"{_DOCS}#{r.code.lower()}",
            "properties": {"fix": r.fix_label, "torch": r.torch},
        }
        for r in RULES
    ]
    index = {r.code: i for i, r in enumerate(RULES)}
    sarif_results = []
    for f in _all_findings(results):
        if f.applied:
            continue
        res: dict[str, object] = {
            "ruleId": f.code,
            "level": "warning",
            "message": {"text": f.message},
            "locations": [{
                "physicalLocation": {
                    "artifactLocation": _artifact(f.path),
                    "region": {"startLine": f.line, "startColumn": f.column},
                }
            }],
            "properties": {"fix": f.fix.value},
        }
        if f.code in index:
            res["ruleIndex"] = index[f.code]
        sarif_results.append(res)
    notifications = [
        {"level": "error", "message": {"text": f"{e['path']}: {e['message']}"}} for e in _errors(results)
    ]
    doc = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "ncclx-migrate",
                "version": __version__,
                "informationUri": _DOCS,
                "rules": rules,
            }},
            "originalUriBaseIds": {"%SRCROOT%": {"uri": Path.cwd().resolve().as_uri() + "/"}},
            "results": sarif_results,
            "invocations": [{
                "executionSuccessful": not notifications,
                "toolExecutionNotifications": notifications,
            }],
        }],
    }
    return json.dumps(doc, indent=2) + "\n"


def render(
    fmt: str, results: Sequence[FileResult], files_scanned: int, dry_run: bool = False
) -> str:
    if fmt == "text":
        return render_text(results, files_scanned, dry_run)
    return {
        "text": render_text,
        "json": render_json,
        "sarif": render_sarif,
        "github": render_github,
    }[fmt](results, files_scanned)
