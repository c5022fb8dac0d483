"""Reading the inputs into summaries, over worker processes for a large fleet.

Each worker reads one report at a time and sends back its summary (a repository's row and
owners' share, or a job's row: a few KB), so memory stays one report per worker whatever the
fleet's size; the summaries come back in input order, so the roll-up is the same with any
number of workers.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor

from ._inputs import BadReport, Skip, expand, read
from ._jobs import Job, summarize_doctor
from ._repos import RepoPart, summarize_migrate

__all__ = ["summaries"]

MAX_WORKERS = 8
MIN_FILES_PER_WORKER = 32  # below this a worker costs more to start than it saves


def load(path: str) -> RepoPart | Job | Skip:
    item = read(path)
    if isinstance(item, Skip):
        return item
    try:
        return summarize_migrate(item) if item.schema == "ncclx.migrate/1" else summarize_doctor(item)
    except (BadReport, ValueError, TypeError, AttributeError, KeyError) as exc:
        return Skip(path, f"not a valid report ({exc})")


def _workers(files: int) -> int:
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, MAX_WORKERS, files // MIN_FILES_PER_WORKER))


def summaries(inputs: tuple[str, ...]) -> Iterator[RepoPart | Job | Skip]:
    """A summary or a Skip per input file, in the order ``expand`` gives them."""
    items = list(expand(inputs))
    files = [p for p in items if isinstance(p, str)]
    workers = _workers(len(files))
    if workers == 1:
        for p in items:
            yield p if isinstance(p, Skip) else load(p)
        return
    # forkserver: workers start from a fresh process, not from this one's memory (which holds the
    # previous roll-up and the summaries so far); spawn where there is no forkserver.
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
    with ProcessPoolExecutor(workers, mp_context=context) as pool:
        done = pool.map(load, files, chunksize=8)
        for p in items:
            yield p if isinstance(p, Skip) else next(done)
