"""``ncclx migrate``: its options, turned into a request for the library (``api.migrate``).

``rules`` and ``explain`` are in _docs_cli.
"""

from __future__ import annotations

import sys

import click

from ._output import FORMATS
from ._runner import DEFAULT_MAX_MB, DEFAULT_MAX_PYTHON_MB
from .api import MigrateRequest, RequestError
from .api import migrate as run_migrate

__all__ = ["migrate"]


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("paths", nargs=-1, type=click.Path(path_type=str))
@click.option("--diff", "diff", is_flag=True, help="Print the unified diff --write would apply; write nothing.")
@click.option("--write", "write", is_flag=True, help="Apply safe fixes in place.")
@click.option("--unsafe-fixes", is_flag=True, help="With --write/--diff: also apply fixes that change behaviour.")
@click.option("--select", multiple=True, metavar="CODES", help="Only these rule-code prefixes (comma-separated, repeatable).")
@click.option("--ignore", multiple=True, metavar="CODES", help="Skip these rule-code prefixes.")
@click.option("--target-torch", metavar="X.Y", help="Oldest torch the code must still run on (default: detected, else 2.15).")
@click.option("--use-shim", is_flag=True,
              help="Five fixes use ncclx_migrate.backend helpers instead of plain torch: isinstance(x, "
                   "ProcessGroupNCCL) -> is_nccl_backend(x), a backend's NCCL versions -> runtime_nccl_version() / "
                   "build_nccl_version(), pg._get_backend(...)._set_default_timeout(t) -> set_timeout(t, group=pg) (an unsafe "
                   "fix; not on a backend whose group the function does not show), _group_start/_group_end -> "
                   "coalescing(), and C++ casts -> ncclx::is_nccl / comm_ptr. Every other fix (get_backend() == "
                   "\"nccl\" too) is the same with or without it.")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="text", show_default=True)
@click.option("--exclude", multiple=True, metavar="GLOB", help="Skip paths matching GLOB (repeatable).")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=None, help="Worker processes (default: CPU count; at most 2 per CPU and 1 per file).")
@click.option("--stdin-filename", default="-", metavar="NAME", help="Name (and so file kind) of the text read from '-'.")
@click.option("--quiet", "-q", is_flag=True, help="No progress or detection notes on stderr.")
@click.option("--show-source", is_flag=True, help="Text format: show the source line of each finding with a caret.")
@click.option("--max-file-size", type=click.FloatRange(min=0, min_open=True, max=2**20), default=None, metavar="MB",
              help=f"Larger files are not read (Python: an error; others: skipped). Default: {DEFAULT_MAX_MB:g}, "
                   f"and Python a rule would parse {DEFAULT_MAX_PYTHON_MB:g} (parsing takes ~1,300x the size).")
@click.option("--ignore-unknown", is_flag=True,
              help="A file of a kind no scanner reads is skipped, not an error (pre-commit passes every text file).")
@click.option("--baseline", "baseline_file", metavar="FILE", type=click.Path(dir_okay=False, path_type=str),
              help="Report and fail only on findings not in FILE (a JSON file --update-baseline writes).")
@click.option("--update-baseline", is_flag=True,
              help="With --baseline FILE: write this run's findings into FILE (for the files scanned) and exit 0.")
@click.option("--cache-dir", metavar="DIR", type=click.Path(file_okay=False, readable=False, path_type=str),
              help="Keep per-file results in DIR (default: $NCCLX_CACHE_DIR, else .ncclx_cache/ at the project root).")
@click.option("--no-cache", is_flag=True, help="Scan every file; read and write no cache.")
def migrate(
    paths: tuple[str, ...], diff: bool, write: bool, unsafe_fixes: bool, select: tuple[str, ...],
    ignore: tuple[str, ...], target_torch: str | None, use_shim: bool, fmt: str, exclude: tuple[str, ...],
    jobs: int | None, stdin_filename: str, quiet: bool, show_source: bool, max_file_size: float | None,
    ignore_unknown: bool, baseline_file: str | None, update_baseline: bool, cache_dir: str | None, no_cache: bool,
) -> None:
    """Find (and with --write fix) legacy-NCCL toggles and code that changes under nccl2.

    Exit status: 0 no finding left, 1 findings left, 2 usage error or a file could not be
    read or parsed (all other files are still processed).
    """
    request = MigrateRequest(
        paths=paths or (".",), diff=diff, write=write, unsafe_fixes=unsafe_fixes, select=select, ignore=ignore,
        target_torch=target_torch, use_shim=use_shim, fmt=fmt, exclude=exclude, jobs=jobs,
        stdin_filename=stdin_filename, quiet=quiet, show_source=show_source, max_file_size=max_file_size,
        ignore_unknown=ignore_unknown, baseline_file=baseline_file, update_baseline=update_baseline,
        cache_dir=cache_dir, no_cache=no_cache,
    )
    try:
        code = run_migrate(request)
    except RequestError as exc:
        if exc.bad_value:
            raise click.BadParameter(exc.message, param_hint=exc.param_hint) from None
        raise click.UsageError(exc.message) from None
    sys.exit(code)
