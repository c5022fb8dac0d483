"""One number format in one line (issue 37): the summary's counts all carry thousands separators,
as _words.count writes the nouns it counts ("3,600 findings ... (600 fixed, 3,000 left)")."""

from __future__ import annotations

from ncclx_migrate._migrate._fixkind import FixKind
from ncclx_migrate._migrate._model import Finding
from ncclx_migrate._migrate._output import TextView, _summary


def _findings() -> list[Finding]:
    def one(fix: FixKind, applied: bool) -> Finding:
        return Finding("a.py", 1, 1, "NCX101", "m", fix=fix, applied=applied)

    return ([one(FixKind.SAFE, True)] * 600 + [one(FixKind.UNSAFE, False)] * 1800
            + [one(FixKind.NONE, False)] * 1200)


def test_write_summary_has_one_number_format() -> None:
    f = _findings()
    assert _summary(f, f, 0, 600, TextView(write=True)) == (
        "Found 3,600 findings in 600 files (600 fixed, 3,000 left). 1,800 more with --unsafe-fixes.")


def test_report_and_diff_summaries_too() -> None:
    f = _findings()
    assert _summary(f, f, 0, 1200, TextView(diff=True)).startswith(
        "Found 3,600 findings in 1,200 files (600 would be fixed by --write, 3,000 left). 1,800 more")
    unapplied = [Finding("a.py", 1, 1, "NCX101", "m", fix=FixKind.SAFE)] * 1500 + f[600:]
    assert _summary(unapplied, unapplied, 0, 600, TextView()).splitlines()[1] == (
        "[*] 1,500 fixable with --write (1,800 hidden fixes can be enabled with --write --unsafe-fixes).")
