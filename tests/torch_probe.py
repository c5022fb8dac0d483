"""Measure, on the torch of the interpreter running it, every per-release fact of ``_torch.releases``.

Run as ``PYTHON tests/torch_probe.py`` (tests/test_torch_versions.py runs it under torch 2.13,
2.14 and 2.15); prints one JSON object: each key is one of those tables' row for this release.  Each fact is read
from torch itself: its own registrars (run one at a time, the registry restored after),
``_get_default_timeout``, and the strings of its libraries and ``torch/distributed`` sources.
No GPU and no process group are needed.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import warnings
from datetime import timedelta
from importlib import metadata
from pathlib import Path

from ncclx_migrate._torch.envvars import ENV_VARS, TOGGLE_VAR
from ncclx_migrate._torch.releases import BACKEND_NAMES, TOGGLE_VALUES, release_of

warnings.simplefilter("ignore")

import torch  # noqa: E402
import torch.distributed.distributed_c10d as c10d  # noqa: E402

# torch's objects live to the end: without this, the collections at exit walk them all (about
# a third of this script's CPU).
gc.freeze()

_IMPL = {
    "_create_nccl_process_group": "nccl-legacy",
    "_create_nccl2_process_group": "nccl2",
    "_create_nccl_lazy_process_group": "nccl-lazy",
}


def torchs_registrars() -> dict[str, object]:
    """torch's own ``torch.distributed.backends`` entry points (not ncclx-migrate's shim)."""
    try:
        eps = metadata.distribution("torch").entry_points
    except metadata.PackageNotFoundError:
        return {}
    return {ep.name: ep for ep in eps if ep.group == "torch.distributed.backends"}


def registered(name: str, registrar: object, toggle: str | None) -> str:
    """Run torch's registrar for ``name`` with the toggle at ``toggle``; what it registered."""
    key = name.upper()
    saved = os.environ.pop(TOGGLE_VAR, None)
    if toggle is not None:
        os.environ[TOGGLE_VAR] = toggle
    try:
        registrar.load()()  # type: ignore[attr-defined]
        plugin = c10d.Backend._plugins.pop(key)
    finally:
        os.environ.pop(TOGGLE_VAR, None)
        if saved is not None:
            os.environ[TOGGLE_VAR] = saved
    creator = plugin.creator_fn.__name__
    return _IMPL.get(creator, creator)


def env_unnamed() -> list[str]:
    """Variables of the env table that neither torch's libraries nor torch/distributed name.

    A substring search: c10d's linker tail-merges strings, so NCCL_BLOCKING_WAIT is stored
    only as the tail of TORCH_NCCL_BLOCKING_WAIT (docs/torch-versions.md, "Environment variables").  One grep pass.
    """
    names = sorted({r.name for r in ENV_VARS} | {r.replacement for r in ENV_VARS if r.replacement})
    root = Path(torch.__file__).parent
    files = [str(p) for p in sorted((root / "lib").glob("libtorch*.so"))]
    files += [str(p) for p in sorted((root / "distributed").rglob("*.py"))]
    out = subprocess.run(
        ["grep", "-a", "-o", "-h", "-F", *[a for n in names for a in ("-e", n)], *files],
        capture_output=True, text=True, errors="replace", check=False,
    ).stdout
    found = set(out.split())
    return [n for n in names if not any(n in f for f in found)]


def main() -> None:
    version = torch.__version__
    eps = torchs_registrars()
    facts: dict[str, object] = {"release": release_of(version), "torch": version}
    # What "nccl" builds for each toggle value.  2.13 builds "nccl" in: always legacy.
    nccl = eps.get("nccl")
    facts["nccl"] = {
        v: registered("nccl", nccl, None if v == "unset" else v) if nccl else "nccl-legacy"
        for v in TOGGLE_VALUES
    }
    # What each explicit name builds (torch's own registration), None where torch lacks it.
    facts["names"] = {
        n: registered(n, eps[n], None) if n in eps else None for n in BACKEND_NAMES if n != "nccl"
    }
    # Default timeout without timeout=: a CPU wheel has no NCCL constant (None), so stand
    # in a sentinel and report which names get NCCL's default rather than the generic one.
    real = c10d.default_pg_nccl_timeout
    sentinel = timedelta(minutes=10, microseconds=1)
    c10d.default_pg_nccl_timeout = sentinel
    facts["nccl_timeout"] = [n for n in BACKEND_NAMES if c10d._get_default_timeout(n) == sentinel]
    facts["generic_timeout_min"] = c10d.default_pg_timeout / timedelta(minutes=1)
    facts["nccl_timeout_min"] = None if real is None else real / timedelta(minutes=1)
    # ncclx_migrate's own answers on this torch.
    from ncclx_migrate.backend import install_legacy_shim, use_nccl2

    facts["shim"] = install_legacy_shim()
    facts["use_nccl2"] = use_nccl2()
    facts["env_unnamed"] = env_unnamed()
    json.dump(facts, sys.stdout)


if __name__ == "__main__":
    main()
