"""The rule table, its docs and docs/rules.md agree; `ncclx rules` / `ncclx explain` show them."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from ncclx_migrate._migrate._rule_table import RULES, rule_doc, rules_markdown
from tests.conftest import run_ncclx

ROOT = Path(__file__).resolve().parents[2]


def test_codes_unique_and_well_formed() -> None:
    codes = [r.code for r in RULES]
    assert len(codes) == len(set(codes))
    assert all(re.fullmatch(r"NCX[123]\d\d", c) for c in codes)


def test_every_rule_has_a_doc_with_why_fix_evidence() -> None:
    for r in RULES:
        doc = rule_doc(r.code)
        assert doc is not None, f"{r.code}: missing {r.doc_path}"
        assert r.code in doc


SECTIONS = ["What it finds", "Why", "Fix", "Example", "Evidence"]


def test_rule_pages_share_one_section_order() -> None:
    # Issue 28 §1: every page reads in the same order, so a reader knows where to look.
    off = {}
    for r in RULES:
        doc = rule_doc(r.code) or ""
        heads = re.findall(r"^## (.+)$", doc, flags=re.M)
        if heads != SECTIONS or not doc.startswith(f"# {r.code} {r.name}\n\n## What it finds\n"):
            off[r.code] = heads
    assert not off, f"rule pages whose sections are not {SECTIONS}: {off}"


def test_every_rule_doc_says_what_it_follows_and_cannot_see() -> None:
    # Issue 8 §3: `ncclx explain` and docs/rules.md state each rule's reach and blind spots,
    # under "What it finds" (issue 28 §1: one section order on every page).
    heading = "\n### What it follows and what it cannot see\n"
    lacking = [r.code for r in RULES if heading not in (rule_doc(r.code) or "")]
    assert not lacking, f"rule docs without {heading.strip()!r}: {lacking}"
    proc = run_ncclx("explain", "NCX201")
    assert proc.returncode == 0 and "What it follows and what it cannot see" in proc.stdout

def test_docs_rules_md_is_generated_from_the_table() -> None:
    path = ROOT / "docs" / "rules.md"
    if os.environ.get("NCCLX_UPDATE_DOCS") == "1":
        path.write_text(rules_markdown(), encoding="utf-8")
    text = path.read_text(encoding="utf-8")
    for r in RULES:
        assert f"## {r.code}" in text and r.summary in text, f"docs/rules.md lacks {r.code}"
    assert text == rules_markdown(), "docs/rules.md is stale: NCCLX_UPDATE_DOCS=1 pytest tests/migrate/test_rules_table.py"


def test_rules_command_lists_every_code() -> None:
    proc = run_ncclx("rules")
    assert proc.returncode == 0, proc.stderr
    for r in RULES:
        assert r.code in proc.stdout
    lines = proc.stdout.splitlines()
    assert max(map(len, lines)) <= 100, max(lines, key=len)
    assert lines[0].startswith("code    fix ") and "ncclx explain CODE" in lines[0]
    # each summary whole, wrapped under its column
    column = lines[0].index("what it finds")
    rows: dict[str, str] = {}
    code = ""
    for line in lines[1:]:
        code = line[:6].strip() or code
        rows[code] = f"{rows.get(code, '')} {line[column:]}"
    assert {c: " ".join(t.split()) for c, t in rows.items()} == {r.code: " ".join(r.summary.split()) for r in RULES}
    as_json = json.loads(run_ncclx("rules", "--format", "json").stdout)
    assert [r["code"] for r in as_json] == [r.code for r in RULES]
    assert all(set(r) == {"code", "name", "summary", "fix", "torch", "files"} for r in as_json)


def test_explain_prints_doc_and_rejects_unknown() -> None:
    proc = run_ncclx("explain", "ncx101")
    assert proc.returncode == 0 and "TORCH_DIST_USE_NCCL2" in proc.stdout
    bad = run_ncclx("explain", "NCX999")
    assert bad.returncode == 2 and "unknown rule code" in bad.stderr
