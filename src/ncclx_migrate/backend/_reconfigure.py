"""``reconfigure()``: torch's experimental ``_reconfigure`` (2.14+) without its sharp edges.

torch's edges (docs/torch-versions.md, "Reconfigure"; measured on gloo):

* a uuid must be fresh for every reconfigure, and a reused one is rejected only on the
  new rank 0 while the other ranks "succeed" against the stale rendezvous;
* handles change after every reconfigure (they carry the last uuid), so an old list is stale;
* a ``set`` of handles is sorted as strings, so old rank 10 becomes rank 1.

Here: the uuid defaults to one derived from the handle list (identical on every rank, new
whenever the handles are), handles must be an ordered list, and before torch is called
every member checks its own handle and the (uuid, handles) pair through the group's store
and every member gets the same clear error if any member found a problem.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from ._torch import c10d, torch_version

__all__ = ["ReconfigureError", "reconfigure", "reconfigure_handle"]

_NS = "ncclx/reconfigure"
_POLL_S = 0.005


class ReconfigureError(RuntimeError):
    """A reconfigure was refused before torch was called, on every member alike."""


def _module_and_group(group: Any) -> tuple[Any, Any]:
    mod = c10d()
    if not hasattr(mod, "_reconfigure"):
        major, minor = torch_version()
        raise ReconfigureError(
            f"torch {major}.{minor} has no reconfigure API: it arrived in torch 2.14 "
            "(init_process_group(..., enable_reconfigure=True))"
        )
    pg = group if group is not None else mod._get_default_group()
    if not pg.supports_reconfigure:
        raise ReconfigureError(
            f"process group {mod._world.pg_names.get(pg, '?')!r} cannot reconfigure: create it "
            "with enable_reconfigure=True on a backend that supports it (gloo, nccl2; not "
            "nccl-lazy or the legacy ProcessGroupNCCL)"
        )
    return mod, pg


def reconfigure_handle(group: Any = None) -> str:
    """This member's current reconfigure handle; fetch a fresh one before every reconfigure."""
    mod, pg = _module_and_group(group)
    return str(mod._get_reconfigure_handle(pg))


def _uuid_for(handles: Sequence[str], attempt: int) -> int:
    digest = hashlib.sha256("\n".join([*handles, str(attempt)]).encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 2  # positive int64 (ReconfigureOptions.uuid)


def _check_handles(handles: object) -> list[str]:
    if handles is None:
        raise TypeError(
            "reconfigure() needs handles=: the list of every member's reconfigure_handle(), "
            "in the order of the new ranks"
        )
    if isinstance(handles, (set, frozenset)):
        raise TypeError(
            "reconfigure() needs handles as a list: torch sorts a set as strings, so "
            "'gloo:10:...' becomes rank 1 before 'gloo:2:...'"
        )
    if isinstance(handles, str) or not isinstance(handles, Sequence):
        raise TypeError(f"handles must be a list of str, not {type(handles).__name__}")
    out = list(handles)
    if not out or not all(isinstance(h, str) for h in out):
        raise TypeError("handles must be a non-empty list of str (reconfigure_handle() values)")
    if len(set(out)) != len(out):
        raise ValueError("handles lists the same member twice")
    return out


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _local_problem(store: Any, ns: str, me: str, handles: list[str], uuid: int) -> str | None:
    if me not in handles:
        return (
            f"the handle of this member ({me}) is not in handles: they are stale (handles change "
            "after every reconfigure; collect fresh reconfigure_handle() values) or this member "
            "is not part of the new group"
        )
    # Members of one round (same set of handles) must agree on order and uuid.
    plan = json.dumps({"uuid": uuid, "handles": handles})
    agreed = store.compare_set(f"{ns}/plan", "", plan).decode()
    if agreed != plan:
        theirs = json.loads(agreed)
        return (
            "members disagree on this reconfigure: another member passed uuid "
            f"{theirs['uuid']} and handles {theirs['handles']}, this one uuid {uuid} and handles "
            f"{handles} (pass the same ordered list and uuid everywhere)"
        )
    claimed = store.compare_set(f"{_NS}/uuid/{uuid}", "", ns).decode()
    if claimed != ns:
        return (
            f"uuid {uuid} was already used by an earlier reconfigure (or refused attempt): "
            "each attempt needs a fresh uuid (uuid=None derives one)"
        )
    return None


def _agree(store: Any, ns: str, me: str, handles: list[str], uuid: int, timeout: timedelta) -> None:
    problem = _local_problem(store, ns, me, handles, uuid)
    if problem is not None:
        n = int(store.add(f"{ns}/errors", 1))
        store.set(f"{ns}/error/{n}", problem)
        raise ReconfigureError(problem)
    store.set(f"{ns}/ok/{handles.index(me)}", "1")
    keys = [f"{ns}/ok/{i}" for i in range(len(handles))]
    deadline = time.monotonic() + timeout.total_seconds()
    while True:
        if int(store.add(f"{ns}/errors", 0)) > 0:
            text = store.get(f"{ns}/error/1").decode()
            raise ReconfigureError(f"another member refused reconfigure uuid {uuid}: {text}")
        if store.check(keys):
            return
        if time.monotonic() > deadline:
            missing = [h for i, h in enumerate(handles) if not store.check([keys[i]])]
            raise ReconfigureError(
                f"reconfigure uuid {uuid}: no answer within {timeout} from {missing} "
                "(dead, not calling reconfigure(), or passing other handles)"
            )
        time.sleep(_POLL_S)


def reconfigure(
    uuid: int | None = None,
    handles: Sequence[str] | None = None,
    group: Any = None,
    timeout: timedelta | None = None,
) -> int:
    """Re-form ``group`` (default: the world) from ``handles``; the new rank of a member is
    its handle's position.  Every member calls it with the same list.

    ``uuid=None`` derives a fresh uuid from the handles (identical on every member).
    Raises ``ReconfigureError`` on every member, before torch is touched, when any member's
    handle is stale, the uuid was used before, members disagree on the list, or a member
    does not answer within ``timeout`` (default: the store's timeout).  Needs torch 2.14+
    and a group created with ``enable_reconfigure=True``.  Returns the uuid used.
    """
    mod, pg = _module_and_group(group)
    members = _check_handles(handles)
    if uuid is not None and (
        not isinstance(uuid, int) or isinstance(uuid, bool) or not 0 <= uuid < 2**63
    ):
        raise TypeError(f"uuid must be a non-negative int64, not {uuid!r}")
    store = mod._world.pg_map[pg][1]
    wait = timeout if timeout is not None else store.timeout
    me = str(mod._get_reconfigure_handle(pg))
    # Members of one attempt meet under a key derived from the set of members and how many
    # times this member has tried with that set (members retry in lockstep after a refusal).
    round_ns = f"{_NS}/round/{_digest(json.dumps(sorted(members)))}"
    attempt = int(store.add(f"{round_ns}/calls/{_digest(me)}", 1))
    if uuid is None:
        uuid = _uuid_for(members, attempt)
    _agree(store, f"{round_ns}/{attempt}", me, members, uuid, wait)
    mod._reconfigure(uuid, members, pg, timeout).wait()
    return uuid
