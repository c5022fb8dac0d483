"""Broken and half-written files: no crash, and any fix is still idempotent."""

from __future__ import annotations

import pytest

from ncclx_migrate._migrate._files import scan
from ncclx_migrate._migrate._model import Options

from ._cases import cases, read

UNSAFE = Options(apply_safe=True, apply_unsafe=True)
NOISE = ['"', "'", "`", "$(", "\\", "{", "[", "\n- ", ": |\n", "#", "<<EOF\n"]


@pytest.mark.parametrize("case", [c for c in cases() if c.ext != "ipynb"], ids=lambda c: c.id)
def test_truncated_and_garbled_inputs(case) -> None:  # type: ignore[no-untyped-def]
    text = read(case.input)
    cuts = range(0, len(text), max(1, len(text) // 40))
    for i, cut in enumerate(cuts):
        for variant in (text[:cut], text[:cut] + NOISE[i % len(NOISE)] + text[cut:]):
            result = scan(case.name, variant, UNSAFE)
            assert result is not None
            if result.error is not None:  # C++ only: a broken region holding a finding
                assert case.kind == "cpp" and "\n" not in result.error and result.new_text is None
                continue
            if result.new_text is not None:
                again = scan(case.name, result.new_text, UNSAFE)
                assert again is not None and again.new_text is None, (cut, variant)


@pytest.mark.parametrize("text", ["", "\n", "{", "[]", '{"cells": 3}', '{"cells": [{"cell_type": "code"}]}',
                                  '{"cells": [{"cell_type": "code", "source": [1, 2]}]}'])
def test_odd_notebooks(text: str) -> None:
    result = scan("nb.ipynb", text, UNSAFE)
    assert result is not None and result.new_text is None
