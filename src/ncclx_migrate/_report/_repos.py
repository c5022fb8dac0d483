"""A repository's migrate report as counts: its row, its owners' share, its fingerprints.

The findings are counted and then dropped: what is kept is per repository one fingerprint per
open finding (8 bytes), so that the next roll-up can tell fixed from new (``--previous``).
"""

from __future__ import annotations

import base64
import posixpath
import re
import sys
from array import array
from collections import Counter
from dataclasses import dataclass, field
from hashlib import blake2b
from operator import itemgetter
from typing import Any

from .._codeowners import Owners
from .._migrate._rule_table import ROLLBACK_CODES, RULES, SEVERITIES, severity
from ._inputs import BadReport, Doc

__all__ = [
    "FILES_PER_OWNER",
    "FP_BYTES",
    "NO_CODEOWNERS",
    "UNOWNED",
    "Owner",
    "Repo",
    "RepoPart",
    "pack",
    "summarize_migrate",
    "unpack",
]

UNOWNED = "(no owner)"  # a CODEOWNERS exists but no rule with owners matches
NO_CODEOWNERS = "(no CODEOWNERS)"
FILES_PER_OWNER = 200  # the page and JSON list an owner's files up to this; counts cover all
FP_BYTES = 8
_FP_MAX = 1 << 64
_LINE_REF = re.compile(r"\bline \d+")  # "picked on line 12": a finding keeps its identity when lines move
_CPP = frozenset(r.code for r in RULES if r.files.startswith("C++"))


# (code, message, fix) -> (index in SEVERITIES, safe fix, unsafe fix, C++, rollback toggle): messages repeat
# across repositories, so each is judged once per process.
_KINDS: dict[tuple[Any, Any, Any], tuple[int, bool, bool, bool, bool]] = {}


def _counts() -> dict[str, int]:
    return dict.fromkeys(SEVERITIES, 0)


@dataclass
class Repo:
    """One repository's row: its open findings counted (fixed ones, ``applied``, are not open)."""

    key: str
    name: str
    source: str
    remote: str | None
    commit: str | None
    target_torch: str | None
    files_scanned: int
    errors: int
    severity: dict[str, int] = field(default_factory=_counts)
    findings: int = 0
    write: int = 0  # fixable with --write (safe fixes)
    unsafe: int = 0  # fixable with --unsafe-fixes only
    cpp: int = 0
    toggles: int = 0
    codeowners: str | None = None
    fingerprints: bytes = b""
    trend: dict[str, int] | None = None

    @property
    def one_write_away(self) -> bool:
        return self.findings > 0 and self.write == self.findings and not self.errors

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name, "key": self.key, "source": self.source, "remote": self.remote,
            "commit": self.commit, "target_torch": self.target_torch, "codeowners": self.codeowners,
            "files_scanned": self.files_scanned, "errors": self.errors, "findings": self.findings,
            "severity": self.severity, "write": self.write, "unsafe": self.unsafe, "cpp": self.cpp,
            "toggles": self.toggles, "one_write_away": self.one_write_away, "trend": self.trend,
            "fingerprints": base64.b64encode(self.fingerprints).decode("ascii"),
        }


@dataclass
class Owner:
    """One owner's share of the findings, from every repository whose CODEOWNERS names it."""

    name: str
    severity: dict[str, int] = field(default_factory=_counts)
    findings: int = 0
    write: int = 0
    toggles: int = 0
    repositories: set[str] = field(default_factory=set)
    files: list[tuple[str, str, int]] = field(default_factory=list)  # (repository, path, findings)
    files_total: int = 0
    # Every repository the owner has findings in: (name, findings, breaks, toggles).
    by_repository: list[tuple[str, int, int, int]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "owner": self.name, "findings": self.findings, "severity": self.severity, "write": self.write,
            "toggles": self.toggles, "repositories": len(self.repositories), "files_total": self.files_total,
            "by_repository": [{"repository": r, "findings": n, "break": b, "toggles": t} for r, n, b, t in
                              sorted(self.by_repository, key=lambda x: (-x[2], -x[3], -x[1], x[0]))],
            "files": [{"repository": r, "path": p, "findings": n} for r, p, n in self.files],
        }


@dataclass
class RepoPart:
    """What one repository's report adds: its row and its owners' share (their files, all)."""

    repo: Repo
    owners: dict[str, Owner]


class _PathMap:
    """A finding's path as the repository root names it (CODEOWNERS matches those): relative
    paths start at the working directory of the run (``base``, relative to the root, which may
    lie above it: a run from outside the repository)."""

    def __init__(self, project: dict[str, Any]) -> None:
        directory = project.get("directory")
        base = project.get("base")
        self.directory = directory.rstrip("/") if isinstance(directory, str) and directory.startswith("/") else None
        self.base = base if isinstance(base, str) and base not in ("", ".") else ""
        self.cache: dict[str, str | None] = {}

    def __call__(self, path: str) -> str | None:
        if path in self.cache:
            return self.cache[path]
        p = path.replace("\\", "/")
        if self.directory is not None:
            full = posixpath.normpath(posixpath.join(self.directory, self.base, p))  # an absolute p stays
            rel: str | None = full[len(self.directory) + 1:] if full.startswith(self.directory + "/") else None
        else:  # a report without its directory: relative paths only
            rel = None if p.startswith("/") else posixpath.normpath(posixpath.join(self.base, p))
            if rel is not None and (rel == ".." or rel.startswith("../")):
                rel = None  # outside the repository: no CODEOWNERS rule speaks for it
        self.cache[path] = rel
        return rel


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def summarize_migrate(doc: Doc) -> RepoPart:
    """One repository's report in counts (its findings are dropped); BadReport if it is not one."""
    data = doc.data
    findings = data.get("findings")
    errors = data.get("errors", [])
    if not isinstance(findings, list) or not isinstance(errors, list):
        raise BadReport('"findings" and "errors" must be lists')
    project = data.get("project")
    if project is not None and not isinstance(project, dict):
        raise BadReport('"project" must be an object')
    project = project or {}
    name = _str(project.get("name")) or posixpath.splitext(posixpath.basename(doc.path.replace("\\", "/")))[0]
    remote = _str(project.get("remote"))
    key = remote or (_str(project.get("directory")) or name)
    owners_obj = project.get("codeowners")
    owners = None
    if isinstance(owners_obj, dict) and isinstance(owners_obj.get("rules"), list):
        rules = [(p, [o for o in os_ if isinstance(o, str)]) for p, os_ in
                 (r for r in owners_obj["rules"] if isinstance(r, list) and len(r) == 2)
                 if isinstance(p, str) and isinstance(os_, list)]
        owners = Owners(rules)
    files_scanned = data.get("files_scanned")
    repo = Repo(key=key, name=name, source=doc.path, remote=remote, commit=_str(project.get("commit")),
                target_torch=_str(project.get("target_torch")),
                files_scanned=files_scanned if type(files_scanned) is int else 0, errors=len(errors),
                codeowners=_str(owners_obj.get("path")) if isinstance(owners_obj, dict) else None)
    # One pass in C that counts equal findings (itemgetter and Counter over map: no Python code
    # per finding), then the work per distinct (path, code, message, fix): severity, owners,
    # fingerprints.  A report of migrate --baseline names its findings itself (fingerprint).
    fields = ("path", "code", "message", "fix", "applied")
    try:
        try:
            groups = Counter(map(itemgetter(*fields, "fingerprint"), findings)) if findings and isinstance(
                findings[0], dict) and "fingerprint" in findings[0] else Counter(map(itemgetter(*fields), findings))
        except KeyError:  # some findings without a fingerprint
            groups = Counter((*itemgetter(*fields)(f), f.get("fingerprint")) for f in findings)
    except (KeyError, TypeError, AttributeError):
        raise BadReport("a finding lacks its path, code, message or fix") from None
    # Per path: open findings by severity, then fixable with --write, toggles, all (owners are
    # looked up once per path, not per finding).
    by_path: dict[str, list[int]] = {}
    kinds = _KINDS
    fps = array("Q")
    for group, n in groups.items():
        path, code, message, fix, applied = group[:5]
        if applied is True:
            continue  # fixed by the run that wrote the report
        kind = kinds.get((code, message, fix))
        if kind is None:
            if not (isinstance(path, str) and isinstance(code, str) and isinstance(message, str)):
                raise BadReport("a finding's path, code or message is not a string")
            kind = kinds[(code, message, fix)] = (SEVERITIES.index(severity(code, message)), fix == "safe",
                                                  fix == "unsafe", code in _CPP, code in ROLLBACK_CODES)
        elif not isinstance(path, str):
            raise BadReport("a finding's path is not a string")
        si, safe, unsafe, cpp, toggle = kind
        acc = by_path.get(path)
        if acc is None:
            acc = by_path[path] = [0] * 7
        acc[si] += n
        acc[6] += n
        if safe:
            acc[4] += n
        elif unsafe:
            repo.unsafe += n
        if cpp:
            repo.cpp += n
        if toggle:
            acc[5] += n
        # Names that survive line moves (the report's own fingerprint where it has one, else rule,
        # path and message without line references); the k-th of n equal findings is base + k.
        given = group[5] if len(group) > 5 else None
        if isinstance(given, str) and given:
            fp_key = given.encode()
        else:
            fp_key = f"{code}\0{path}\0{_LINE_REF.sub('line', message) if 'line ' in message else message}".encode()
        base = int.from_bytes(blake2b(fp_key, digest_size=FP_BYTES).digest(), "little") % (_FP_MAX - n)
        fps.extend(range(base, base + n))
    sev = repo.severity
    to_root = _PathMap(project)
    mine: dict[str, Owner] = {}
    per_owner_file: Counter[tuple[str, str]] = Counter()
    for path, acc in by_path.items():
        for i, name_ in enumerate(SEVERITIES):
            sev[name_] += acc[i]
        repo.write += acc[4]
        repo.toggles += acc[5]
        rel = to_root(path)
        if owners is None:
            names: tuple[str, ...] = (NO_CODEOWNERS,)
        else:
            names = (owners(rel) if rel is not None else ()) or (UNOWNED,)
        shown = rel if rel is not None else path
        for who in names:
            o = mine.get(who) or mine.setdefault(who, Owner(who))
            for i, name_ in enumerate(SEVERITIES):
                o.severity[name_] += acc[i]
            o.write += acc[4]
            o.toggles += acc[5]
            o.findings += acc[6]
            per_owner_file[(who, shown)] += acc[6]
    repo.findings = len(fps)
    repo.fingerprints = pack(array("Q", sorted(fps)))
    for (who, rel), count in per_owner_file.items():
        mine[who].files.append((name, rel, count))
    return RepoPart(repo, mine)


def pack(numbers: array[int]) -> bytes:
    if sys.byteorder == "big":  # the roll-up JSON is little-endian wherever it was written
        numbers.byteswap()
    return numbers.tobytes()


def unpack(blob: bytes) -> array[int]:
    out = array("Q")
    out.frombytes(blob[: len(blob) - len(blob) % FP_BYTES])
    if sys.byteorder == "big":
        out.byteswap()
    return out


