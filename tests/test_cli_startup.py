"""`ncclx --version`, `--help`, `rules` and `explain` import only what they print: no libcst,
no codemod engine, no doctor (benchmarks/bench_import.py times them; docs/performance.md)."""

from __future__ import annotations

import subprocess
import sys

import click
import pytest

from ncclx_migrate import _cli

HEAVY = ("libcst", "ncclx_migrate._migrate._runner", "ncclx_migrate._migrate._python", "ncclx_migrate._doctor",
         "ncclx_migrate._fr._cli", "packaging", "tree_sitter")
PROBE = """
import sys
sys.argv = ["ncclx", *sys.argv[1:]]
from ncclx_migrate._cli import main
try:
    main()
except SystemExit as exc:
    code = exc.code
heavy = sorted(m for m in sys.modules if m.startswith({heavy!r}))
print("\\nEXIT", code, "HEAVY", heavy, file=sys.stderr)
"""


@pytest.mark.parametrize("args", [("--version",), ("--help",), ("rules",), ("explain", "NCX101"), ("explain", "--format", "text", "NCX101")])
def test_help_rules_and_explain_import_only_what_they_print(args: tuple[str, ...]) -> None:
    proc = subprocess.run([sys.executable, "-c", PROBE.format(heavy=HEAVY), *args], capture_output=True, text=True,
                          timeout=60)
    tail = proc.stderr.rsplit("\nEXIT ", 1)[-1]
    assert tail.strip() == "0 HEAVY []", proc.stderr[-2000:]
    assert proc.stdout.strip()  # it printed what it was asked for


def test_the_listing_in_help_is_each_commands_own_first_sentence() -> None:
    ctx = click.Context(_cli.cli)
    # A new lazy command needs its line in _SUMMARIES, or `ncclx --help` imports it.
    assert set(_cli._SUMMARIES) == set(_cli._COMMANDS)
    for name, summary in _cli._SUMMARIES.items():
        command = _cli.cli.get_command(ctx, name)
        assert command is not None, name
        assert click.Command(name, help=summary).get_short_help_str(1000) == command.get_short_help_str(1000), name
