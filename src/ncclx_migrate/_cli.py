"""The ``ncclx`` command: a thin click group over the library."""

from __future__ import annotations

import importlib
import os
import sys

import click

from . import __version__
from ._exit import skip_final_gc
from ._streams import fresh_line, whole_writes

__all__ = ["cli", "main"]


# Subcommands load on use: `ncclx doctor --level static` must not pay for libcst (the
# codemod's import costs ~0.4 s), and --help still lists every command.
_COMMANDS = {
    "doctor": "._doctor._cli:doctor",
    "migrate": "._migrate._cli:migrate",
    "rules": "._migrate._docs_cli:rules",
    "explain": "._migrate._docs_cli:explain",
    "fr": "._fr._cli:fr",
    "report": "._report._cli:report",
    "compare": "._compare._cli:compare",
}


# What `ncclx --help` lists for each command, so that listing them imports none of them (the
# first sentence of each command's docstring: tests/test_cli_startup.py keeps them equal).
# A command missing here is imported to be listed.
_SUMMARIES = {
    "compare": "Compare two backend arms (nccl2 against the rollback by default): every collective for correctness and speed, or (--train) your own training run step by step.",
    "doctor": "Preflight check of torch, NCCL/RCCL, the environment and the GPUs for the nccl2 switch.",
    "explain": "Print a rule's full documentation (why, fix, evidence).",
    "fr": "Flight-recorder dumps: name the rank that hung a collective.",
    "migrate": "Find (and with --write fix) legacy-NCCL toggles and code that changes under nccl2.",
    "report": "Add up repositories' and jobs' reports: what is left before the rollback goes, and whose.",
    "rules": "List every rule: code, fix kind, torch versions it concerns, summary.",
}


class _Interrupted(Exception):
    """Ctrl-C in a command, carried past click's own handler (which prints a blank line first)."""


class _LazyGroup(click.Group):
    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt as exc:
            raise _Interrupted() from exc

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *_COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in _COMMANDS and cmd_name not in self.commands:
            module, _, attr = _COMMANDS[cmd_name].partition(":")
            command = getattr(importlib.import_module(module, __package__), attr)
            self.add_command(command, cmd_name)
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """click's listing, from _SUMMARIES where a command is not loaded yet."""
        names = self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(map(len, names))
        rows = []
        for name in names:
            if name in _SUMMARIES and name not in self.commands:
                command: click.Command | None = click.Command(name, help=_SUMMARIES[name])
            else:
                command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(limit)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="ncclx")
def cli() -> None:
    """Carry training code and clusters across the PyTorch 2.15 nccl2 switch."""


def main() -> None:
    """``ncclx``; Ctrl-C exits 130 (128 + SIGINT, as shells expect), never 1 ("findings left")."""
    skip_final_gc()
    whole_writes()
    try:
        code = cli.main(prog_name="ncclx", standalone_mode=False)
    except click.exceptions.Abort as exc:
        if isinstance(exc.__context__, KeyboardInterrupt):  # while parsing the command line
            click.echo("ncclx: interrupted", err=True)
            sys.exit(130)
        click.echo("Aborted!", err=True)  # end of input at a prompt
        sys.exit(1)
    except (_Interrupted, KeyboardInterrupt):  # in a command, or outside click (while reporting)
        fresh_line()
        click.echo("ncclx: interrupted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except BrokenPipeError:  # `ncclx rules | head -1`: as click's standalone mode does
        sys.stdout = open(os.devnull, "w")
        sys.exit(1)
    sys.exit(code if isinstance(code, int) else 0)
