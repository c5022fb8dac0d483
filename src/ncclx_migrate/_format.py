"""``--format text|json`` for the commands that print a report (as ``ncclx migrate`` spells it).

``--json`` stays as a hidden alias of ``--format json``: scripts written against earlier
releases keep working.  The command function receives ``as_json``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import click

__all__ = ["format_option"]


def format_option(schema: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Add ``--format`` (and the ``--json`` alias); pass ``as_json`` to the command."""

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(func)
        def wrapper(*args: Any, fmt: str | None, json_alias: bool, **kwargs: Any) -> Any:
            if json_alias and fmt == "text":
                raise click.UsageError("--json is --format json; it contradicts --format text")
            return func(*args, as_json=json_alias or fmt == "json", **kwargs)

        wrapper = click.option("--json", "json_alias", is_flag=True, hidden=True,
                               help="Alias of --format json.")(wrapper)
        return click.option("--format", "fmt", type=click.Choice(["text", "json"]), default=None,
                            help=f"text (the default) or json: one {schema} document on stdout "
                                 "(--json is an alias).")(wrapper)

    return decorate
