"""``ncclx fr``: analyze (and repair) flight-recorder dumps.

Exit codes of ``ncclx fr analyze``: 0 no problem found, 1 a hang, mismatch or
missing dump diagnosed, 2 usage or input error (one line on stderr).
"""

from __future__ import annotations

import json
import pickle
import sys
from pathlib import Path

import click

from ._analyze import analyze
from ._load import DumpError, load_dir, repaired_pickle_obj
from ._render import render_human, to_json

__all__ = ["fr"]

EXIT_OK, EXIT_PROBLEM, EXIT_INPUT = 0, 1, 2


@click.group()
def fr() -> None:
    """Flight-recorder dumps: name the rank that hung a collective.

    Turn dumps on for every backend with NCCLX_HANG_DUMP=SECONDS (or
    ncclx_migrate.enable_hang_dump(SECONDS)); see docs/flight-recorder.md.
    """


def _fail(cmd: str, exc: DumpError) -> None:
    click.echo(f"ncclx fr {cmd}: error: {exc}", err=True)
    sys.exit(EXIT_INPUT)


@fr.command()
@click.argument("folder", type=click.Path(path_type=Path))
@click.option("--prefix", "-p", default=None, help="Dump file prefix (default: inferred, as torchfrtrace).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (schema ncclx.fr/1).")
@click.option("--html", "html", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write a self-contained HTML page of where every rank stopped to this file.")
def analyze_cmd(folder: Path, prefix: str | None, as_json: bool, html: Path | None) -> None:
    """Name the rank that hung a collective, from per-rank dumps in FOLDER.

    Exit 0: no problem found; 1: a hang, mismatch or missing dump diagnosed;
    2: bad input.
    """
    try:
        diag = analyze(load_dir(folder, prefix))
    except DumpError as exc:
        _fail("analyze", exc)
        return
    if html is not None:
        from ._html import write_page

        try:
            write_page(html, to_json(diag))
        except OSError as exc:
            _fail("analyze", DumpError(f"{html}: cannot write the page there ({exc.strerror or exc})"))
        click.echo(f"ncclx fr analyze: wrote {html}", err=True)
    if as_json:
        click.echo(json.dumps(to_json(diag), indent=2))
    else:
        click.echo(render_human(diag))
    sys.exit(EXIT_PROBLEM if diag.problem else EXIT_OK)


analyze_cmd.name = "analyze"


@fr.command()
@click.argument("folder", type=click.Path(path_type=Path))
@click.argument("out", type=click.Path(path_type=Path))
@click.option("--prefix", "-p", default=None, help="Dump file prefix (default: inferred).")
def repair(folder: Path, out: Path, prefix: str | None) -> None:
    """Write FOLDER's dumps to OUT with gloo's pg_config repaired, for torchfrtrace."""
    try:
        ds = load_dir(folder, prefix)
    except DumpError as exc:
        _fail("repair", exc)
        return
    if out.exists() and out.resolve() == folder.resolve():
        _fail("repair", DumpError(f"{out}: is the input folder; write the repaired copies elsewhere"))
    try:
        out.mkdir(parents=True, exist_ok=True)
        for (rec, rank), dump in sorted(ds.dumps.items()):
            name = dump.path.name
            (out / name).write_bytes(pickle.dumps(repaired_pickle_obj(dump)))
            click.echo(f"{out / name}: rank {rank} ({rec}, {len(dump.entries)} entries)")
    except OSError as exc:
        _fail("repair", DumpError(f"{out}: cannot write the repaired copies there ({exc.strerror or exc})"))
    for line in ds.repairs:
        click.echo(f"repaired: {line}")
    if ds.repairs == []:
        click.echo("nothing to repair; files copied")
