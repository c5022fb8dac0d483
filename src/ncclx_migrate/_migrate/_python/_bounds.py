"""The oldest torch the project supports bounds every fix.

``--target-torch`` (else the project's own bound, e.g. ``torch>=2.6``: _target.py) is the
oldest release the code must keep working on.  A fix that is only right on newer releases is
not offered below them: the finding stays, with no fix, and its detail says which release and
why.  The env-variable fixes check their rows in ``_torch.envvars.drop_allowed``; the rest are here,
per rule, with the release from ``_torch.releases``.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..._torch.releases import DEVICE_ID_FROM
from .._model import FixKind, Options
from ._ctx import Pending

__all__ = ["bound_fixes"]

# rule code -> (the first release its fix is right on, what the fix needs there)
_FIX_FROM: dict[str, tuple[tuple[int, int], str]] = {
    "NCX130": (DEVICE_ID_FROM, "init_process_group(device_id=...)"),
    "NCX134": (DEVICE_ID_FROM, "init_process_group(device_id=...)"),
}


def bound_fixes(pending: Sequence[Pending], options: Options) -> None:
    """Drop the fixes an older release the project supports would break on (in every mode)."""
    oldest = options.target_torch
    for p in pending:
        need = _FIX_FROM.get(p.finding.code)
        if need is None or not p.edits or oldest >= need[0]:
            continue
        (major, minor), what = need
        p.edits.clear()
        p.imports.clear()
        p.finding.fix = FixKind.NONE
        p.finding.detail = (f"{p.finding.detail} Not rewritten: {what} exists from torch {major}.{minor}, and this "
                            f"project supports torch {oldest[0]}.{oldest[1]}.").strip()
