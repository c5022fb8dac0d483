"""Every data-only case under tests/fixtures/files: findings, safe and unsafe output,
idempotence, CRLF, and that the output is still valid for its file kind."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from ._cases import REPORT, SAFE, SHIM, SHIM_KINDS, UNSAFE, Case, cases, read, render_findings, run

pytestmark = pytest.mark.usefixtures("reparse_check")  # tests/conftest.py

CASES = cases()
IDS = [c.id for c in CASES]


def _expected(case: Case, kind: str, original: str) -> str:
    path = case.sibling(kind)
    if path.exists():
        return read(path)
    if kind == "unsafe":
        return _expected(case, "out", original)
    if kind == "shim":
        return _expected(case, "unsafe", original)
    return original


def _crlf(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\n", "\r\n")


def _without_sources(nb: dict) -> dict:  # type: ignore[type-arg]
    return {**nb, "cells": [{k: v for k, v in c.items() if k != "source"} for c in nb["cells"]]}


_GRAMMARS = {"make": "tree_sitter_make", "jenkins": "tree_sitter_groovy", "hcl": "tree_sitter_hcl"}


def _check_valid(case: Case, text: str, original: str) -> None:
    kind = case.input.parent.name
    if kind == "shell" and shutil.which("bash"):
        proc = subprocess.run(["bash", "-n"], input=text, text=True, capture_output=True,
                              timeout=30)
        assert proc.returncode == 0, proc.stderr
    elif kind == "yaml":
        import yaml  # PyYAML: a dependency of libcst, so always installed

        try:
            list(yaml.safe_load_all(original))
        except yaml.YAMLError:
            return  # a Helm template is not YAML before rendering; nothing to compare
        list(yaml.safe_load_all(text))
    elif kind == "cpp":
        # Still C++ the grammar reads: no new unreadable region (g++ itself: tests/cxx.py).
        from ncclx_migrate._migrate._files._cpp._parse import parse_bytes

        def errors(t: str) -> int:
            tree, _ = parse_bytes(case.input.name, t.encode("utf-8"))
            return sum(1 for n in _nodes(tree.root_node) if n.type == "ERROR" or n.is_missing)

        assert errors(text) <= errors(original)
    elif case.ext.endswith(".toml"):
        import tomllib

        tomllib.loads(text)
    elif case.ext.endswith(".ini"):
        import configparser

        configparser.RawConfigParser(strict=False, interpolation=None).read_string(text)
    elif kind in _GRAMMARS:  # still read by its grammar as well as before
        from ncclx_migrate._migrate._files._grammar import parse

        def broken(t: str) -> int:
            return sum(1 for n in _nodes(parse(_GRAMMARS[kind], t)[0]) if n.type == "ERROR" or n.is_missing)

        assert broken(text) <= broken(original)
    elif kind == "notebook":
        # Still JSON, and nothing but code-cell sources changed (outputs, ids, metadata,
        # markdown cells, key order, indentation and the final newline are kept), except that
        # a code cell whose every line a fix removed is gone (no empty cell is left).
        new, old = json.loads(text), json.loads(original)
        assert {**new, "cells": []} == {**old, "cells": []}
        assert list(new) == list(old)
        kept = iter(new["cells"])
        a = next(kept, None)
        for b in old["cells"]:
            if a is not None and _without_sources({"cells": [a]}) == _without_sources({"cells": [b]}):
                assert list(a) == list(b)
                assert a["cell_type"] == "code" or a["source"] == b["source"]
                assert "".join(a["source"]).strip() or not "".join(b["source"]).strip()  # not emptied
                a = next(kept, None)
            else:
                assert b["cell_type"] == "code" and "".join(b["source"]).strip()
        assert a is None
        assert text.endswith("\n") == original.endswith("\n")


@pytest.mark.parametrize("crlf", [False, True], ids=["lf", "crlf"])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_case(case: Case, crlf: bool) -> None:
    conv = _crlf if crlf else (lambda s: s)
    text = conv(read(case.input))

    # Report mode: the expected findings, nothing written, nothing marked applied.
    report = run(case, text, REPORT)
    assert render_findings(report) == read(case.sibling("findings"))
    assert report.new_text is None
    assert not any(f.applied for f in report.findings)

    runs = [(SAFE, "out"), (UNSAFE, "unsafe")] + ([(SHIM, "shim")] if case.kind in SHIM_KINDS else [])
    for options, kind in runs:
        result = run(case, text, options)
        expected = conv(_expected(case, kind, read(case.input)))
        got = result.new_text if result.new_text is not None else text
        assert got == expected
        if result.new_text is None:
            assert not any(f.applied for f in result.findings)
        else:
            assert any(f.applied for f in result.findings)
            if crlf:
                assert "\n" not in got.replace("\r\n", "")
        # One run reaches the fixed point: it leaves nothing it could fix, and a second run
        # changes nothing and finds nothing to fix.
        assert not any(options.wants_fix(f.fix) for f in result.findings if not f.applied), \
            f"the {kind} run left a finding it could fix in {case.id}"
        again = run(case, got, options)
        assert again.new_text is None, f"second {kind} run still rewrites {case.id}"
        assert not any(options.wants_fix(f.fix) for f in again.findings), \
            f"a second {kind} run finds more to fix in {case.id}"
        # bash rejects CRLF itself, so the syntax check runs on the LF form.
        _check_valid(case, got.replace("\r\n", "\n"), text.replace("\r\n", "\n"))
    if not read(case.sibling("findings")):
        assert run(case, text, UNSAFE).new_text is None  # no findings: byte-identical


def test_every_kind_has_cases() -> None:
    kinds = {c.input.parent.name for c in CASES}
    assert {"shell", "dockerfile", "dotenv", "yaml", "notebook", "cpp", "make", "tox", "pytest_env", "jenkins", "hcl"} <= kinds


def _nodes(node):  # type: ignore[no-untyped-def]
    yield node
    for c in node.children:
        yield from _nodes(c)
