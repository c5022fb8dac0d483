"""One atomic write for the files a run keeps (the baseline, the cache's shards): a reader never
sees half a file, and a failed write leaves the old one and no temporary behind."""

from __future__ import annotations

import os
import tempfile

__all__ = ["replace_with"]


def replace_with(path: str, text: str, prefix: str, mode: int | None = None) -> None:
    """Write ``text`` (UTF-8, ``\\n`` line ends) beside ``path`` and rename it over ``path``;
    raises OSError.  The file gets ``mode``, else the one ``path`` has, else what the umask
    gives a new file (mkstemp's own is 0600)."""
    if mode is None:
        try:
            mode = os.stat(path).st_mode & 0o7777
        except FileNotFoundError:
            mask = os.umask(0)
            os.umask(mask)
            mode = 0o666 & ~mask
    fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=".tmp", dir=os.path.dirname(path) or ".")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
