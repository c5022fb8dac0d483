"""Output formats: text, json ("ncclx.migrate/1"), sarif (2.1.0), github annotations."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

from .. import __version__
from ._model import FileResult, Finding, FixKind
from ._rules import RULES, rule_doc_uri

__all__ = ["FORMATS", "SCHEMA", "TextView", "render"]

SCHEMA = "ncclx.migrate/1"
FORMATS = ("text", "json", "sarif", "github")


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


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


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


def _summary(fine: list[Finding], findings: list[Finding], n_errors: int, files_scanned: int, view: TextView) -> str:
    """What happened in the mode that ran, and what the next command would add (only for
    ``fine``, the findings of files that had no error: another run fails the same way)."""
    if not findings and not n_errors:
        return f"No findings in {_plural(files_scanned, 'file')}."
    left = [f for f in findings if not f.applied]
    fixed = len(findings) - len(left)
    safe = sum(1 for f in fine if not f.applied and f.fix is FixKind.SAFE)
    unsafe = sum(1 for f in fine if not f.applied and f.fix is FixKind.UNSAFE)
    out = f"Found {_plural(len(findings), 'finding')} in {_plural(files_scanned, 'file')}"
    hint = ""
    if view.write:
        out += f" ({fixed} fixed, {len(left)} left)."
    elif view.diff:
        how = "--write --unsafe-fixes" if view.unsafe else "--write"
        out += f" ({fixed} would be fixed by {how}, {len(left)} left)."
    else:
        out += "."
    if not (view.write or view.diff):
        # ruff's hint, on a line of its own: unsafe fixes are "hidden" (no tag on their lines).
        hidden = f"{unsafe} hidden fix{'' if unsafe == 1 else 'es'} can be enabled with --write --unsafe-fixes"
        if safe:
            hint = f"[*] {safe} fixable with --write" + (f" ({hidden})." if unsafe else ".")
        elif unsafe:
            hint = f"No fixes available ({hidden})."
    else:
        # One run reaches the fixed point (_fixpoint): a wanted fix is left only where a file
        # still changed after the last pass the run allows (no real code has shown one).
        pending = safe + (unsafe if view.unsafe else 0)
        if pending:
            out += f" {pending} more fixable by running it again."
        if unsafe and not view.unsafe:
            out += f" {unsafe} more with --unsafe-fixes."
    if n_errors:
        out += f" {_plural(n_errors, 'file')} could not be processed."
    return out + (f"\n{hint}" if hint else "")


def render_text(
    results: Sequence[FileResult], files_scanned: int, dry_run: bool = False, view: TextView | None = None
) -> str:
    """``dry_run``: --diff without --write, so "applied" fixes were only shown, not written."""
    view = view or TextView(diff=dry_run)
    style = _Style(view.color)
    colon = style(":", _CYAN)
    lines = []
    findings = _all_findings(results)
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
    failed = {e["path"] for e in errors}
    lines.append(_summary([f for f in findings if f.path not in failed], findings, len(errors), files_scanned, view))
    return "\n".join(lines) + "\n"


def _gh_escape(s: str, prop: bool = False) -> str:
    s = s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    if prop:
        s = s.replace(":", "%3A").replace(",", "%2C")
    return s


def _gh_text(f: Finding) -> str:
    """An annotation has room for the why: the short message, then the detail below it."""
    return f"{f.code} {f.message}{_in_cell(f)}" + (f"\n\n{f.detail}" if f.detail else "")


def render_github(results: Sequence[FileResult], files_scanned: int) -> str:
    lines = []
    for f in _all_findings(results):
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


def render_sarif(results: Sequence[FileResult], files_scanned: int) -> str:
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
    fmt: str, results: Sequence[FileResult], files_scanned: int, dry_run: bool = False,
    view: TextView | None = None,
) -> str:
    if fmt == "text":
        return render_text(results, files_scanned, dry_run, view)
    return {
        "text": render_text,
        "json": render_json,
        "sarif": render_sarif,
        "github": render_github,
    }[fmt](results, files_scanned)
