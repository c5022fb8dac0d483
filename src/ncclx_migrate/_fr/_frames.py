"""Which stack frames are the user's: the one rule the watchdog (``main_thread_at``) and the
analyzer (``called_from``, folded stacks) share."""

from __future__ import annotations

__all__ = ["is_user"]

# torch's own wrappers of every collective; anything under torch/ or ncclx_migrate/ too, and the
# stdlib threading module (a thread's outer frames).
_NOT_USER_FILES = ("distributed_c10d.py", "c10d_logger.py", "threading.py")


def is_user(filename: str) -> bool:
    return ("/torch/" not in filename and "/ncclx_migrate/" not in filename
            and not filename.endswith(_NOT_USER_FILES))
