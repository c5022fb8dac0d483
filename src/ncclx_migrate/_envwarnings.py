"""Import-time environment warnings (``LegacyNCCLWarning``), once per finding.

Runs inside ``import ncclx_migrate`` (budget 20 ms): no torch, no ``importlib.metadata``
(33 ms), no ``packaging``, ``typing`` or ``dataclasses`` (7-11 ms each).  The env table
is imported only when a variable it could match is set, and what torch is installed
is read straight from its ``*.dist-info`` directory (version and
``torch.distributed.backends`` entry points) only when the rollback toggle is set.
"""

from __future__ import annotations

import os
import sys

from ._warnings import clipped, warn_legacy, warnings_mode

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    from ._torch.envvars import EnvVar
    from ._torch.releases import Phase

__all__ = ["PREFIXES", "InstalledTorch", "find_installed_torch", "toggle_message", "warn_environment"]

# Every name in _torch.envvars.ENV_VARS that can produce a finding starts with one of these
# (tests/backend/test_warnings.py keeps it so).
PREFIXES = ("TORCH_NCCL", "TORCH_DIST_USE_NCCL2", "NCCL_")
_TOGGLE = "TORCH_DIST_USE_NCCL2"
_GROUP = "[torch.distributed.backends]"


class InstalledTorch:
    """torch's release and its own backend entry point names, read from its dist-info."""

    __slots__ = ("backends", "version")

    def __init__(self, version: tuple[int, int], backends: frozenset[str]) -> None:
        self.version = version
        self.backends = backends

    @property
    def label(self) -> str:
        return f"torch {self.version[0]}.{self.version[1]}"

    @property
    def has_nccl2(self) -> bool:
        # 2.13 has no entry point group at all; nccl2 arrived with it in 2.14.
        return "nccl2" in self.backends

    @property
    def rollback_gone(self) -> bool:
        return self.has_nccl2 and self.version >= (2, 15) and "nccl-legacy" not in self.backends

    @property
    def phase(self) -> Phase:
        """The phase read off the registry (before 2.15 "nccl" is legacy unless opted in), to
        look up NCCL_BUILDS.  Imports _torch.releases: only the messages that need the table ask."""
        from ._torch.releases import phase_for_registry

        return phase_for_registry(set(self.backends), self.version >= (2, 15))


def _read_backends(dist_info: str) -> frozenset[str]:
    names: set[str] = set()
    try:
        with open(os.path.join(dist_info, "entry_points.txt"), encoding="utf-8") as fh:
            section = ""
            for raw in fh:
                line = raw.strip()
                if line.startswith("["):
                    section = line
                elif section == _GROUP and "=" in line:
                    names.add(line.split("=", 1)[0].strip().lower())
    except OSError:
        pass
    return frozenset(names)


def _parse_dist_name(name: str) -> tuple[int, int] | None:
    """(major, minor) from ``torch-2.15.0+cu132.dist-info``; None for anything else."""
    if not (name.startswith("torch-") and name.endswith(".dist-info")):
        return None
    parts = name[len("torch-") : -len(".dist-info")].split(".")
    if len(parts) < 2 or not parts[0].isdigit():
        return None
    minor = ""
    for ch in parts[1]:
        if not ch.isdigit():
            break
        minor += ch
    return (int(parts[0]), int(minor)) if minor else None


def find_installed_torch(path: list[str] | None = None) -> InstalledTorch | None:
    """The first torch ``*.dist-info`` on ``sys.path``, read without importing torch."""
    for entry in sys.path if path is None else path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for name in names:
            version = _parse_dist_name(name)
            if version is not None:
                return InstalledTorch(version, _read_backends(os.path.join(entry, name)))
    return None


def _builds(torch: InstalledTorch, value: str | None) -> str:
    """What "nccl" builds on this torch with the toggle at ``value``."""
    from ._torch.releases import nccl_builds

    return "nccl2" if nccl_builds(torch.phase, value) == "nccl2" else "legacy"


def toggle_message(value: str, torch: InstalledTorch | None) -> str | None:
    """The NCX101 message for ``TORCH_DIST_USE_NCCL2=value`` on ``torch``, or None if harmless."""
    from ._torch.releases import toggle_meaning

    meaning = toggle_meaning(value)
    if meaning == "no-effect":
        if torch is not None:  # what "nccl" builds on this release, whatever the value says
            here = f"{torch.version[0]}.{torch.version[1]}"
            return f'{_TOGGLE}={clipped(value, 10)} does nothing: "nccl" builds {_builds(torch, value)} on {here}; unset it'
        return f'{_TOGGLE}={clipped(value)} does nothing: only "0" and "1" count; unset it'
    if meaning == "opt-in":
        if torch is not None and not torch.has_nccl2:
            return f"{_TOGGLE}=1 does nothing on {torch.label} (no nccl2): upgrade to torch 2.14+"
        return None
    if meaning != "rollback":
        return None
    if torch is not None and torch.rollback_gone:
        return f"{_TOGGLE}=0 does nothing on {torch.label} (its rollback is gone): unset it"
    if torch is not None and torch.version < (2, 15):  # 2.13: no nccl2; 2.14: legacy by default
        return f"{_TOGGLE}=0 does nothing on {torch.label}, rolls 2.15 back to legacy: unset it"
    return f'{_TOGGLE}=0 rolls "nccl" back to legacy (a 2.15-only rollback): unset it'


def env_message(row: EnvVar) -> str:
    """The message for one deprecated, ignored or obsolete row of the env table (the why and
    the whole fix are on the rule's page: `ncclx explain`)."""
    from ._torch.envvars import EnvKind

    if row.kind is EnvKind.DEPRECATED:
        return f"{row.name}, deprecated: add {row.replacement}"
    if row.kind is EnvKind.OBSOLETE:
        return f"{row.name} does nothing on torch 2.15: delete it"
    return f"{row.name} is read by legacy NCCL only" + (f": use {row.replacement}" if row.replacement else "")


def warn_environment(environ: Mapping[str, str] | None = None) -> None:
    """Warn once per finding about the process environment (no torch import)."""
    env = os.environ if environ is None else environ
    if not any(name.startswith(PREFIXES) for name in env):
        return
    if warnings_mode() == "ignore":
        return
    from ._torch.envvars import TOGGLE_VAR, EnvKind, env_findings, lookup

    value = env.get(TOGGLE_VAR)
    if value is not None:
        message = toggle_message(value, find_installed_torch())
        row = lookup(TOGGLE_VAR)
        if message is not None and row is not None:
            warn_legacy(row.py_code, message, key=("env", TOGGLE_VAR))
    for row in env_findings(env):
        if row.kind is EnvKind.TOGGLE:
            continue
        warn_legacy(row.py_code, env_message(row), key=("env", row.name))
