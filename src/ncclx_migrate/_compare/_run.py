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
from .._torch.envvars import FR_BUFFER_NAMES
from ._spec import Arm, human_size

__all__ = ["NO_REPORT", "ArmRun", "Placement", "RankOut", "Settings", "case_list", "parse_rank", "rank_files",
           "run_arms", "schedule"]

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
    rounds: int = 20  # paired rounds per case (and as many again for a case flagged)

    @property
    def block_iters(self) -> int:
        """Timed calls per block: ``iters`` spread over the rounds (at least one)."""
        return max(1, round(self.iters / self.rounds))


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
    startup: float = 0.0  # seconds until every rank had its process group (both arms start together)

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


@dataclass
class _Side:
    """One arm while it runs: its launcher, the pipes to each of its ranks, what it has said."""

    arm: Arm
    out: Path
    proc: subprocess.Popen[bytes]
    orders: dict[int, int]  # rank -> the fd the parent writes orders to
    acks: dict[int, Any]  # rank -> the file the rank's acks come from
    fr_seconds: float | None
    alive: bool = True  # still takes orders (False: could not start, stopped or hung)
    killed: bool = False
    seconds: float = 0.0  # spent in this arm's blocks
    startup: float = 0.0
    log: list[str] = field(default_factory=list)


def _start(arm: Arm, s: Settings, cases: list[tuple[str, str, int]], budget: float, workdir: Path,
           base_env: dict[str, str], where: Placement) -> _Side:
    out = workdir / arm.label
    out.mkdir(parents=True, exist_ok=True)
    env = arm.environ(base_env)
    env.pop("NCCLX_HANG_DUMP", None)  # the watchdog is ours to start, with our limit
    # The worker must be this very ncclx_migrate, after whatever the arm puts first.
    env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), _package_root()) if p)
    fr_seconds = None
    if _fr_on(env):
        (out / "fr").mkdir(exist_ok=True)
        env["TORCH_FR_DUMP_TEMP_FILE"] = str(out / "fr" / "rank_")
        fr_seconds = max(1.0, min(60.0, budget / 4))
    theirs, orders, acks = [], {}, {}
    for rank in where.ranks:
        order_r, order_w = os.pipe()
        ack_r, ack_w = os.pipe()
        theirs.append([order_r, ack_w])
        orders[rank] = order_w
        acks[rank] = os.fdopen(ack_r, "r", encoding="utf-8")
    plan = {
        "backend": arm.backend, "world": s.world, "ranks": where.ranks, "local_ranks": where.local_ranks,
        "addr": where.addr, "port": where.port or free_port(), "host_store": where.host_store,
        "prefix": f"{where.prefix}/{arm.label}", "device": s.device, "cases": cases, "warmup": s.warmup,
        "block_iters": s.block_iters, "pg_timeout": max(1.0, budget * 0.4), "out": str(out),
        "fr_seconds": fr_seconds, "stop_words": list(_STOP_WORDS), "fds": theirs,
    }
    (out / "plan.json").write_text(json.dumps(plan), encoding="utf-8")
    with open(out / "launcher.log", "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "ncclx_migrate._compare._worker", str(out / "plan.json")],
                                env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                pass_fds=[fd for pair in theirs for fd in pair])
    for pair in theirs:
        for fd in pair:
            os.close(fd)
    return _Side(arm, out, proc, orders, acks, fr_seconds)


def _tell(side: _Side, word: str) -> None:
    for fd in side.orders.values():
        try:
            os.write(fd, (word + "\n").encode())
        except OSError:
            pass  # that rank is gone; its silence says so


def _hear(side: _Side, deadline: float, poll: Callable[[], None]) -> set[str] | None:
    """Every rank's next word ("ready", "error", "ok", "stop"; "" for a rank that died), or
    None when the deadline passed first."""
    import select

    words: dict[int, str] = {}
    waiting = dict(side.acks)
    while waiting:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        ready, _, _ = select.select(list(waiting.values()), [], [], min(left, 0.2))
        for rank, fh in list(waiting.items()):
            if fh in ready:
                words[rank] = fh.readline().strip()
                del waiting[rank]
        poll()
    return set(words.values())


def schedule(n_cases: int, rounds: range, arms: int = 2) -> list[tuple[int, int, int]]:
    """(round, case, arm) in run order: round after round, every case once per round, the two
    arms back to back, A first in one round and B first in the next for every case (and the
    order alternating from case to case within a round), so that a drift of the node's speed,
    or whatever going first or second costs, falls on both arms alike."""
    out: list[tuple[int, int, int]] = []
    for r in rounds:
        for i in range(n_cases):
            # By round and case, not by a running count: with an even number of cases a count
            # would give each case the same order in every round.
            pair = (0, 1) if (r + i) % 2 == 0 else (1, 0)
            out.extend((r, i, k) for k in pair[:arms])
    return out


def run_arms(arms: list[Arm], s: Settings, deadline: float, workdir: Path, base_env: dict[str, str],
             progress: Callable[[str], None] = lambda text: None, where: Placement | None = None,
             confirm: Callable[[list[ArmRun]], list[int]] | None = None) -> list[ArmRun]:
    """Both arms' ranks alive together, each arm in its own interpreter and process group;
    the parent tells one arm at a time to run one short block of one case, in ``schedule``'s
    order.  ``confirm`` (given the runs so far) names the case indices to measure again in as
    many fresh rounds before anything is named."""
    where = where or Placement(list(range(s.world)), list(range(s.world)))
    cases = case_list(s)
    budget = max(1.0, deadline - time.monotonic())
    began = time.monotonic()
    sides = [_start(arm, s, cases, budget, workdir, base_env, where) for arm in arms]
    now: list[str] = ["starting"]

    def poll() -> None:
        progress(now[0])

    def step(side: _Side, order: str, what: str) -> None:
        now[0] = what
        begin = time.monotonic()
        _tell(side, order)
        got = _hear(side, deadline, poll)
        side.seconds += time.monotonic() - begin
        if got is None:  # the deadline: this arm hangs (its stage files say where)
            side.alive = False
            side.killed = True
        elif got != {"ok"} and got != {"ready"}:
            side.alive = False  # could not start, the group broke, or a rank died

    try:
        for side in sides:
            now[0] = f"arm {side.arm.label} ({side.arm.backend}): starting..."
            got = _hear(side, deadline, poll)
            side.startup = time.monotonic() - began
            if got is None:
                side.alive, side.killed = False, True
            elif got != {"ready"}:
                side.alive = False
        if all(side.alive for side in sides):
            _rounds(sides, schedule(len(cases), range(s.rounds)), cases, s, step)
            if confirm is not None and all(side.alive for side in sides):
                again = confirm(_collect(sides, where, None))
                if again:
                    _rounds(sides, [(r, again[i], k) for r, i, k in
                                    schedule(len(again), range(s.rounds, 2 * s.rounds))], cases, s, step)
        for side in sides:
            if side.alive:
                _tell(side, "quit")
        grace = max(deadline, time.monotonic() + 5.0)
        for side in sides:  # a hung arm is killed now; the others were told to finish
            if side.killed:
                wait_or_kill({0: side.proc}, time.monotonic(), lambda: None)
        for side in sides:
            if not side.killed:
                side.killed = bool(wait_or_kill({0: side.proc}, grace if side.alive else deadline, poll))
    finally:
        for side in sides:
            if side.proc.poll() is None:
                wait_or_kill({0: side.proc}, time.monotonic(), lambda: None)
            for fd in side.orders.values():
                os.close(fd)
            for fh in side.acks.values():
                fh.close()
    return _collect(sides, where, s)


def _rounds(sides: list[_Side], order: list[tuple[int, int, int]], cases: list[tuple[str, str, int]],
            s: Settings, step: Callable[[_Side, str, str], None]) -> None:
    total = max(1, len(order))
    for n, (r, i, k) in enumerate(order):
        side = sides[k]
        if not all(x.alive for x in sides):
            return  # one arm stopped: nothing is paired any more
        coll, dtype, nbytes = cases[i]
        step(side, f"run {i} {r}", f"round {r + 1}: {coll} {dtype} {human_size(nbytes)}, arm {side.arm.label} "
                                   f"({100 * n // total}%)...")


def _collect(sides: list[_Side], where: Placement, s: Settings | None) -> list[ArmRun]:
    runs = []
    for side in sides:
        tail = (side.out / "launcher.log").read_bytes().decode(errors="replace").strip().splitlines()[-5:]
        ranks = {r: parse_rank(*rank_files(side.out, r)) for r in where.ranks}
        run = ArmRun(side.arm, ranks, round(side.seconds, 2), side.killed, tail, startup=round(side.startup, 2))
        if s is not None and run.hung and side.fr_seconds is not None:
            run.fr = _analyze_dumps(side.out / "fr")
        runs.append(run)
    return runs


def case_list(s: Settings) -> list[tuple[str, str, int]]:
    """Every (collective, dtype, size) the run measures, in report order."""
    return [(c, t, n) for c in s.collectives if not (c == "sendrecv" and s.world < 2)
            for t in s.dtypes for n in s.sizes]


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
