from __future__ import annotations

import click


@click.command()
def doctor() -> None:
    """Preflight check of torch/NCCL and the environment (not built yet)."""
