"""``ncclx rules`` and ``ncclx explain``: the rule table and the rule pages.

Apart from ``ncclx migrate``'s own module: they print documentation, so they import the
rule table and (for a terminal) the markdown layout, never libcst or the codemod engine.
"""

from __future__ import annotations

import sys

import click

from .._color import use_color
from ._rule_table import RULES, get_rule, rule_doc

__all__ = ["explain", "rules"]


@click.command()
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def rules(fmt: str) -> None:
    """List every rule: code, fix kind, torch versions it concerns, summary."""
    if fmt == "json":
        import json

        click.echo(json.dumps([
            {"code": r.code, "name": r.name, "summary": r.summary, "fix": [k.value for k in r.fixes],
             "torch": r.torch, "files": r.files}
            for r in RULES
        ], indent=2))
        return
    import textwrap

    def releases(torch: str) -> str:  # "2.13, 2.14, 2.15" -> "2.13-2.15"
        listed = torch.split(", ")
        return listed[0] if len(listed) == 1 else f"{listed[0]}-{listed[-1]}"

    rows = [(r.code, r.fix_label, releases(r.torch), r.summary) for r in RULES]
    head = ("code", "fix", "torch", "what it finds (`ncclx explain CODE`: why, fix, evidence)")
    widths = [max(len(row[i]) for row in [*rows, head]) for i in range(3)]
    indent = " " * (sum(widths) + 2 * 3)
    for row in [head, *rows]:
        lead = "  ".join(cell.ljust(w) for cell, w in zip(row[:3], widths, strict=True)) + "  "
        click.echo(textwrap.fill(row[3], _RULES_WIDTH, initial_indent=lead, subsequent_indent=indent,
                                 break_on_hyphens=False))


# `ncclx rules` fits a 100-column terminal (summaries wrap under their column).
_RULES_WIDTH = 100


# Wider lines are hard to read, however wide the terminal.
_EXPLAIN_MAX_WIDTH = 100


@click.command()
@click.argument("code")
@click.option("--format", "fmt", type=click.Choice(["text", "markdown"]), default=None,
              help="text: laid out for a terminal; markdown: the source. Default: text on a terminal, "
                   "markdown in a pipe.")
def explain(code: str, fmt: str | None) -> None:
    """Print a rule's full documentation (why, fix, evidence)."""
    rule = get_rule(code)
    if rule is None:
        raise click.UsageError(f"unknown rule code {code!r}; `ncclx rules` lists them")
    doc = rule_doc(rule.code)
    if doc is None:
        raise click.UsageError(f"{rule.code} has no documentation file ({rule.doc_path}); this is a packaging bug")
    if (fmt or ("text" if sys.stdout.isatty() else "markdown")) == "markdown":
        click.echo(doc.rstrip("\n"))
        return
    import shutil

    from ._mdterm import render_markdown

    width = min(shutil.get_terminal_size().columns, _EXPLAIN_MAX_WIDTH)
    color = use_color(sys.stdout)
    click.echo(render_markdown(doc, width, color), nl=False, color=color)
