"""Data-only cases for the non-Python scanners.

``tests/fixtures/files/<kind>/<case>.in.<ext>`` is the input (read as a file named ``<ext>``
when the kind knows files by whole name: ``basic.in.tox.ini`` is a ``tox.ini``).  Next to it:
``<case>.findings`` (``LINE:COL CODE FIX`` per finding, report mode; in a notebook
``LINE:COL cell N:LINE:COL CODE FIX``: the position in the file, then in the cell),
``<case>.out.<ext>`` (after safe fixes; absent = no change) and ``<case>.unsafe.<ext>``
(after ``--unsafe-fixes``; absent = same as ``.out``); for C++ (``cpp/``) also
``<case>.shim.<ext>`` (after ``--unsafe-fixes --use-shim``; absent = same as ``.unsafe``) and
a first line ``// ncclx-test: no-compile: WHY`` or ``// ncclx-test: compile-2.15-only: WHY``
for the g++ compile test (tests/cxx.py).  ``python -m tests.migrate_files._cases``
rewrites the expectations from the current scanners: review the diff before committing.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from ncclx_migrate._migrate._files import file_kind, scan
from ncclx_migrate._migrate._model import FileResult, Finding, Options

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "files"

REPORT = Options()
SAFE = Options(apply_safe=True)
UNSAFE = Options(apply_safe=True, apply_unsafe=True)
SHIM = Options(apply_safe=True, apply_unsafe=True, use_shim=True)
SHIM_KINDS = ("cpp",)  # kinds whose fixes --use-shim changes


@dataclass
class Case:
    input: Path

    @property
    def stem(self) -> str:
        return self.input.name.split(".in.", 1)[0]

    @property
    def ext(self) -> str:
        return self.input.name.split(".in.", 1)[1]

    def sibling(self, kind: str) -> Path:
        if kind == "findings":
            return self.input.with_name(f"{self.stem}.findings")
        return self.input.with_name(f"{self.stem}.{kind}.{self.ext}")

    @property
    def name(self) -> str:
        """The name it is scanned as: a kind known by its whole name (tox.ini, pyproject.toml)
        is read from ``<case>.in.tox.ini`` as ``tox.ini``."""
        return self.input.name if file_kind(self.input.name) is not None else self.ext

    @property
    def kind(self) -> str:
        return self.input.parent.name

    @property
    def id(self) -> str:
        return f"{self.input.parent.name}/{self.stem}"


def cases() -> list[Case]:
    return [Case(p) for p in sorted(FIXTURES.glob("*/*.in.*"))]


def read(path: Path) -> str:
    with open(path, encoding="utf-8", newline="") as f:
        return f.read()


def run(case: Case, text: str, options: Options) -> FileResult:
    result = scan(case.name, text, options)
    assert result is not None, f"{case.input.name} is not recognised as a file kind"
    assert result.error is None, result.error
    return result


def render_findings(result: FileResult) -> str:
    return "".join(f"{f.line}:{f.column}{_cell(f)} {f.code} {f.fix.value}\n" for f in result.findings)


def _cell(f: Finding) -> str:
    """A notebook finding also shows where it is in its cell, as the text report does."""
    return "" if f.cell is None else f" cell {f.cell.number}:{f.cell.line}:{f.cell.column}"


def regenerate() -> None:
    for case in cases():
        text = read(case.input)
        case.sibling("findings").write_text(render_findings(run(case, text, REPORT)))
        safe = run(case, text, SAFE).new_text
        unsafe = run(case, text, UNSAFE).new_text
        variants = [("out", safe), ("unsafe", unsafe if unsafe != safe else None)]
        if case.kind in SHIM_KINDS:
            shim = run(case, text, SHIM).new_text
            variants.append(("shim", shim if shim != (unsafe or safe) else None))
        for kind, new in variants:
            path = case.sibling(kind)
            if new is None:
                path.unlink(missing_ok=True)
            else:
                with open(path, "w", encoding="utf-8", newline="") as f:
                    f.write(new)
        print(case.id, file=sys.stderr)


if __name__ == "__main__":
    regenerate()
