"""The shared objects an interpreter can import: ``*.so`` and ``*.so.*`` under each ``sys.path``
directory (``PYTHONPATH`` entries included), and the distribution each belongs to.

The walk is bounded, since a ``sys.path`` entry may be a checkout or a home directory: symbolic
links are never followed (no loops, nothing outside the entry), hidden folders, ``__pycache__``
and ``*.dist-info``/``*.egg-info`` are skipped, it goes at most ``MAX_DEPTH`` folders deep and
stops after ``MAX_ENTRIES`` directory entries or ``MAX_SECONDS`` in all (a network file system)
and says so. Torch's own libraries
(``torch/``, ``functorch/``, ``torchgen/``) and the NVIDIA wheels (``nvidia/``) are not walked.
"""

from __future__ import annotations

import functools
import os
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from importlib import metadata

__all__ = ["MAX_DEPTH", "MAX_ENTRIES", "MAX_SECONDS", "NOT_WALKED", "SharedObject", "Walk", "owner", "walk"]

MAX_DEPTH = 8
MAX_ENTRIES = 200_000
MAX_SECONDS = 5.0
NOT_WALKED = frozenset({"torch", "functorch", "torchgen", "nvidia", "__pycache__", "site-packages"})


@dataclass(frozen=True)
class SharedObject:
    path: str
    base: str  # the sys.path entry it was found under
    size: int
    mtime_ns: int

    @property
    def relative(self) -> str:
        return os.path.relpath(self.path, self.base)


@dataclass
class Walk:
    files: list[SharedObject] = field(default_factory=list)
    entries: int = 0
    stopped: str = ""  # why the walk stopped early ("" when it read everything)


def is_shared_object(name: str) -> bool:
    return name.endswith(".so") or ".so." in name


def _skip_dir(name: str) -> bool:
    return name.startswith(".") or name in NOT_WALKED or name.endswith((".dist-info", ".egg-info"))


def walk(paths: Sequence[str] | None = None) -> Walk:
    """Every shared object under ``paths`` (default ``sys.path``), each file once."""
    out = Walk()
    deadline = time.monotonic() + MAX_SECONDS
    seen_dirs: set[str] = set()
    seen_files: set[tuple[int, int]] = set()  # (device, inode): a file reached twice
    bases = dict.fromkeys(os.path.realpath(e or os.getcwd()) for e in (sys.path if paths is None else paths))
    # The deepest entry first: a file under both /work and /work/src (cwd and PYTHONPATH) is
    # named as imported, relative to /work/src; the outer walk then skips the inner folder.
    for base in sorted(bases, key=lambda b: -b.count(os.sep)):
        if not os.path.isdir(base):
            continue  # a zip file or a missing folder
        out.files.extend(_walk_one(base, out, seen_dirs, seen_files, deadline))
        if out.stopped:
            break
    return out


def _walk_one(base: str, out: Walk, seen_dirs: set[str], seen_files: set[tuple[int, int]],
              deadline: float) -> Iterator[SharedObject]:
    stack = [(base, 0)]
    while stack:
        folder, depth = stack.pop()
        if time.monotonic() > deadline:
            out.stopped = f"stopped after {MAX_SECONDS:g} s (in {folder})"
            return
        if folder in seen_dirs:
            continue  # an entry nested in another one (src/ and src/pkg on sys.path)
        seen_dirs.add(folder)
        try:
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            continue
        for e in entries:
            out.entries += 1
            if out.entries > MAX_ENTRIES:
                out.stopped = f"stopped after {MAX_ENTRIES} directory entries (in {folder})"
                return
            try:
                if e.is_dir(follow_symlinks=False):
                    if depth < MAX_DEPTH and not _skip_dir(e.name):
                        stack.append((e.path, depth + 1))
                elif is_shared_object(e.name) and e.is_file(follow_symlinks=False):
                    st = e.stat(follow_symlinks=False)
                    if (st.st_dev, st.st_ino) in seen_files:
                        continue
                    seen_files.add((st.st_dev, st.st_ino))
                    yield SharedObject(e.path, base, st.st_size, st.st_mtime_ns)
            except OSError:
                continue


def owner(so: SharedObject) -> str:
    """The distribution that installed ``so`` (from its RECORD), else its top-level folder or
    module name (a source checkout on PYTHONPATH has no RECORD)."""
    rel = so.relative.replace(os.sep, "/")
    found = _recorded(so.base).get(rel)
    if found:
        return found
    top = rel.split("/", 1)[0]
    return top if "/" in rel else top.split(".", 1)[0]


@functools.lru_cache(maxsize=16)
def _recorded(base: str) -> dict[str, str]:
    """Installed file (relative to ``base``, as RECORD lists it) -> its distribution's name."""
    out: dict[str, str] = {}
    try:
        for dist in metadata.distributions(path=[base]):
            name = str(dist.metadata["Name"] or "")
            for f in dist.files or ():
                if is_shared_object(f.name):
                    out.setdefault(str(f).replace(os.sep, "/"), name)
    except Exception:  # a broken RECORD or METADATA must not hide the finding
        pass
    return out
