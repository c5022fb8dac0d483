from __future__ import annotations

import click


@click.command()
@click.argument("paths", nargs=-1)
def migrate(paths: tuple[str, ...]) -> None:
    """Find and fix legacy NCCL toggles and nccl2 incompatibilities (not built yet)."""
    raise click.UsageError("ncclx migrate is not built yet")


@click.command()
def rules() -> None:
    """List every rule."""


@click.command()
@click.argument("code")
def explain(code: str) -> None:
    """Print a rule's documentation."""
    raise click.UsageError(f"unknown rule code {code!r}")
