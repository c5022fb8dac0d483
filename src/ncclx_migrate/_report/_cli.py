"""``ncclx report``: a thin click layer over the roll-up.

Exit status: 0 the roll-up was made (inputs that are not reports are skipped, one line each on
stderr), 2 no input was a report, ``--previous`` is not a roll-up, or the page cannot be written.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from .._format import format_option
from .._shown import json_shown, shown

__all__ = ["report"]


def _previous(path: Path) -> dict[str, Any]:
    """The last roll-up; anything else is one line and exit 2 (the user named this file)."""
    from ._rollup import SCHEMA

    why = ""
    try:
        data = json.loads(path.read_bytes())
    except OSError as exc:
        why = f"cannot read it ({exc.strerror or exc})"
    except (ValueError, RecursionError):
        why = "not JSON, or cut short; save roll-ups with ncclx report --format json > FILE"
    else:
        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            why = f"not an {SCHEMA} roll-up; save roll-ups with ncclx report --format json > FILE"
    if why:
        click.echo(f"ncclx report: error: --previous {path}: {why}", err=True)
        sys.exit(2)
    return data  # type: ignore[no-any-return]


def _dumps(doc: dict[str, Any]) -> str:
    """JSON with one line per repository, owner and job: readable, diffable, and written by the
    C encoder (``indent=`` would take the pure-Python one, seconds for a large fleet)."""
    parts = []
    for key, value in doc.items():
        if isinstance(value, list) and value and isinstance(value[0], dict):
            text = "[\n  " + ",\n  ".join(json.dumps(v, ensure_ascii=False) for v in value) + "\n ]"
        else:
            text = json.dumps(value, ensure_ascii=False)
        parts.append(f" {json.dumps(key)}: {text}")
    return json_shown("{\n" + ",\n".join(parts) + "\n}\n")


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("inputs", nargs=-1, required=True, metavar="REPORT|FOLDER|GLOB...")
@format_option("ncclx.report/1")
@click.option("--html", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write a self-contained HTML page (repositories, owners, jobs, trend) to this file.")
@click.option("--previous", type=click.Path(dir_okay=False, path_type=Path), default=None, metavar="ROLLUP.json",
              help="The last roll-up (--format json): adds what was fixed, what is new, and the burn-down.")
def report(inputs: tuple[str, ...], as_json: bool, html: Path | None, previous: Path | None) -> None:
    """Add up repositories' and jobs' reports: what is left before the rollback goes, and whose.

    \b
    Inputs are `ncclx migrate --format json` reports (one per repository) and
    `ncclx doctor --format json` reports (one per job, any level), as files, folders
    (every *.json inside) or globs:
      ncclx report reports/ --previous last.json --html fleet.html --format json > now.json
    """
    from ._inputs import BadReport, Skip
    from ._jobs import Job
    from ._rollup import Rollup
    from ._work import summaries

    rollup = Rollup()
    if previous is not None:
        rollup.set_previous(_previous(previous))
    used = 0
    for item in summaries(inputs):
        if not isinstance(item, Skip):
            try:
                if isinstance(item, Job):
                    rollup.add_job(item)
                else:
                    rollup.add_repo(item)
                used += 1
                continue
            except BadReport as exc:
                item = Skip(item.repo.source if not isinstance(item, Job) else item.sources[0], str(exc))
        rollup.skipped.append((item.path, item.why))
        click.echo(f"ncclx report: skipped {shown(item.path)}: {shown(item.why)}", err=True)
    if not used:
        click.echo("ncclx report: error: no input is an ncclx migrate or doctor JSON report "
                   "(save them with --format json)", err=True)
        sys.exit(2)
    doc = rollup.to_json()
    if html is not None:
        from .._htmlpage import write_atomic
        from ._html import render_page

        try:
            write_atomic(html, render_page(doc))
        except OSError as exc:
            click.echo(f"ncclx report: error: {html}: cannot write the page there ({exc.strerror or exc})", err=True)
            sys.exit(2)
        click.echo(f"ncclx report: wrote {html}", err=True)
    if as_json:
        click.echo(_dumps(doc), nl=False)
    else:
        from ._text import render_text

        click.echo(render_text(doc), nl=False)
