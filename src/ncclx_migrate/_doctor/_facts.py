"""Facts about this process that several checks read, computed once and only when asked.

Below ``local`` nothing here imports torch: every fact is asked of ``_torch.probe`` (versions
from package metadata, the GPU count from the driver's /proc and /sys entries, the NCCL
version from the library itself) or read off ``_torch.releases`` (the phase from the version
number).  What this module adds is the doctor's: which level asks what, and --target-torch.
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from .._torch import probe as ti
from .._torch.envvars import TOGGLE_VAR
from .._torch.releases import (
    Phase,
    nccl_builds,
    phase_for_version,
    release_of,
    toggle_meaning,
)
from ._model import level_index

__all__ = ["BEFORE_TORCH_WHY", "NEEDS_TORCH", "NO_GPU_WHY", "Facts", "Options"]

# Why the job is judged as gloo on a node without a GPU; the fact itself is gpu-binding's.
NO_GPU_WHY = "no GPU here, see gpu-binding"
# What a check that needs torch says when a static run checks a node or an image before torch
# is installed (the header says once that torch is missing).
NEEDS_TORCH = "needs torch"
BEFORE_TORCH_WHY = ("no torch in this Python: a check of this node or image before torch is installed, so the "
                    "checks that need torch skip; --backend nccl judges the job (and fails without torch)")


@dataclass(frozen=True)
class Options:
    level: str = "local"
    strict: bool = False
    target_torch: tuple[int, int] | None = None
    require_gpu: bool = False
    timeout: float = 30.0
    selected: tuple[str, ...] = ()
    backend: str | None = None  # what the job passes to init_process_group; None: guess


@dataclass(frozen=True)
class LibraryFact:
    candidate: ti.LibraryCandidate
    version: tuple[int, int, int] | None
    error: str | None


class Facts:
    def __init__(self, options: Options, environ: Mapping[str, str] | None = None) -> None:
        self.options = options
        self.environ: Mapping[str, str] = dict(os.environ if environ is None else environ)
        # A slow step says what it is doing ("probe: 2 ranks, all_reduce..."); a no-op
        # unless the CLI streams to a terminal.
        self.progress: Callable[[str], None] = lambda text: None

    # -- where and what -----------------------------------------------------------------
    @property
    def level(self) -> str:
        return self.options.level

    @property
    def imports_torch(self) -> bool:
        return level_index(self.level) >= level_index("local")

    @cached_property
    def host(self) -> str:
        return socket.gethostname()

    @cached_property
    def rank(self) -> int | None:
        raw = self.environ.get("RANK") or self.environ.get("SLURM_PROCID")
        try:
            return int(raw) if raw is not None else None
        except ValueError:
            return None

    @cached_property
    def static_build(self) -> dict[str, str | None] | None:
        return ti.static_torch_build()

    @cached_property
    def static_torch_version(self) -> str | None:
        info = self.static_build
        return (info or {}).get("__version__") or ti.installed_torch_version()

    @cached_property
    def build(self) -> ti.TorchBuild | None:
        return ti.torch_build() if self.imports_torch else None

    @property
    def torch_version(self) -> str | None:
        return self.build.version if self.build else self.static_torch_version

    @cached_property
    def flavor(self) -> str | None:
        """"cuda", "rocm", "cpu", or None when unknown (no torch, or a version with no label)."""
        if self.build is not None:
            return self.build.flavor
        info = self.static_build
        if info is not None and info.get("__version__"):
            return "rocm" if info.get("hip") else "cuda" if info.get("cuda") else "cpu"
        return ti.build_flavor_from_version(self.static_torch_version)

    @cached_property
    def torch_minor(self) -> tuple[int, int] | None:
        v = self.torch_version
        if not v:
            return None
        m = re.match(r"(\d+)\.(\d+)", v)
        return (int(m.group(1)), int(m.group(2))) if m else None

    @cached_property
    def providers(self) -> dict[str, list[str]]:
        """Backend name -> distributions providing it (torch, or ncclx-migrate's shim)."""
        return ti.backend_providers()

    @cached_property
    def phase(self) -> tuple[Phase | None, str]:
        """(phase, how it was found)."""
        if self.build is not None:
            return ti.registry_phase(), "backend registry"
        if self.torch_minor is not None:
            return phase_for_version(self.torch_minor), "version number"
        return None, "no torch"

    @property
    def toggle(self) -> str | None:
        return self.environ.get(TOGGLE_VAR)

    @property
    def toggle_meaning(self) -> str:
        return toggle_meaning(self.toggle)

    # -- what the job gets --------------------------------------------------------------
    @property
    def target_release(self) -> str | None:
        """"2.16" when --target-torch names a release other than the installed one."""
        target = self.options.target_torch
        if target is None or target == self.torch_minor:
            return None
        return release_of(target)

    @cached_property
    def nccl_resolution(self) -> ti.Resolution | None:
        """What "nccl" builds for CUDA under this environment (None: cannot tell); with
        --target-torch, what it builds on that release (every check then speaks of it)."""
        target = self.target_release
        if target is not None and self.flavor != "cpu" and self.torch_version is not None:
            impl = nccl_builds(phase_for_version(target), self.toggle)
            shown = "unset" if self.toggle is None else repr(self.toggle)
            return ti.Resolution("cuda", "nccl", impl, f"on torch {target} (--target-torch), {TOGGLE_VAR} {shown}")
        if self.build is not None:
            return ti.resolve_backend("nccl", self.environ)[0]
        phase, _ = self.phase
        if phase is None:
            return None
        if self.flavor == "cpu":
            return ti.Resolution("cuda", "nccl", None, "this torch is a CPU build (no NCCL)")
        impl = nccl_builds(phase, self.toggle)
        if phase is Phase.NO_NCCL2:
            return ti.Resolution("cuda", "nccl", impl, "torch before 2.14 has no nccl2")
        shown = "unset" if self.toggle is None else repr(self.toggle)
        return ti.Resolution("cuda", "nccl", impl, f"{TOGGLE_VAR} is {shown} (predicted from the torch version)")

    @cached_property
    def gpu_count(self) -> int | None:
        """Visible GPUs (None: cannot tell at this level)."""
        if self.build is not None:
            return ti.cuda_device_count()
        return ti.static_gpu_count(self.environ)

    @cached_property
    def job_backend(self) -> tuple[str | None, str]:
        """(implementation the job's GPU collectives get, why): gloo without a GPU.

        ``--backend`` names the job's backend; without it: "nccl" where a GPU is visible.
        With --backend nccl on a node without a GPU (a login node) the checks judge the
        NCCL job as it will run on a GPU node; gpu-binding alone says the GPU is missing.
        """
        named = (self.options.backend or "").lower()
        if named == "nccl":
            res = self.nccl_resolution
            if res is None:
                return None, "torch is not installed"
            return res.implementation, f"--backend nccl, {res.reason}"
        if named:
            impl = named.rsplit(":", 1)[-1] if ":" in named else named
            return impl, f"--backend {self.options.backend}"
        if self.before_torch:
            return None, BEFORE_TORCH_WHY
        gpus = self.gpu_count
        res = self.nccl_resolution
        if gpus == 0 or (res is not None and res.implementation is None):
            why = NO_GPU_WHY if gpus == 0 else res.reason if res else ""
            return ti.IMPL_GLOO, why
        if res is None:
            return None, "torch is not installed"
        return res.implementation, res.reason

    @property
    def before_torch(self) -> bool:
        """A static run without torch and without --backend: a check of a node or an image
        before torch is installed, where the checks that need torch skip instead of failing."""
        return self.torch_version is None and self.options.level == "static" and not self.options.backend

    @property
    def no_gpu_here(self) -> bool:
        """gloo only because this node has no GPU (a login node): the header says so once."""
        return self.job_backend[1] == NO_GPU_WHY

    def backend_label(self, impl: str) -> str:
        """``impl`` with why the job gets it, unless the header already says (no GPU here)."""
        why = self.job_backend[1]
        return impl if not why or why == NO_GPU_WHY else f"{impl} ({why})"

    # -- libraries ----------------------------------------------------------------------
    @cached_property
    def libraries(self) -> list[ti.LibraryCandidate]:
        return ti.find_libraries(self.environ)

    def library_fact(self, kind: str) -> LibraryFact | None:
        """The first candidate of ``kind`` ("nccl"/"rccl"), asked for its version."""
        return self._library_facts.get(kind)

    @cached_property
    def _library_facts(self) -> dict[str, LibraryFact]:
        out: dict[str, LibraryFact] = {}
        for cand in self.libraries:
            if cand.kind in out:
                continue
            try:
                version: tuple[int, int, int] | None = ti.query_library_version(
                    cand.path, timeout=min(self.options.timeout, 10.0)
                )
                error = None
            except ti.LibraryQueryError as exc:
                version, error = None, str(exc)
            out[cand.kind] = LibraryFact(cand, version, error)
        return out

    @cached_property
    def build_nccl(self) -> tuple[int, ...] | None:
        return ti.build_nccl_version() if self.build is not None else None

    @cached_property
    def runtime_nccl(self) -> tuple[int, ...] | None:
        return ti.runtime_nccl_version() if self.build is not None else None

    @cached_property
    def loaded_nccl(self) -> list[str]:
        return ti.loaded_libraries() if self.build is not None else []

    @cached_property
    def nccl_origin(self) -> str | None:
        """The file whose ncclGetVersion torch calls (an LD_PRELOAD interposer wins)."""
        return ti.nccl_origin() if self.build is not None and self.runtime_nccl else None

    def nccl_version(self) -> tuple[tuple[int, ...] | None, str]:
        """(the NCCL/RCCL version the job will load, where that figure comes from)."""
        if self.runtime_nccl is not None:
            return self.runtime_nccl, "runtime (ncclGetVersion of the loaded library)"
        kind = "rccl" if self.flavor == "rocm" else "nccl"
        fact = self.library_fact(kind) or self.library_fact("rccl" if kind == "nccl" else "nccl")
        if fact is not None and fact.version is not None:
            return fact.version, f"{fact.candidate.path} ({fact.candidate.source})"
        if self.build_nccl is not None:
            return self.build_nccl, "build-time (torch.cuda.nccl.version())"
        return None, "no NCCL library found"

    def as_details(self) -> dict[str, Any]:
        return {"torch": self.torch_version, "flavor": self.flavor}


# The job id a launcher exports, most specific first: Slurm's (an array task: its own), then
# torchrun's rendezvous id (torchrun without --rdzv-id says "none").
_JOB_IDS = (("SLURM_ARRAY_JOB_ID", "slurm-{}_{SLURM_ARRAY_TASK_ID}"), ("SLURM_JOB_ID", "slurm-{}"),
            ("TORCHELASTIC_RUN_ID", "torchrun-{}"))


def job_label(environ: Mapping[str, str], host: str) -> str:
    """A report's default ``--label``: "node-a/slurm-4243", or the host alone outside a job."""
    for var, form in _JOB_IDS:
        value = environ.get(var, "").strip()
        if value and value != "none" and ("{SLURM_ARRAY_TASK_ID}" not in form or environ.get("SLURM_ARRAY_TASK_ID")):
            return f"{host}/" + form.format(value, **environ)
    return host
