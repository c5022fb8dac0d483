"""Run the arms one after the other, each bounded by what is left of ``--timeout``.

Each arm is one ``_worker`` launcher (a fresh interpreter with the arm's environment) that
forks the ranks; they meet on a TCPStore on 127.0.0.1 that rank 0 hosts.  Waiting and
killing are the doctor's probe's (``wait_or_kill``): a rank that hangs is killed at the
deadline and named with what its stage file says it was doing.  With the flight recorder
on, every rank runs ncclx's hang watchdog, and the dumps of a hung arm are read with
``ncclx fr analyze``'s analysis.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._doctor._probe import free_port, wait_or_kill
from .._envvars import FR_BUFFER_NAMES
from ._spec import Arm

__all__ = ["NO_REPORT", "ArmRun", "Placement", "RankOut", "Settings", "parse_rank", "rank_files", "run_arm"]

NO_REPORT = "no report reached rank 0 before the deadline"
_STOP_WORDS = ("timed out", "timeout", "connection closed", "reset by peer", "broken pipe")


@dataclass(frozen=True)
class Settings:
    world: int
    device: str  # "cpu" or "cuda"
    sizes: list[int]
    dtypes: list[str]
    collectives: list[str]
    warmup: int
    iters: int
    timeout: float  # for everything, both arms


@dataclass
class RankOut:
    head: dict[str, Any] = field(default_factory=dict)
    cases: list[dict[str, Any]] = field(default_factory=list)
    done: bool = False
    stage: str = "starting"


@dataclass
class ArmRun:
    arm: Arm
    ranks: dict[int, RankOut]
    seconds: float
    killed: bool  # the deadline passed with ranks still running
    log: list[str]  # the launcher's last lines
    fr: dict[str, Any] | None = None  # the flight-recorder analysis of a hung arm

    @property
    def impl(self) -> str | None:
        return next((str(r.head["impl"]) for r in self.ranks.values() if "impl" in r.head), None)

    @property
    def init_errors(self) -> dict[int, str]:
        return {r: str(o.head["error"]) for r, o in sorted(self.ranks.items()) if "error" in o.head}

    @property
    def hung(self) -> dict[int, str]:
        """rank -> what it was doing when it stopped without finishing (none when all finished)."""
        return {r: o.stage for r, o in sorted(self.ranks.items()) if not o.done and "error" not in o.head}


def _fr_on(env: dict[str, str]) -> bool:
    for name in FR_BUFFER_NAMES:
        if name in env:
            return env[name].strip() not in ("0", "")
    return True


def _package_root() -> str:
    return str(Path(__file__).resolve().parents[2])


def parse_rank(text: str, stage: str) -> RankOut:
    """One rank's ``rank<R>.jsonl`` (the head line, a line per case, ``done``) and stage."""
    got = RankOut(stage=stage or "starting")
    for n, line in enumerate(text.splitlines()):
        try:
            rec = json.loads(line)
        except ValueError:
            continue  # a line cut short when the rank was killed
        if n == 0 and "rank" in rec:
            got.head = rec
        elif rec.get("done"):
            got.done = True
        else:
            got.cases.append(rec)
    return got


def rank_files(out: Path, rank: int) -> tuple[str, str]:
    """(the rank's records, its stage) as the worker left them ("" when absent)."""
    texts = []
    for name in (f"rank{rank}.jsonl", f"rank{rank}.stage"):
        try:
            texts.append((out / name).read_text(encoding="utf-8"))
        except OSError:
            texts.append("")
    return texts[0], texts[1]


@dataclass(frozen=True)
class Placement:
    """Which ranks this process starts and where they meet: all of them on this node (the
    default: rank 0 hosts a store on a free 127.0.0.1 port), or one rank of a torchrun/srun
    job (``--cluster``: the job's own store, under the job's key prefix)."""

    ranks: list[int]
    local_ranks: list[int]
    addr: str = "127.0.0.1"
    port: int | None = None
    host_store: bool = True
    prefix: str = "ncclx-compare"


def run_arm(arm: Arm, s: Settings, deadline: float, workdir: Path, base_env: dict[str, str],
            progress: Callable[[str], None] = lambda text: None, where: Placement | None = None) -> ArmRun:
    where = where or Placement(list(range(s.world)), list(range(s.world)))
    out = workdir / arm.label
    out.mkdir(parents=True, exist_ok=True)
    env = arm.environ(base_env)
    env.pop("NCCLX_HANG_DUMP", None)  # the watchdog is ours to start, with our limit
    # The worker must be this very ncclx_migrate, after whatever the arm puts first.
    env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), _package_root()) if p)
    budget = max(1.0, deadline - time.monotonic())
    fr_seconds = None
    if _fr_on(env):
        (out / "fr").mkdir(exist_ok=True)
        env["TORCH_FR_DUMP_TEMP_FILE"] = str(out / "fr" / "rank_")
        fr_seconds = max(1.0, min(60.0, budget / 4))
    plan = {
        "backend": arm.backend, "world": s.world, "ranks": where.ranks, "local_ranks": where.local_ranks,
        "addr": where.addr, "port": where.port or free_port(), "host_store": where.host_store,
        "prefix": f"{where.prefix}/{arm.label}", "device": s.device,
        "sizes": s.sizes, "dtypes": s.dtypes, "collectives": s.collectives, "warmup": s.warmup,
        "iters": s.iters, "pg_timeout": max(1.0, budget * 0.6), "out": str(out), "fr_seconds": fr_seconds,
        "stop_words": list(_STOP_WORDS),
    }
    (out / "plan.json").write_text(json.dumps(plan), encoding="utf-8")
    start = time.monotonic()
    first = where.ranks[0]
    with open(out / "launcher.log", "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "ncclx_migrate._compare._worker", str(out / "plan.json")],
                                env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

        def poll() -> None:
            stage = rank_files(out, first)[1] or "starting"
            progress(f"arm {arm.label} ({arm.backend}): {stage}...")

        killed = bool(wait_or_kill({0: proc}, deadline, poll))
    tail = (out / "launcher.log").read_bytes().decode(errors="replace").strip().splitlines()[-5:]
    ranks = {r: parse_rank(*rank_files(out, r)) for r in where.ranks}
    run = ArmRun(arm, ranks, round(time.monotonic() - start, 2), killed, tail)
    if run.hung and fr_seconds is not None:
        run.fr = _analyze_dumps(out / "fr")
    return run


def _analyze_dumps(folder: Path) -> dict[str, Any]:
    """``ncclx fr analyze FOLDER``'s diagnosis, or why there is none."""
    from .._fr._analyze import analyze
    from .._fr._load import DumpError, load_dir, show
    from .._fr._render import render_human, to_json

    if not any(folder.iterdir()):
        return {"folder": str(folder), "note": "no rank wrote a flight-recorder dump"}
    try:
        diag = analyze(load_dir(folder, None))
    except DumpError as exc:
        return {"folder": str(folder), "note": f"the dumps could not be read: {show(exc)}"}
    return {"folder": str(folder), "text": render_human(diag), "problem": diag.problem,
            "analysis": to_json(diag)}
