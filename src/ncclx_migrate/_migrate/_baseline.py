"""The ratchet: ``ncclx migrate --baseline FILE`` fails only on findings not in FILE.

A finding's fingerprint is its rule code, its path (relative to the baseline's folder, or
to the working directory without a baseline), its normalised source line (whitespace runs
made one space; in a notebook the cell's line, so that moving a cell changes nothing), and
its occurrence index among the findings of that file with the same code and line text.  So
it survives line moves and unrelated edits; a second identical finding is new, and so are
the findings of a renamed or moved file.

The baseline file is JSON with one entry per line, sorted, so that ``git diff`` shows one
line per finding that came or went.  Entries whose finding is gone are "absent" (fixed);
only entries of files this run scanned (without an error) and of rules it selected can be,
and those of files that no longer exist: a pre-commit run on two files says nothing about the rest.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from ._atomic import replace_with
from ._model import Finding, Options, is_selected
from ._output import _cell_line

__all__ = ["SCHEMA", "Baseline", "BaselineError", "Comparison", "Entry", "compare", "load", "ratchet", "stamp",
           "updated", "write"]

SCHEMA = "ncclx.baseline/1"
# The shown (not the fingerprinted) source text is cut here: the file stays small.
_SOURCE_CHARS = 100


class BaselineError(ValueError):
    """The file is not a baseline this version reads (one line: the CLI says it)."""


@dataclass(frozen=True, order=True)
class Entry:
    path: str  # POSIX, relative to the baseline file's folder
    code: str
    source: str  # the normalised source line, shortened
    fingerprint: str

    def as_json(self) -> dict[str, str]:
        return {"path": self.path, "code": self.code, "source": self.source, "fingerprint": self.fingerprint}


@dataclass
class Baseline:
    path: str  # as the user named it
    entries: list[Entry] = field(default_factory=list)

    @property
    def folder(self) -> str:
        return os.path.dirname(os.path.abspath(self.path))


@dataclass
class Comparison:
    """What the run found against a baseline (each finding's state is on the finding)."""

    baseline: Baseline
    new: int = 0
    unchanged: int = 0
    absent: list[Entry] = field(default_factory=list)  # fixed since the baseline
    written: bool = False  # --update-baseline wrote the file

    def as_json(self) -> dict[str, object]:
        return {"path": self.baseline.path, "new": self.new, "unchanged": self.unchanged,
                "absent": [e.as_json() for e in self.absent], "updated": self.written}


def relative(path: str, folder: str) -> str:
    """``path`` as a baseline names it: POSIX, relative to ``folder``."""
    if path == "-":
        return path
    rel = os.path.relpath(os.path.abspath(path), folder)
    return rel.replace(os.sep, "/")


def _normalised(line: str) -> str:
    return " ".join(line.split())


def _source_line(f: Finding, lines: list[str] | None) -> str:
    """The finding's line as the user reads it (a notebook's: the cell's line, not the JSON)."""
    if lines is None or not 1 <= f.line <= len(lines):
        return ""
    line = lines[f.line - 1]
    if f.cell is not None:
        line = _cell_line(line) or line
    return _normalised(line)


def _digest(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:20]


def stamp(findings: Iterable[Finding], read: Callable[[str], str | None], folder: str) -> dict[int, Entry]:
    """Give each finding left (not applied) its ``fingerprint``; returns id(finding) -> entry.

    ``read`` gives the text a finding's position points into (the fixed text after --write
    or --diff)."""
    by_path: dict[str, list[Finding]] = {}
    for f in findings:
        if not f.applied:
            by_path.setdefault(f.path, []).append(f)
    out: dict[int, Entry] = {}
    for path, group in by_path.items():
        text = read(path)
        lines = text.split("\n") if text is not None else None  # as the scanners count lines
        rel = relative(path, folder)
        seen: Counter[tuple[str, str]] = Counter()
        for f in sorted(group, key=lambda f: (f.line, f.column, f.code)):
            src = _source_line(f, lines)
            k = seen[(f.code, src)]
            seen[(f.code, src)] += 1
            fp = _digest(f.code, rel, src, str(k))
            f.fingerprint = fp
            shown = src if len(src) <= _SOURCE_CHARS else src[: _SOURCE_CHARS - 1] + "\u2026"
            out[id(f)] = Entry(rel, f.code, shown, fp)
    return out


# --update-baseline refuses a file that is not a baseline (it may be anyone's file): advise a new one.
_ANOTHER = "choose another file for --baseline (--update-baseline creates it), or delete this one if it was a baseline"


def load(path: str) -> Baseline:
    """Read a baseline file; raises :class:`BaselineError` (one line) if it is not one."""
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except FileNotFoundError:
        raise BaselineError(f"{path}: no such baseline; create it with --baseline {path} --update-baseline") from None
    except OSError as exc:
        raise BaselineError(f"{path}: cannot read the baseline: {exc.strerror or exc}") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise BaselineError(f"{path}: not a baseline (invalid JSON: {exc}); {_ANOTHER}") from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA or not isinstance(doc.get("findings"), list):
        raise BaselineError(f"{path}: not an {SCHEMA} baseline; {_ANOTHER}")
    entries = []
    for e in doc["findings"]:
        if not (isinstance(e, dict) and all(isinstance(e.get(k), str) for k in ("path", "code", "fingerprint"))):
            raise BaselineError(f"{path}: an entry without path, code and fingerprint: {json.dumps(e)[:80]}; "
                                f"{_ANOTHER}")
        src = e.get("source")
        entries.append(Entry(e["path"], e["code"], src if isinstance(src, str) else "", e["fingerprint"]))
    return Baseline(path, entries)


def compare(baseline: Baseline, findings: Sequence[Finding], entries: dict[int, Entry], scanned: Iterable[str],
            options: Options) -> Comparison:
    """Each finding left gets ``baseline_state`` new or unchanged; the baseline's entries of the
    files scanned (``scanned``: paths as the run named them) and rules selected that no
    finding matches are absent."""
    left = Counter(e.fingerprint for e in baseline.entries)
    out = Comparison(baseline)
    for f in findings:
        if f.applied or id(f) not in entries:
            continue
        fp = entries[id(f)].fingerprint
        if left[fp] > 0:
            left[fp] -= 1
            f.baseline_state = "unchanged"
            out.unchanged += 1
        else:
            f.baseline_state = "new"
            out.new += 1
    in_scope = _scope(baseline, scanned, options)
    for e in baseline.entries:
        if left[e.fingerprint] > 0 and in_scope(e):
            left[e.fingerprint] -= 1
            out.absent.append(e)
    return out


def _scope(baseline: Baseline, scanned: Iterable[str], options: Options) -> Callable[[Entry], bool]:
    """The entries this run can say are fixed: of a file it scanned and a rule it selected, or
    of a file that is no longer there (deleted, or renamed: its findings are new under the new name)."""
    paths = {relative(p, baseline.folder) for p in scanned}

    def gone(e: Entry) -> bool:
        return e.path != "-" and not os.path.lexists(os.path.join(baseline.folder, e.path))

    return lambda e: (e.path in paths and is_selected(e.code, options)) or (e.path not in paths and gone(e))


def updated(baseline: Baseline, entries: Iterable[Entry], scanned: Iterable[str], options: Options) -> Baseline:
    """The baseline with this run's findings in place of its entries in scope (the rest kept)."""
    in_scope = _scope(baseline, scanned, options)
    kept = [e for e in baseline.entries if not in_scope(e)]
    return Baseline(baseline.path, sorted({*kept, *entries}))


def render(baseline: Baseline) -> str:
    """The file's text: one entry per line, sorted, so that git diffs are one line per finding."""
    rows = sorted(set(baseline.entries))
    body = ",\n".join("    " + json.dumps(e.as_json(), ensure_ascii=False) for e in rows)
    return f'{{\n  "schema": "{SCHEMA}",\n  "findings": [\n{body}{chr(10) if rows else ""}  ]\n}}\n'


def write(baseline: Baseline) -> None:
    """Write the file atomically (a reader never sees half of it); raises OSError."""
    replace_with(os.path.abspath(baseline.path), render(baseline), ".ncclx-baseline-")


def ratchet(baseline: Baseline, findings: Sequence[Finding], scanned: Sequence[str], options: Options,
            read: Callable[[str], str | None], update: bool) -> Comparison:
    """Stamp the findings, compare them with ``baseline``, and with ``update`` write the file
    with this run's findings in place of the entries of what it scanned (raises OSError)."""
    entries = stamp(findings, read, baseline.folder)
    out = compare(baseline, findings, entries, scanned, options)
    if update:
        write(updated(baseline, entries.values(), scanned, options))
        out.written = True
    return out
