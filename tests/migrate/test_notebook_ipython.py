"""A fix on a notebook's `!` line or `%env` magic does not change what IPython expands.

IPython runs ``var_expand`` (``$name``, ``{expr}``) over these lines before the shell sees
them, and leaves the whole line as written when one field fails.  For every notebook fixture,
each shell line a fix changed is expanded by IPython's own formatter before and after (kernel
namespace: ``nproc = 4``): after a safe fix it expands exactly when it did before, and what
the shell gets is what it got plus the added text (checked for behaviour by
test_safe_differential.py, which expands the lines the same way).
"""

from __future__ import annotations

import difflib
import json
import re

import pytest

from tests.migrate_files._cases import cases, read

from ._ipython import NAMESPACE, var_expand

_SHELL_LINE = re.compile(r"^\s*(?:[A-Za-z_][\w.]*\s*=\s*)?!(.*)$|^\s*%(?:set_)?env\s+(.*)$")
NOTEBOOKS = [c for c in cases() if c.kind == "notebook"]


def _expands(command: str) -> bool:
    """Whether IPython's formatter expands ``command`` (False: the line reaches the shell as written)."""
    from IPython.core.interactiveshell import InteractiveShell  # noqa: F401 (skips without IPython)
    from IPython.utils.text import DollarFormatter

    try:
        DollarFormatter().vformat(command, args=[], kwargs=dict(NAMESPACE))
    except Exception:
        return False
    return True


def _changed_shell_lines(before: str, after: str) -> list[tuple[str, str]]:
    """(command before, command after) of each `!` / `%env` line a fix rewrote in place."""
    pairs = []
    old = [c for c in json.loads(before)["cells"] if c["cell_type"] == "code"]
    new = [c for c in json.loads(after)["cells"] if c["cell_type"] == "code"]
    a = [line for c in old for line in "".join(c["source"]).splitlines()]
    b = [line for c in new for line in "".join(c["source"]).splitlines()]
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "replace" and i2 - i1 == j2 - j1:
            for x, y in zip(a[i1:i2], b[j1:j2], strict=True):
                mx, my = _SHELL_LINE.match(x), _SHELL_LINE.match(y)
                if mx and my:
                    pairs.append((mx.group(1) or mx.group(2), my.group(1) or my.group(2)))
    return pairs


# The notebook cases a safe fix changes (the others have no .out file to compare).
SAFE_FIXED = [c for c in NOTEBOOKS if c.sibling("out").exists()]


@pytest.mark.parametrize("case", SAFE_FIXED, ids=[c.id for c in SAFE_FIXED])
def test_safe_fixes_keep_ipython_expansion(case) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("IPython")
    for before, after in _changed_shell_lines(read(case.input), read(case.sibling("out"))):
        assert _expands(before) == _expands(after), (before, after)
        assert "$nproc" not in var_expand(after) or "$nproc" in var_expand(before)


def test_the_shapes_and_what_ipython_makes_of_them() -> None:
    pytest.importorskip("IPython")
    case = next(c for c in NOTEBOOKS if c.stem == "ipython_shell_lines")
    text, safe, unsafe = read(case.input), read(case.sibling("out")), read(case.sibling("unsafe"))
    # A line with nothing to expand: the added ${...} comes back from IPython as written for bash.
    (pair, *_), = [_changed_shell_lines(text, safe)]
    assert var_expand(pair[1]) == (
        'TORCH_NCCL_DUMP_ON_TIMEOUT=1 TORCH_FR_DUMP_ON_TIMEOUT="${TORCH_FR_DUMP_ON_TIMEOUT-1}" '
        "torchrun --nproc-per-node 4 train.py")
    # The $nproc line: the raw ${...} (offered only as an unsafe fix) stops IPython expanding it,
    # so $nproc would reach the shell empty; the harness above tells it.
    before, after = next(p for p in _changed_shell_lines(text, unsafe) if "$nproc" in p[0])
    assert var_expand(before).endswith("--nproc-per-node 4 train.py")
    assert _expands(before) and not _expands(after) and "$nproc" in var_expand(after)
    # %%bash / %%script bodies are not expanded by IPython: the plain shell form is right there.
    assert safe.count('\\"${TORCH_FR_DUMP_ON_TIMEOUT-1}\\"') == 2
