"""The ``ncclx`` command: a thin click group over the library."""

from __future__ import annotations

import click

from . import __version__

__all__ = ["cli", "main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="ncclx")
def cli() -> None:
    """Carry training code and clusters across the PyTorch 2.15 nccl2 switch."""


def _register() -> None:
    from ._doctor._cli import doctor
    from ._fr._cli import fr
    from ._migrate._cli import explain, migrate, rules

    for command in (doctor, migrate, rules, explain, fr):
        cli.add_command(command)


_register()


def main() -> None:
    cli(prog_name="ncclx")
