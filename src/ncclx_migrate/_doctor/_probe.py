"""The probe level: a real process group on this node, bounded by ``--timeout``.

Starts one ``_probe_worker`` process per rank (2 gloo ranks where no GPU is visible, one
rank per visible GPU, at most 8, for NCCL) with the job's own environment, so "nccl"
resolves exactly as it will for the job.  A rank that crashes or hangs is reported, never
inherited: stragglers are killed at the deadline.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from .._words import count
from ._facts import NO_GPU_WHY, Facts
from ._model import CheckResult, Status

__all__ = ["free_port", "run_probe", "wait_or_kill"]

K = TypeVar("K")
MAX_GPU_RANKS = 8
SUITE = ("all_reduce", "broadcast", "all_gather", "reduce_scatter", "barrier", "send_recv")
RECORDED = ("all_reduce", "broadcast", "all_gather")  # collectives every recorder keeps


def free_port() -> int:
    """A free TCP port on 127.0.0.1 for a rendezvous store."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_or_kill(procs: Mapping[K, subprocess.Popen[bytes]], deadline: float,
                 poll: Callable[[], None] = lambda: None) -> set[K]:
    """Wait until every process ended or ``deadline`` (monotonic) passed, calling ``poll``
    every 0.1 s; then kill the process group of each one still running (they were started
    with ``start_new_session=True``, so their children go too).  Returns the keys killed.
    Whatever happens meanwhile (Ctrl-C included), nothing is left running."""
    killed: set[K] = set()
    try:
        while time.monotonic() < deadline and any(p.poll() is None for p in procs.values()):
            poll()
            time.sleep(0.1)
    finally:
        for key, proc in procs.items():
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                killed.add(key)
    return killed


def _plan(f: Facts) -> tuple[str, int, str]:
    """(backend name to init, world size, why)."""
    gpus = f.gpu_count or 0
    named = f.options.backend
    if named:
        return named, (min(gpus, MAX_GPU_RANKS) or 1) if "gloo" not in named else 2, f"--backend {named}"
    if gpus > 0 and f.build is not None and f.build.nccl_available:
        return "nccl", min(gpus, MAX_GPU_RANKS), f"{count(gpus, 'GPU')} visible"
    return "gloo", 2, NO_GPU_WHY if gpus == 0 else "this torch has no NCCL"


def _launch(backend: str, world: int, timeout: float, workdir: Path, env: dict[str, str],
            progress: Callable[[str], None] = lambda text: None) -> dict[int, Any]:
    port = free_port()
    procs: dict[int, subprocess.Popen[bytes]] = {}
    logs: dict[int, Any] = {}
    for rank in range(world):
        rank_env = {
            **env, "RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_RANK": str(rank),
            "LOCAL_WORLD_SIZE": str(world), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
            "NCCLX_PROBE_BACKEND": backend, "NCCLX_PROBE_TIMEOUT": str(timeout),
            "NCCLX_PROBE_OUT": str(workdir / f"rank{rank}.json"),
        }
        if rank == 0:
            rank_env["NCCLX_PROBE_STAGE"] = str(workdir / "stage")
        rank_env.pop("NCCLX_HANG_DUMP", None)  # the probe must not start ncclx's watchdog
        logs[rank] = open(workdir / f"rank{rank}.log", "wb")  # closed in the finally below
        procs[rank] = subprocess.Popen(
            [sys.executable, "-m", "ncclx_migrate._doctor._probe_worker"],
            env=rank_env, stdout=logs[rank], stderr=subprocess.STDOUT, start_new_session=True,
        )
    stage_file = workdir / "stage"

    def poll() -> None:
        try:
            stage = stage_file.read_text(encoding="utf-8") or "starting"
        except OSError:
            stage = "starting"
        progress(f"probe: {count(world, 'rank')}, {stage}...")

    try:
        # import time on top of the collective timeout
        killed = wait_or_kill(procs, time.monotonic() + timeout + 5, poll)
    finally:
        for log in logs.values():
            log.close()
    results: dict[int, Any] = {r: {"error": f"did not finish within {timeout:g}s (killed)"} for r in killed}
    for rank, proc in procs.items():
        if rank in results:
            continue
        path = workdir / f"rank{rank}.json"
        if path.exists():
            results[rank] = json.loads(path.read_text(encoding="utf-8"))
        else:
            tail = (workdir / f"rank{rank}.log").read_bytes().decode(errors="replace").strip().splitlines()[-3:]
            sig = -proc.returncode if proc.returncode < 0 else None
            how = f"killed by {signal.Signals(sig).name}" if sig else f"exited {proc.returncode}"
            results[rank] = {"error": f"the rank {how} without a result", "log": tail}
    return results


def _ms(value: Any) -> str:
    return f"{value:.1f} ms" if isinstance(value, (int, float)) else "n/a"


def run_probe(f: Facts) -> CheckResult:
    cid = "probe"
    if f.build is None:
        return CheckResult(cid, Status.SKIP, "torch is not installed")
    if not f.build.distributed:
        return CheckResult(cid, Status.SKIP, "this torch has no torch.distributed")
    backend, world, why = _plan(f)
    timeout = f.options.timeout
    with tempfile.TemporaryDirectory(prefix="ncclx-probe-") as tmp:
        results = _launch(backend, world, timeout, Path(tmp), dict(f.environ), f.progress)
    r0 = results.get(0, {})
    details: dict[str, Any] = {"backend": backend, "world_size": world, "why": why, "ranks": results}
    broken = {r: res["error"] for r, res in sorted(results.items()) if "error" in res}
    label = f'init_process_group("{backend}") x{world}' + ("" if why == NO_GPU_WHY else f" ({why})")
    if broken:
        first = next(iter(broken.items()))
        return CheckResult(
            cid, Status.FAIL, f"{label}: rank {first[0]}: {first[1]}"
            + (f" (and {count(len(broken) - 1, 'more rank')})" if len(broken) > 1 else ""),
            _failure_remedy(f, backend, timeout, list(broken.values())), details,
        )
    impl = str(r0.get("impl", backend))
    details["implementation"] = impl
    wrong = {f"rank {r}: {op}": res["ops"][op] for r, res in sorted(results.items())
             for op in SUITE if not str(res["ops"].get(op, "ok")).startswith(("ok", "unsupported"))}
    unsupported = sorted({op for res in results.values() for op in SUITE
                          if str(res["ops"].get(op, "")).startswith("unsupported")})
    if wrong:
        where, what = next(iter(wrong.items()))
        return CheckResult(cid, Status.FAIL, f"{label} built {impl}, but {where} {what}",
                           "a collective returned a wrong result: check the NCCL/driver install on this node",
                           details)
    ran = [op for op in SUITE if op not in unsupported]
    msg = f"{label} built {impl}: {', '.join(ran)} correct in {_ms(r0.get('suite_ms'))}"
    if unsupported:
        msg += f" ({', '.join(unsupported)} unsupported by {impl})"
    status, remedy = Status.OK, ""
    fr = r0.get("fr", {})
    size = _buffer_size(f)
    recorded = set(fr.get("ops", []))
    if "error" in fr:
        msg += f"; flight recorder unreadable: {fr['error']}"
        status, remedy = Status.WARN, "see the flight-recorder check"
    elif size != 0 and not set(RECORDED) <= recorded:
        missing = sorted(set(RECORDED) - recorded)
        msg += f"; the flight recorder ({fr.get('recorder')}) missed {', '.join(missing)}"
        status, remedy = Status.WARN, "a hang would leave an incomplete trace; see the flight-recorder check"
    elif size != 0:
        msg += f"; flight recorder ({fr.get('recorder')}) recorded {fr.get('entries')} entries"
    else:
        msg += "; flight recorder off (buffer size 0)"
    rc = r0.get("reconfigure", {})
    if rc.get("supported"):
        msg += (f"; reconfigure {_ms(rc.get('reconfigure2_ms'))} vs destroy+re-init "
                f"{_ms(rc.get('reinit_ms'))}")
        if not rc.get("result_ok", True):
            status, remedy = Status.FAIL, "all_reduce after _reconfigure returned a wrong result"
    elif rc.get("error"):
        msg += f"; reconfigure failed: {rc['error']}"
        status = Status.WARN if status is Status.OK else status
        remedy = remedy or "see the fast-reconfigure check"
    elif rc:
        msg += f"; no reconfigure ({rc.get('why')}; destroy+re-init {_ms(rc.get('reinit_ms'))})"
    return CheckResult(cid, status, msg, remedy, details)


def _failure_remedy(f: Facts, backend: str, timeout: float, errors: list[str]) -> str:
    """The fix for the probe's real failure: its deadline, a missing GPU, or the backend itself."""
    text = " ".join(errors).lower()
    if "did not finish within" in text or "timed out" in text or "timeout" in text:
        return (f"raise --timeout (it was {timeout:g}s; starting the ranks and importing torch alone "
                "takes a few seconds); if it still times out, the backend hangs on this node")
    uses_gpu = "gloo" not in backend.lower()
    if uses_gpu and (f.gpu_count == 0 or "cuda device" in text or "no gpus found" in text
                     or "no nvidia driver" in text):
        return (f'"{backend}" needs a GPU (none here, see gpu-binding): run the probe on a GPU node, '
                "or use --backend gloo on CPU-only machines")
    if uses_gpu:
        return "run the job's init on this node with NCCL_DEBUG=INFO TORCH_CPP_LOG_LEVEL=INFO to see why"
    return "check that 127.0.0.1 ports are free and torch.distributed works (the rank logs are in --format json)"


def _buffer_size(f: Facts) -> int:
    from .._torch.envvars import FR_BUFFER_NAMES

    for name in FR_BUFFER_NAMES:
        value = f.environ.get(name)
        if value is not None:
            try:
                return int(value)
            except ValueError:
                return 2000
    return 2000
