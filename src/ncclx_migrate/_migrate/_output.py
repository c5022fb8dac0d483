"""Output formats: text, json ("ncclx.migrate/1"), sarif (2.1.0), github annotations, gitlab
(Code Quality)."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from .. import __version__
from .._words import count
from ._model import FileResult, Finding, FixKind
from ._rule_table import RULES, rule_doc_uri

if TYPE_CHECKING:
    from ._baseline import Comparison, Entry

__all__ = ["FORMATS", "SCHEMA", "TextView", "render"]

SCHEMA = "ncclx.migrate/1"
FORMATS = ("text", "json", "sarif", "github", "gitlab")


def _all_findings(results: Sequence[FileResult]) -> list[Finding]:
    out = [f for r in results for f in r.findings]
    out.sort(key=lambda f: (f.path, f.line, f.column, f.code))
    return out


def _reported(findings: list[Finding]) -> list[Finding]:
    """What a text, github or gitlab report lists: not the findings a baseline holds."""
    return [f for f in findings if f.baseline_state != "unchanged"]


def _errors(results: Sequence[FileResult]) -> list[dict[str, str]]:
    return [{"path": r.path, "message": r.error} for r in results if r.error]


def render_json(results: Sequence[FileResult], files_scanned: int, baseline: Comparison | None = None,
                project: dict[str, Any] | None = None) -> str:
    doc: dict[str, object] = {
        "schema": SCHEMA,
        **({} if project is None else {"project": project}),  # which repository (ncclx report reads it)
        "files_scanned": files_scanned,
        "findings": [f.as_json() for f in _all_findings(results)],
        "errors": _errors(results),
    }
    if baseline is not None:
        doc["baseline"] = baseline.as_json()
    return json.dumps(doc, indent=2) + "\n"


def read_source(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace", newline="") as fh:
            text = fh.read()
    except OSError:
        return None
    return text[1:] if text.startswith("\ufeff") else text  # positions do not count a BOM


@dataclass(frozen=True)
class TextView:
    """How the text report is shown: the mode that ran and the stream it goes to."""

    write: bool = False  # --write: fixes were written
    diff: bool = False  # --diff: fixes were only shown
    unsafe: bool = False  # --unsafe-fixes (with --write/--diff)
    color: bool = False
    show_source: bool = False  # ruff's code frame under each finding
    # The text a finding's position points into (the file on disk unless told otherwise).
    read: Callable[[str], str | None] = field(default=read_source, compare=False)


class _Style:
    def __init__(self, on: bool) -> None:
        self.on = on

    def __call__(self, text: str, *codes: str) -> str:
        return f"\x1b[{';'.join(codes)}m{text}\x1b[0m" if self.on and text else text


_BOLD, _RED, _GREEN, _YELLOW, _BLUE, _CYAN = "1", "31", "32", "33", "34", "36"


def _marker(f: Finding, dry_run: bool, style: _Style) -> str:
    if f.applied:
        return style("[would fix]" if dry_run else "[fixed]", _GREEN) + " "
    if f.fix is FixKind.SAFE:
        return style("[*]", _CYAN) + " "
    return ""  # ruff's way: an unsafe fix has no tag; the summary counts them


def _cell_line(json_line: str) -> str | None:
    """The cell's line a notebook's JSON line holds (one string of a ``source`` list), else None."""
    try:
        value = json.loads(json_line.strip().rstrip(","))
    except ValueError:
        return None
    return value.rstrip("\r\n") if isinstance(value, str) and "\n" not in value.rstrip("\r\n") else None


def _frame(f: Finding, text: str | None, style: _Style) -> list[str]:
    """ruff's code frame: the finding's source line with a caret under its column."""
    if text is None:
        return []
    lines = text.split("\n")  # not splitlines(): \f or \u2028 do not end a line for the scanners
    if not 1 <= f.line <= len(lines):
        return []
    src, num, column = lines[f.line - 1].rstrip("\r"), str(f.line), f.column
    if f.cell is not None and (cell_line := _cell_line(src)) is not None:
        src, num, column = cell_line, str(f.cell.line), f.cell.column  # as ruff frames a cell
    # One column per character: tabs become one space so that the caret stays aligned.
    src = src.replace("\t", " ")
    pad = " " * len(num)
    bar = style("|", _BLUE, _BOLD)
    caret = " " * (min(column, len(src) + 1) - 1) + style("^", _RED, _BOLD) + " " + style(f.code, _RED, _BOLD)
    return [f"{pad} {bar}", f"{style(num, _BLUE, _BOLD)} {bar} {src}".rstrip(), f"{pad} {bar} {caret}", f"{pad} {bar}", ""]


def _position(f: Finding, colon: str) -> str:
    """``line:col``; in a notebook ruff's ``cell N:line:col``, counted within the cell."""
    if f.cell is None:
        return f"{f.line}{colon}{f.column}"
    return f"cell {f.cell.number}{colon}{f.cell.line}{colon}{f.cell.column}"


def _in_cell(f: Finding) -> str:
    """For formats that point into the .ipynb text: where that is in the notebook."""
    return "" if f.cell is None else f" (cell {f.cell.number}, line {f.cell.line})"


def _summary(fine: list[Finding], findings: list[Finding], n_errors: int, files_scanned: int, view: TextView,
             new: str = "") -> str:
    """What happened in the mode that ran, and what the next command would add (only for
    ``fine``, the findings of files that had no error: another run fails the same way);
    ``new``: "new " against a baseline."""
    if not findings and not n_errors:
        return f"No {new}findings in {count(files_scanned, 'file')}."
    left = [f for f in findings if not f.applied]
    fixed = len(findings) - len(left)
    safe = sum(1 for f in fine if not f.applied and f.fix is FixKind.SAFE)
    unsafe = sum(1 for f in fine if not f.applied and f.fix is FixKind.UNSAFE)
    out = f"Found {count(len(findings), new + 'finding')} in {count(files_scanned, 'file')}"
    hint = ""
    if view.write:
        out += f" ({fixed:,} fixed, {len(left):,} left)."
    elif view.diff:
        how = "--write --unsafe-fixes" if view.unsafe else "--write"
        out += f" ({fixed:,} would be fixed by {how}, {len(left):,} left)."
    else:
        out += "."
    if not (view.write or view.diff):
        # ruff's hint, on a line of its own: unsafe fixes are "hidden" (no tag on their lines).
        hidden = f"{count(unsafe, 'hidden fix', 'hidden fixes')} can be enabled with --write --unsafe-fixes"
        if safe:
            hint = f"[*] {safe:,} fixable with --write" + (f" ({hidden})." if unsafe else ".")
        elif unsafe:
            hint = f"No fixes available ({hidden})."
    else:
        # One run reaches the fixed point (_fixpoint): a wanted fix is left only where a file
        # still changed after the last pass the run allows (no real code has shown one).
        pending = safe + (unsafe if view.unsafe else 0)
        if pending:
            out += f" {pending:,} more fixable by running it again."
        if unsafe and not view.unsafe:
            out += f" {unsafe:,} more with --unsafe-fixes."
    if n_errors:
        out += f" {count(n_errors, 'file')} could not be processed."
    return out + (f"\n{hint}" if hint else "")


def render_text(
    results: Sequence[FileResult], files_scanned: int, dry_run: bool = False, view: TextView | None = None,
    baseline: Comparison | None = None,
) -> str:
    """``dry_run``: --diff without --write, so "applied" fixes were only shown, not written."""
    view = view or TextView(diff=dry_run)
    style = _Style(view.color)
    colon = style(":", _CYAN)
    lines = []
    findings = _reported(_all_findings(results))
    sources: dict[str, str | None] = {}
    for f in findings:
        where = f"{style(f.path, _BOLD)}{colon}{_position(f, colon)}{colon}"
        lines.append(f"{where} {style(f.code, _RED, _BOLD)} {_marker(f, view.diff, style)}{f.message}")
        if view.show_source and not f.applied:  # a fixed line is in the diff or the written file
            if f.path not in sources:
                sources[f.path] = view.read(f.path)
            lines.extend(_frame(f, sources[f.path], style))
    errors = _errors(results)
    for e in errors:
        lines.append(f"{style(e['path'], _BOLD)}{colon} {style('error', _RED, _BOLD)}{colon} {e['message']}")
    if baseline is not None:
        lines += [_fixed_line(baseline, e, style) for e in baseline.absent]
    failed = {e["path"] for e in errors}
    new = "new " if baseline is not None and not (view.write or view.diff) else ""
    lines.append(_summary([f for f in findings if f.path not in failed], findings, len(errors), files_scanned, view, new))
    if baseline is not None:
        lines.append(_baseline_summary(baseline))
    return "\n".join(lines) + "\n"


def _shown_path(baseline: Comparison, e: Entry) -> str:
    """A baseline entry's path as the other lines name files (relative to the working directory)."""
    path = os.path.normpath(os.path.join(baseline.baseline.folder, e.path))
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel


def _fixed_line(baseline: Comparison, e: Entry, style: _Style) -> str:
    return f"{style(_shown_path(baseline, e), _BOLD)}{style(':', _CYAN)} {style(e.code, _GREEN, _BOLD)} " \
           f"{style('[baseline: fixed]', _GREEN)} {e.source}".rstrip()


def _baseline_summary(c: Comparison) -> str:
    """The one line about the baseline: what it holds back, and what is fixed since."""
    name = c.baseline.path
    if c.written:
        return (f"Wrote {name}: {count(c.new, 'finding')} added, {c.unchanged} kept, "
                f"{len(c.absent)} fixed and dropped.")
    out = f"{count(c.unchanged, 'finding')} in the baseline ({name}) not shown"
    if c.absent:
        out += f"; {len(c.absent)} of its entries fixed: --update-baseline drops them"
    return out + "."


def _gh_escape(s: str, prop: bool = False) -> str:
    s = s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    if prop:
        s = s.replace(":", "%3A").replace(",", "%2C")
    return s


def _gh_text(f: Finding) -> str:
    """An annotation has room for the why: the short message, then the detail below it."""
    return f"{f.code} {f.message}{_in_cell(f)}" + (f"\n\n{f.detail}" if f.detail else "")


def render_github(results: Sequence[FileResult], files_scanned: int, baseline: Comparison | None = None) -> str:
    lines = []
    for f in _reported(_all_findings(results)):
        if f.applied:
            continue
        level = "warning"
        lines.append(
            f"::{level} title={_gh_escape(f.code, True)},file={_gh_escape(f.path, True)},"
            f"line={f.line},col={f.column}::{_gh_escape(_gh_text(f))}"
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


def render_sarif(results: Sequence[FileResult], files_scanned: int, baseline: Comparison | None = None) -> str:
    rules = []
    for r in RULES:
        rule: dict[str, object] = {"id": r.code, "name": r.name, "shortDescription": {"text": r.summary}}
        uri = rule_doc_uri(r.code)  # the page `ncclx explain` prints, where it is a file
        if uri:
            rule["helpUri"] = uri
        rules.append({**rule, "properties": {"fix": r.fix_label, "torch": r.torch}})
    index = {r.code: i for i, r in enumerate(RULES)}
    sarif_results = []
    for f in _all_findings(results):
        if f.applied:
            continue
        props: dict[str, object] = {"fix": f.fix.value, "detail": f.detail}
        if f.cell is not None:
            props["cell"] = f.cell.as_json()
        res: dict[str, object] = {
            "ruleId": f.code,
            "level": "warning",
            "message": {"text": f.message + _in_cell(f)},
            "locations": [{
                "physicalLocation": {
                    "artifactLocation": _artifact(f.path),
                    "region": {"startLine": f.line, "startColumn": f.column},
                }
            }],
            "properties": props,
        }
        if f.code in index:
            res["ruleIndex"] = index[f.code]
        if f.fingerprint is not None:  # what code scanning tracks an alert by, across commits
            res["partialFingerprints"] = {_FINGERPRINT_KEY: f.fingerprint}
        if f.baseline_state is not None:
            res["baselineState"] = f.baseline_state
        sarif_results.append(res)
    for e in baseline.absent if baseline is not None else []:
        assert baseline is not None
        # Fixed since the baseline: a result that passes (kind "pass", level "none").
        gone: dict[str, object] = {
            "ruleId": e.code, "kind": "pass", "level": "none", "baselineState": "absent",
            "message": {"text": f"fixed since the baseline: {e.source}"},
            "locations": [{"physicalLocation": {"artifactLocation": _artifact(_shown_path(baseline, e))}}],
            "partialFingerprints": {_FINGERPRINT_KEY: e.fingerprint},
        }
        if e.code in index:
            gone["ruleIndex"] = index[e.code]
        sarif_results.append(gone)
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


_FINGERPRINT_KEY = "ncclxFingerprint/v1"


def render_gitlab(results: Sequence[FileResult], files_scanned: int, baseline: Comparison | None = None) -> str:
    """GitLab Code Quality, as ruff writes it: a JSON array of issues, each with the rule as
    ``check_name`` and in the description, severity "major", a unique fingerprint, and the
    path relative to ``$CI_PROJECT_DIR`` (else the working directory)."""
    root = os.environ.get("CI_PROJECT_DIR") or os.getcwd()
    issues = []
    for f in _reported(_all_findings(results)):
        if f.applied:
            continue
        begin = {"line": f.line, "column": f.column}
        issues.append({
            "check_name": f.code,
            "description": f"{f.code}: {f.message}{_in_cell(f)}",
            "severity": "major",
            "fingerprint": f.fingerprint or hashlib.sha256(f"{f.code}\0{f.path}\0{f.line}\0{f.column}".encode(
                "utf-8", "surrogatepass")).hexdigest()[:20],
            "location": {"path": os.path.relpath(os.path.abspath(f.path), root).replace(os.sep, "/"),
                         "positions": {"begin": begin, "end": begin}},
        })
    return json.dumps(issues, indent=2) + "\n"


def render(
    fmt: str, results: Sequence[FileResult], files_scanned: int, dry_run: bool = False,
    view: TextView | None = None, baseline: Comparison | None = None, project: dict[str, Any] | None = None,
) -> str:
    if fmt == "text":
        return render_text(results, files_scanned, dry_run, view, baseline)
    if fmt == "json":
        return render_json(results, files_scanned, baseline, project)
    return {
        "sarif": render_sarif,
        "github": render_github,
        "gitlab": render_gitlab,
    }[fmt](results, files_scanned, baseline)
