"""``ncclx fr``: analyze (and repair) flight-recorder dumps.

Exit codes of ``ncclx fr analyze``: 0 no problem found, 1 a hang, mismatch or
missing dump diagnosed, 2 usage or input error (one line on stderr).
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import sys
import tempfile
from pathlib import Path

import click

from .._format import format_option
from .._words import count
from ._analyze import analyze
from ._load import MAX_DUMP_BYTES, DumpError, load_dir, read_raw, repaired_pickle_obj, show
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
    click.echo(f"ncclx fr {cmd}: error: {show(exc)}", err=True)
    sys.exit(EXIT_INPUT)


_JOBS_HELP = "Worker processes that read and reduce the dumps (default: the CPU count)."
_MAX_HELP = "Refuse a dump file larger than this many MB (a real one is a few MB)."


@fr.command()
@click.argument("folder", type=click.Path(path_type=Path))
@click.option("--prefix", "-p", default=None, help="Dump file prefix (default: inferred, as torchfrtrace).")
@format_option("ncclx.fr/1")
@click.option("--jobs", "-j", type=click.IntRange(1, 1024), default=None, help=_JOBS_HELP)
@click.option("--max-dump-mb", type=click.IntRange(1, 1 << 20), default=MAX_DUMP_BYTES >> 20, help=_MAX_HELP)
@click.option("--html", "html", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write a self-contained HTML page of where every rank stopped to this file.")
def analyze_cmd(folder: Path, prefix: str | None, as_json: bool, jobs: int | None, max_dump_mb: int,
                html: Path | None) -> None:
    """Name the rank that hung a collective, from per-rank dumps in FOLDER.

    Exit 0: no problem found; 1: a hang, mismatch or missing dump diagnosed;
    2: bad input.
    """
    try:
        diag = analyze(load_dir(folder, prefix, jobs=jobs, max_bytes=max_dump_mb << 20))
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
@click.option("--jobs", "-j", type=click.IntRange(1, 1024), default=None, help=_JOBS_HELP)
@click.option("--max-dump-mb", type=click.IntRange(1, 1 << 20), default=MAX_DUMP_BYTES >> 20, help=_MAX_HELP)
def repair(folder: Path, out: Path, prefix: str | None, jobs: int | None, max_dump_mb: int) -> None:
    """Write FOLDER's dumps to OUT with gloo's pg_config repaired, for torchfrtrace.

    OUT must not exist (or be an empty folder): the copies are written to a
    temporary folder next to it, which becomes OUT only once every file is written.
    """
    max_bytes = max_dump_mb << 20
    try:
        ds = load_dir(folder, prefix, jobs=jobs, max_bytes=max_bytes)
    except DumpError as exc:
        _fail("repair", exc)
        return
    if out.exists() and out.resolve() == folder.resolve():
        _fail("repair", DumpError(f"{out}: is the input folder; write the repaired copies elsewhere"))
    if out.is_symlink() or (out.exists() and (not out.is_dir() or any(out.iterdir()))):
        _fail("repair", DumpError(f"{out}: already exists and is not an empty folder; pick a new OUT"))
    lines: list[str] = []
    tmp: Path | None = None
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".partial", dir=out.parent))
        for (rec, rank), dump in sorted(ds.dumps.items()):
            name = dump.path.name
            data = pickle.dumps(repaired_pickle_obj(dump, read_raw(dump.path, max_bytes)))
            (tmp / name).write_bytes(data)
            lines.append(f"{out / name}: rank {rank} ({rec}, {count(dump.n_entries, 'entry', 'entries')})")
        tmp.chmod(0o755)
        os.replace(tmp, out)  # onto a missing or empty OUT: atomic
        tmp = None
    except DumpError as exc:
        _fail("repair", exc)
    except RecursionError:
        _fail("repair", DumpError(f"{folder}: a dump is nested too deeply to write back as a pickle"))
    except OSError as exc:
        _fail("repair", DumpError(f"{out}: cannot write the repaired copies there ({exc.strerror or exc})"))
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    for line in lines:
        click.echo(show(line))
    for line in ds.ignored:
        click.echo(f"ignored: {show(line)}")
    for line in ds.repairs:
        click.echo(f"repaired: {show(line)}")
    if ds.repairs == []:
        click.echo("nothing to repair; files copied")
