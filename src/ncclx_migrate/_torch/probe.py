"""What this machine's torch and NCCL/RCCL really are: shared by the doctor and the backend.

Two halves:

* torch-free (the doctor's ``static`` level): find ``libnccl``/``librccl`` the way torch's
  loader would, and ask the library itself for its version with ``ncclGetVersion`` through
  ctypes, in a forked child so a broken or hanging library cannot take the caller down;
* torch-importing (lazy, inside functions): the build, the backend registry, what a backend
  name resolves to under a given environment, build-time vs runtime NCCL, and which
  ``libnccl`` file the process actually mapped.

Importing this module never imports torch.  Facts come from
``docs/torch-versions.md`` ("Backend name resolution", "NCCL in each wheel") and the 2.15.0 ``distributed_c10d.py`` (the
``"nccl"`` registrar at :961-983 picks ``_create_nccl2_process_group`` unless
``TORCH_DIST_USE_NCCL2 == "0"``).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import glob
import os
import re
import select
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from .envvars import TOGGLE_VAR
from .releases import BUILTIN_BACKENDS, Phase, phase_for_registry

__all__ = [
    "IMPL_GLOO",
    "IMPL_LAZY",
    "IMPL_LEGACY",
    "IMPL_NCCL2",
    "NCCL_LIBRARY_VAR",
    "LibraryCandidate",
    "LibraryQueryError",
    "Resolution",
    "TorchBuild",
    "backend_entry_points",
    "backend_providers",
    "build_flavor_from_version",
    "build_nccl_version",
    "cuda_device_count",
    "decode_nccl_version",
    "find_libraries",
    "format_version",
    "installed_torch_version",
    "loaded_libraries",
    "nccl_choice",
    "nccl_origin",
    "query_library_version",
    "registered_implementation",
    "registry_phase",
    "resolve_backend",
    "runtime_nccl_version",
    "startable_backends",
    "static_gpu_count",
    "static_torch_build",
    "torch_build",
    "visible_device_limit",
]

# Our own override: the libnccl/librccl file the static level should ask (e.g. a container's
# copy the job will LD_PRELOAD).  Torch never reads it.
NCCL_LIBRARY_VAR = "NCCLX_NCCL_LIBRARY"

# What a backend name builds, named by the registry name of the implementation.
IMPL_NCCL2 = "nccl2"  # ProcessGroupNCCL2
IMPL_LEGACY = "nccl-legacy"  # ProcessGroupNCCL
IMPL_LAZY = "nccl-lazy"  # ProcessGroupNCCLLazy
IMPL_GLOO = "gloo"

# Creator function (distributed_c10d.py, 2.14/2.15) -> implementation.
_CREATORS = {
    "_create_nccl_process_group": IMPL_LEGACY,
    "_create_nccl2_process_group": IMPL_NCCL2,
    "_create_nccl_lazy_process_group": IMPL_LAZY,
    "_create_gloo_process_group": IMPL_GLOO,
}

Version3 = tuple[int, int, int]


# --------------------------------------------------------------------------- torch-free


def format_version(version: tuple[int, ...] | None) -> str:
    return "unknown" if version is None else ".".join(str(p) for p in version)


def decode_nccl_version(code: int) -> Version3:
    """``ncclGetVersion``'s integer: X*10000+Y*100+Z since NCCL 2.9, X*1000+Y*100+Z before."""
    if code >= 10000:
        return code // 10000, (code % 10000) // 100, code % 100
    return code // 1000, (code % 1000) // 100, code % 100


def build_flavor_from_version(version: str | None) -> str | None:
    """"cuda", "rocm" or "cpu" from a torch version's local label (``2.15.0+cu132``)."""
    if not version or "+" not in version:
        return None
    label = version.split("+", 1)[1].lower()
    if label.startswith("rocm"):
        return "rocm"
    if label.startswith("cu"):
        return "cuda"
    if label.startswith("cpu"):
        return "cpu"
    return None


def static_torch_build() -> dict[str, str | None] | None:
    """``__version__``, ``cuda`` and ``hip`` read from torch/version.py as text (no import).

    Package metadata says "2.15.0" for PyPI wheels; version.py keeps "+cu132" and the CUDA
    or HIP version, which is what tells a CUDA, ROCm and CPU build apart.
    """
    try:
        dist = metadata.distribution("torch")
        text = Path(str(dist.locate_file(os.path.join("torch", "version.py")))).read_text(
            encoding="utf-8"
        )
    except (metadata.PackageNotFoundError, OSError):
        return None
    out: dict[str, str | None] = {}
    for key in ("__version__", "cuda", "hip"):
        m = re.search(rf"^{key}\b[^=]*=\s*(?:'([^']*)'|\"([^\"]*)\"|None)", text, re.M)
        out[key] = (m.group(1) or m.group(2)) if m and (m.group(1) or m.group(2)) else None
    return out


def installed_torch_version() -> str | None:
    """torch's version from package metadata, without importing torch."""
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return None


def backend_entry_points() -> dict[str, str]:
    """torch.distributed.backends entry points (name -> target), without importing torch.

    Only torch's own: ncclx-migrate registers a ``nccl-legacy`` shim in the same group.
    """
    return {
        ep.name: ep.value
        for ep in metadata.entry_points(group="torch.distributed.backends")
        if not ep.value.startswith("ncclx_migrate.")
    }


def visible_device_limit(value: str) -> int:
    """How many devices a ``CUDA_VISIBLE_DEVICES``/``HIP_VISIBLE_DEVICES`` value leaves.

    The CUDA runtime stops at the first entry it cannot parse; "" and "-1" hide everything.
    """
    count = 0
    for item in value.split(","):
        item = item.strip()
        if re.fullmatch(r"\d+", item) or re.fullmatch(r"(GPU|MIG)-[0-9A-Za-z-]+", item):
            count += 1
        else:
            break
    return count


def static_gpu_count(environ: Mapping[str, str]) -> int:
    """Visible GPUs without torch: the driver's /proc (NVIDIA) and /sys (AMD, KFD nodes with
    SIMDs) entries, cut to what ``*_VISIBLE_DEVICES`` in ``environ`` leaves."""
    nvidia = glob.glob("/proc/driver/nvidia/gpus/*")
    amd = [p for p in glob.glob("/sys/class/kfd/kfd/topology/nodes/*/properties") if _amd_gpu_node(p)]
    physical = len(nvidia) or len(amd)
    visible = environ.get("CUDA_VISIBLE_DEVICES" if nvidia or not amd else "HIP_VISIBLE_DEVICES")
    return physical if visible is None else min(physical, visible_device_limit(visible))


def _amd_gpu_node(path: str) -> bool:
    try:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("simd_count"):
                    return int(line.split()[1]) > 0
    except (OSError, ValueError, IndexError):
        return False
    return False


@dataclass(frozen=True)
class LibraryCandidate:
    """A ``libnccl``/``librccl`` file found without importing torch."""

    path: str
    kind: str  # "nccl" or "rccl"
    source: str  # where it was found, e.g. "package nvidia-nccl-cu13", "LD_LIBRARY_PATH"


_NCCL_PACKAGES = ("nvidia-nccl-cu13", "nvidia-nccl-cu12", "nvidia-nccl-cu11")
_SYSTEM_DIRS = (
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
    "/usr/local/lib",
    "/usr/local/cuda/lib64",
    "/opt/rocm/lib",
)


def _kind_of(path: str) -> str | None:
    base = os.path.basename(path)
    if ".so" not in base:
        return None
    if base.startswith("libnccl"):
        return "nccl"
    if base.startswith("librccl"):
        return "rccl"
    return None


def _libs_in(directory: str) -> list[str]:
    found: list[str] = []
    for pattern in ("libnccl.so*", "librccl.so*"):
        found.extend(sorted(glob.glob(os.path.join(directory, pattern))))
    # Prefer the versioned file (libnccl.so.2) over the dev symlink; drop pure duplicates.
    seen: set[str] = set()
    out = []
    for p in found:
        real = os.path.realpath(p)
        if real not in seen and os.path.isfile(real):
            seen.add(real)
            out.append(p)
    return out


def _package_libraries() -> list[LibraryCandidate]:
    out: list[LibraryCandidate] = []
    for name in _NCCL_PACKAGES:
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        directory = str(dist.locate_file(os.path.join("nvidia", "nccl", "lib")))
        out.extend(LibraryCandidate(p, "nccl", f"package {name}") for p in _libs_in(directory))
    # ROCm wheels ship librccl inside torch/lib.
    try:
        torch_dist = metadata.distribution("torch")
    except metadata.PackageNotFoundError:
        return out
    directory = str(torch_dist.locate_file(os.path.join("torch", "lib")))
    out.extend(
        LibraryCandidate(p, k, "torch wheel (torch/lib)")
        for p in _libs_in(directory)
        if (k := _kind_of(p))
    )
    return out


def find_libraries(environ: Mapping[str, str] | None = None) -> list[LibraryCandidate]:
    """Candidate NCCL/RCCL libraries, most likely to be loaded first.

    Order follows what wins in practice for PyPI wheels: our override, ``LD_PRELOAD``
    (beats everything), the wheel's own copy (torch preloads it from ``nvidia/nccl/lib``
    and its DT_RPATH points there, so it beats ``LD_LIBRARY_PATH``), then
    ``LD_LIBRARY_PATH`` and the system directories (which win for source/conda builds).
    """
    env = os.environ if environ is None else environ
    out: list[LibraryCandidate] = []
    override = env.get(NCCL_LIBRARY_VAR)
    if override:
        out.append(LibraryCandidate(override, _kind_of(override) or "nccl", NCCL_LIBRARY_VAR))
    for entry in env.get("LD_PRELOAD", "").replace(":", " ").split():
        kind = _kind_of(entry)
        if kind:
            out.append(LibraryCandidate(entry, kind, "LD_PRELOAD"))
    out.extend(_package_libraries())
    for directory in env.get("LD_LIBRARY_PATH", "").split(":"):
        if directory:
            out.extend(
                LibraryCandidate(p, k, "LD_LIBRARY_PATH")
                for p in _libs_in(directory)
                if (k := _kind_of(p))
            )
    for directory in _SYSTEM_DIRS:
        out.extend(
            LibraryCandidate(p, k, "system") for p in _libs_in(directory) if (k := _kind_of(p))
        )
    seen: set[str] = set()
    unique = []
    for cand in out:
        key = os.path.realpath(cand.path)
        if key not in seen:
            seen.add(key)
            unique.append(cand)
    return unique


class LibraryQueryError(Exception):
    """The library could not be loaded or asked for its version (one-line reason)."""


def _ask_version(path: str) -> int:
    lib = ctypes.CDLL(path)
    fn = lib.ncclGetVersion
    fn.argtypes = [ctypes.POINTER(ctypes.c_int)]
    fn.restype = ctypes.c_int
    out = ctypes.c_int(0)
    rc = fn(ctypes.byref(out))
    if rc != 0:
        raise LibraryQueryError(f"ncclGetVersion returned error {rc}")
    return int(out.value)


def query_library_version(path: str, timeout: float = 5.0) -> Version3:
    """Load ``path`` and call its ``ncclGetVersion``; raise LibraryQueryError on any failure.

    On Linux this runs in a forked child (bounded by ``timeout``), so a library that crashes
    or hangs in its constructor only costs the child; elsewhere it runs in-process.
    """
    if not os.path.exists(path):
        raise LibraryQueryError(f"{path}: no such file")
    if not hasattr(os, "fork") or "torch" in sys.modules:
        # Forking after torch started its threads can deadlock the child on their locks.
        try:
            return decode_nccl_version(_ask_version(path))
        except (OSError, AttributeError) as exc:
            raise LibraryQueryError(f"{path}: {exc}") from None
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never return into the caller's stack
        os.close(rfd)
        try:
            msg = f"ok {_ask_version(path)}"
        except BaseException as exc:  # report anything, one line
            msg = "err " + (str(exc).splitlines() or [type(exc).__name__])[0]
        with contextlib.suppress(OSError):
            os.write(wfd, msg.encode()[:4000])
        os._exit(0)
    os.close(wfd)
    try:
        data = b""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                os.kill(pid, signal.SIGKILL)
                raise LibraryQueryError(f"{path}: ncclGetVersion did not answer within {timeout:g}s")
            ready, _, _ = select.select([rfd], [], [], left)
            if not ready:
                continue
            chunk = os.read(rfd, 4096)
            if not chunk:
                break
            data += chunk
    finally:
        os.close(rfd)
        _, status = os.waitpid(pid, 0)
    text = data.decode(errors="replace")
    if text.startswith("ok "):
        return decode_nccl_version(int(text[3:]))
    if text.startswith("err "):
        raise LibraryQueryError(f"{path}: {text[4:]}")
    sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
    raise LibraryQueryError(
        f"{path}: loading it killed the probe process"
        + (f" (signal {signal.Signals(sig).name})" if sig else "")
    )


# --------------------------------------------------------------------------- torch-importing


@dataclass(frozen=True)
class TorchBuild:
    """The imported torch: version and build flavour."""

    version: str
    cuda: str | None  # torch.version.cuda
    hip: str | None  # torch.version.hip
    distributed: bool  # torch.distributed.is_available()
    nccl_available: bool  # dist.is_nccl_available(): True on CUDA/ROCm wheels even without a GPU
    gloo_available: bool

    @property
    def flavor(self) -> str:
        return "rocm" if self.hip else "cuda" if self.cuda else "cpu"


def torch_build() -> TorchBuild | None:
    """None when torch is not installed."""
    try:
        import torch
    except ImportError:
        return None
    dist_ok = False
    nccl = gloo = False
    with contextlib.suppress(Exception):
        import torch.distributed as dist

        dist_ok = bool(dist.is_available())
        if dist_ok:
            nccl = bool(dist.is_nccl_available())
            gloo = bool(dist.is_gloo_available())
    return TorchBuild(
        version=str(torch.__version__),
        cuda=getattr(torch.version, "cuda", None),
        hip=getattr(torch.version, "hip", None),
        distributed=dist_ok,
        nccl_available=nccl,
        gloo_available=gloo,
    )


def cuda_device_count() -> int:
    """Visible GPUs as torch counts them (0 without torch, driver or device)."""
    try:
        import torch

        return int(torch.cuda.device_count())
    except Exception:
        return 0


def _c10d() -> Any:
    import torch.distributed.distributed_c10d as c10d

    return c10d


_registrar_lock = threading.Lock()


@contextlib.contextmanager
def _env_value(name: str, value: str | None) -> Iterator[None]:
    old = os.environ.get(name)
    try:
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


def _creator_from_registrar(registrar: Callable[[], None]) -> str | None:
    """Run a c10d backend registrar with ``Backend.register_backend`` captured.

    Leaves the registry and ``_FR_SELF_RECORDING_BACKENDS`` exactly as found.
    """
    c10d = _c10d()
    backend_cls = c10d.Backend
    original = backend_cls.__dict__["register_backend"]
    fr_set = getattr(c10d, "_FR_SELF_RECORDING_BACKENDS", None)
    fr_saved = set(fr_set) if isinstance(fr_set, set) else None
    captured: list[str] = []

    def capture(cls: Any, name: str, func: Callable[..., Any], *a: Any, **k: Any) -> None:
        captured.append(getattr(func, "__name__", repr(func)))

    try:
        backend_cls.register_backend = classmethod(capture)
        registrar()
    finally:
        backend_cls.register_backend = original
        if fr_saved is not None and isinstance(fr_set, set):
            fr_set.clear()
            fr_set.update(fr_saved)
    return captured[-1] if captured else None


@functools.lru_cache(maxsize=1)
def _backend_eps() -> tuple[metadata.EntryPoint, ...]:
    """torch.distributed.backends entry points; scanning every distribution costs ~8 ms."""
    return tuple(metadata.entry_points(group="torch.distributed.backends"))


def _registrar(name: str) -> Callable[[], None] | None:
    for ep in _backend_eps():
        if ep.name.lower() == name:
            fn = ep.load()
            return fn if callable(fn) else None
    return None


_UNSET: Any = object()


def nccl_choice(toggle: str | Any | None = _UNSET) -> str | None:
    """What the ``"nccl"`` registrar picks with ``TORCH_DIST_USE_NCCL2`` = ``toggle``.

    ``toggle=None`` means unset; the default reads the current environment.  Returns an
    implementation name (``IMPL_NCCL2``/``IMPL_LEGACY``), or None where "nccl" has no
    registrar (torch 2.13 builds it in: always legacy).  The registrar runs with
    registration captured, so nothing in torch's registry changes.
    """
    registrar = _registrar("nccl")
    if registrar is None:
        return None
    value = os.environ.get(TOGGLE_VAR) if toggle is _UNSET else toggle
    with _registrar_lock, _env_value(TOGGLE_VAR, value):
        creator = _creator_from_registrar(registrar)
    return _CREATORS.get(creator or "", creator)


def registered_implementation(name: str) -> str | None:
    """The implementation ``name`` is already registered to in THIS process, else None.

    Once "nccl" is registered, the environment is never consulted again.
    """
    c10d = _c10d()
    plugin = getattr(c10d.Backend, "_plugins", {}).get(name.upper())
    if plugin is None:
        return None
    creator = getattr(plugin.creator_fn, "__name__", "")
    return _CREATORS.get(creator, creator or None)


@dataclass(frozen=True)
class Resolution:
    """What one device of a backend string builds."""

    device: str  # "cuda", "cpu"
    name: str  # the backend name for that device ("nccl")
    implementation: str | None  # IMPL_* or another creator; None = not available
    reason: str  # why, in one sentence


@dataclass
class _Ctx:
    environ: Mapping[str, str]
    use_registered: bool
    names: set[str] = field(default_factory=set)


def _resolve_one(device: str, name: str, ctx: _Ctx) -> Resolution:
    name = name.lower()
    build = torch_build()
    if build is None or not build.distributed:
        return Resolution(device, name, None, "torch.distributed is not available in this build")
    if name == "gloo":
        ok = build.gloo_available
        return Resolution(device, name, IMPL_GLOO if ok else None,
                          "ProcessGroupGloo" if ok else "this build has no gloo")
    if name in ("nccl", "nccl2", "nccl-legacy", "nccl-lazy") and not build.nccl_available:
        return Resolution(device, name, None,
                          f"this {build.flavor} build of torch has no NCCL (is_nccl_available() is False)")
    if name == "nccl":
        value = ctx.environ.get(TOGGLE_VAR)
        if ctx.use_registered:
            impl = registered_implementation("nccl")
            if impl is not None:
                return Resolution(device, name, impl,
                                  '"nccl" is already registered in this process; the environment is no longer read')
        if "nccl" not in ctx.names:
            return Resolution(device, name, IMPL_LEGACY,
                              "this torch has no nccl2 (no backend entry points): always ProcessGroupNCCL")
        impl = nccl_choice(value)
        shown = "unset" if value is None else repr(value)
        return Resolution(device, name, impl, f"{TOGGLE_VAR} is {shown}")
    if name in ctx.names:
        impl = registered_implementation(name) if ctx.use_registered else None
        if impl is None:
            registrar = _registrar(name)
            creator = _creator_from_registrar(registrar) if registrar else None
            impl = _CREATORS.get(creator or "", creator)
        return Resolution(device, name, impl, f'explicit backend name "{name}"')
    return Resolution(device, name, None, f'"{name}" is not a backend this torch knows')


def resolve_backend(backend: str, environ: Mapping[str, str] | None = None) -> list[Resolution]:
    """What ``init_process_group(backend)`` builds, per device, under ``environ``.

    ``environ=None`` means this process: its environment, and an already registered "nccl"
    (whose choice is final) wins.  Accepts ``"nccl"`` and ``"cpu:gloo,cuda:nccl"`` forms.
    """
    ctx = _Ctx(
        environ=os.environ if environ is None else environ,
        use_registered=environ is None,
        names={ep.name for ep in _backend_eps()},
    )
    text = backend.strip().lower()
    if ":" in text:
        out = []
        for part in text.split(","):
            device, _, name = part.partition(":")
            out.append(_resolve_one(device.strip(), name.strip(), ctx))
        return out
    devices = {"gloo": ("cpu", "cuda"), "mpi": ("cpu", "cuda")}.get(text, ("cuda",))
    return [_resolve_one(d, text, ctx) for d in devices]


def backend_providers() -> dict[str, list[str]]:
    """Backend name -> the distributions whose entry points provide it, in discovery order.

    ncclx-migrate provides its own "nccl-legacy" shim, so "the name exists" and "torch
    has it" are different questions.
    """
    out: dict[str, list[str]] = {}
    for ep in _backend_eps():
        dist = getattr(ep, "dist", None)
        out.setdefault(ep.name, []).append(dist.name if dist is not None else "?")
    return out


def startable_backends(extra_paths: tuple[str, ...] = ()) -> list[str]:
    """Backend names a fresh interpreter's ``init_process_group`` can build: torch's built-ins
    and every ``torch.distributed.backends`` entry point, also those of distributions found in
    ``extra_paths`` (a PYTHONPATH that only the child will have).  The one list that
    ``ncclx doctor --backend`` and ``ncclx compare --arm`` check a name against."""
    names = {*BUILTIN_BACKENDS, *(ep.name.lower() for ep in _backend_eps())}
    if extra_paths:
        for dist in metadata.distributions(path=list(extra_paths)):
            names |= {ep.name.lower() for ep in dist.entry_points if ep.group == "torch.distributed.backends"}
    return sorted(names)


def registry_phase() -> Phase:
    """The phase read from torch's own backend registry (entry points + the registrar's default)."""
    names = {name for name, dists in backend_providers().items() if "torch" in dists}
    default_is_nccl2: bool | None = None
    if "nccl" in names:
        with contextlib.suppress(Exception):
            default_is_nccl2 = nccl_choice(None) == IMPL_NCCL2
    return phase_for_registry(names, default_is_nccl2)


def build_nccl_version() -> tuple[int, ...] | None:
    """``torch.cuda.nccl.version()``: the NCCL torch was COMPILED against (None on CPU builds)."""
    try:
        import torch.cuda.nccl as tnccl

        v = tnccl.version()
    except Exception:
        return None
    return tuple(int(p) for p in v[:3]) if isinstance(v, tuple) else None


def runtime_nccl_version() -> tuple[int, ...] | None:
    """``ncclGetVersion`` of the library this process loaded, through torch (None if absent)."""
    try:
        import torch.distributed as dist

        cls = getattr(dist, "ProcessGroupNCCL", None)
        fn = getattr(cls, "get_runtime_nccl_version", None)
        if fn is None:
            return None
        v = fn()
    except Exception:
        return None
    return tuple(int(p) for p in v[:3]) if isinstance(v, tuple) else None


class _DlInfo(ctypes.Structure):
    _fields_ = (
        ("dli_fname", ctypes.c_char_p),
        ("dli_fbase", ctypes.c_void_p),
        ("dli_sname", ctypes.c_char_p),
        ("dli_saddr", ctypes.c_void_p),
    )


def nccl_origin(sonames: tuple[str, ...] = ("libnccl.so.2", "librccl.so.1")) -> str | None:
    """The file whose ``ncclGetVersion`` this process calls (Linux), or None.

    Looks the symbol up the way the dynamic linker resolves torch's call: the global scope
    first (``LD_PRELOAD`` interposers live there), then the already-loaded library by soname
    (``RTLD_NOLOAD``: never loads anything new).  ``dladdr`` names the file.
    """
    fn: Any = None
    with contextlib.suppress(OSError, AttributeError):
        fn = ctypes.CDLL(None).ncclGetVersion
    if fn is None:
        for soname in sonames:
            with contextlib.suppress(OSError, AttributeError):
                fn = ctypes.CDLL(soname, mode=os.RTLD_NOLOAD | os.RTLD_LAZY).ncclGetVersion
                break
    if fn is None:
        return None
    try:
        dladdr = ctypes.CDLL(None).dladdr
        dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
        info = _DlInfo()
        if dladdr(ctypes.cast(fn, ctypes.c_void_p), ctypes.byref(info)) and info.dli_fname:
            return os.path.realpath(bytes(info.dli_fname).decode(errors="replace"))
    except (OSError, AttributeError):
        pass
    return None


def loaded_libraries(prefixes: tuple[str, ...] = ("libnccl", "librccl")) -> list[str]:
    """Files mapped into this process whose name starts with one of ``prefixes`` (Linux)."""
    out: list[str] = []
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                parts = line.split(None, 5)
                if len(parts) == 6:
                    path = parts[5].strip()
                    if os.path.basename(path).startswith(prefixes) and path not in out:
                        out.append(path)
    except OSError:
        pass
    return out
