from __future__ import annotations

import click


@click.group()
def fr() -> None:
    """Flight-recorder dumps: analyze hangs."""
