"""Run a script several times at once (the ranks of a gloo job) as forks of one interpreter
that imported torch once: starting torch costs seconds of CPU per process, a fork almost none.

    python forked.py OUTPUT RUNS_JSON

RUNS_JSON is a list of [script, argument list, environment variables].  Run N gets
``sys.argv = [SCRIPT, *ARGS]`` and its variables in ``os.environ``, and runs
SCRIPT as ``__main__`` at module level, so it ends as ``python SCRIPT ARGS`` would (an uncaught
error prints its traceback, runs the excepthook and atexit, exits 1); its stdout goes to
OUTPUTN.out and its stderr to OUTPUTN.err (both to OUTPUTN.out when FORKED_MERGE=1 is in the
environment).  This process waits for every run and prints one JSON line: [exit code (as
Popen's returncode), seconds from the start] per run.  The environment shared by the runs
is there from the start, so what torch reads when it is imported is what a fresh interpreter
reads; a run's own variables arrive after that, so they may only be ones read later (as
TORCH_DIST_USE_NCCL2, read when "nccl" is first registered, or ncclx_migrate's).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Ran:
    returncode: int
    stdout: str  # stdout and stderr together when merged
    stderr: str
    seconds: float


def run_forked(
    script: Path | list[Path],
    runs: list[list[str]],
    output: Path,
    *,
    env: dict[str, str],
    run_env: list[dict[str, str]] | None = None,
    cwd: Path | None = None,
    merge: bool = False,
    timeout: float = 120,
    python: str | None = None,
) -> list[Ran]:
    """Each run of ``script`` (or of its own script) with its arguments (and its ``run_env``,
    see the module's doc); ``output`` is the prefix of their files.  Past ``timeout`` every
    run is killed."""
    scripts = script if isinstance(script, list) else [script] * len(runs)
    spec = [[str(scripts[n]), argv, (run_env or [{}] * len(runs))[n]] for n, argv in enumerate(runs)]
    proc = subprocess.Popen(
        [python or sys.executable, __file__, str(output), json.dumps(spec)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**env, "FORKED_MERGE": "1"} if merge else env,
        cwd=cwd,
        start_new_session=True,  # the runs are its children: a hang kills them all
    )
    try:
        out, _ = proc.communicate(timeout=timeout)
        note = ""
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):  # it may have ended since
            os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        note = f"\n<killed after {timeout:g} s>"
    reports = [line for line in out.splitlines() if line.startswith("[")]
    # none when the launcher was killed, or failed before its runs ended
    codes = json.loads(reports[-1]) if reports else [[proc.returncode, timeout if note else 0.0]] * len(runs)
    ran = []
    for n, (code, seconds) in enumerate(codes):
        got = [Path(f"{output}{n}.{kind}") for kind in ("out", "err")]
        stdout, stderr = (p.read_text() if p.exists() else "" for p in got)
        if not reports:
            stderr += f"{note}\n<the launcher said:>\n{out}"
        ran.append(Ran(code, stdout, stderr, seconds))
    return ran


def _fork_runs() -> list[str]:
    """In each child: redirect its streams and return its argv; the parent never returns."""
    output, runs = sys.argv[1], json.loads(sys.argv[2])
    merge = os.environ.pop("FORKED_MERGE", "") == "1"
    import torch.distributed  # noqa: F401 -- the seconds of CPU each run would spend again

    start = time.monotonic()
    sys.stdout.flush()
    sys.stderr.flush()
    pids = {}
    for n, (script, argv, own_env) in enumerate(runs):
        pid = os.fork()
        if pid == 0:
            os.environ.update(own_env)
            out = os.open(f"{output}{n}.out", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            err = out if merge else os.open(f"{output}{n}.err", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(out, 1)
            os.dup2(err, 2)
            os.close(out)
            if err != out:
                os.close(err)
            return [script, *argv]
        pids[pid] = n
    done = {}
    while pids:
        pid, status = os.wait()
        done[pids.pop(pid)] = [os.waitstatus_to_exitcode(status), round(time.monotonic() - start, 1)]
    print(json.dumps([done[n] for n in range(len(runs))]), flush=True)
    os._exit(0)


if __name__ == "__main__":
    import runpy

    sys.path.pop(0)  # this folder (tests/) is not the scripts'
    sys.argv = _fork_runs()
    sys.path.insert(0, os.path.dirname(os.path.abspath(sys.argv[0])))  # as `python SCRIPT` sets it
    runpy.run_path(sys.argv[0], run_name="__main__")
