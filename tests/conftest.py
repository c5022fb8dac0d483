"""Shared test helpers: run the installed `ncclx` command (in a pipe or on a terminal), find the
other torch venvs, run an expensive set-up once per session across pytest-xdist workers; the
markers each test folder implies."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import pty
import resource
import select
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

# Data-only cases are inputs, not tests (a multi-file case may hold tests/test_*.py of its own).
collect_ignore = ["fixtures"]

ROOT = Path(__file__).resolve().parents[1]


def ncclx_exe(python: str | None = None) -> str:
    """The installed `ncclx` console script next to ``python`` (default: this interpreter)."""
    bindir = Path(python or sys.executable).parent
    exe = bindir / "ncclx"
    if not exe.exists():
        found = shutil.which("ncclx")
        assert found, "the ncclx console script is not installed; run scripts/bootstrap.sh"
        return found
    return str(exe)


def run_ncclx(
    *args: str,
    python: str | None = None,
    env: dict[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    input: str | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """Run the real `ncclx` CLI in a subprocess, with a controlled environment."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("TORCH_", "NCCL", "NCCLX_"))}
    base["NO_COLOR"] = "1"
    if env:
        base.update(env)
    return subprocess.run(
        [ncclx_exe(python), *args],
        capture_output=True,
        text=True,
        env=base,
        cwd=cwd,
        input=input,
        timeout=timeout,
    )


@dataclass(frozen=True)
class TerminalRun:
    returncode: int
    terminal: str  # every byte the command wrote to the terminal (a pty turns "\n" into "\r\n")
    stdout: str  # what went to the pipe instead ("" when stdout was the terminal)
    stderr: str


# Written on the follower once the command has exited (see on_a_terminal): an OSC string,
# which a terminal ignores and no output of ncclx contains.
_END_OF_OUTPUT = b"\x1b]ncclx-test-end\x07"


def on_a_terminal(*args: str, terminal: tuple[str, ...] = ("stdout",), env: dict[str, str] | None = None,
                  cwd: str | os.PathLike[str] | None = None, timeout: float = 120) -> TerminalRun:
    """Run the real `ncclx ARGS` with the streams named in ``terminal`` ("stdout", "stderr") on a
    pseudo-terminal and the others in pipes; TERM=xterm, and no NO_COLOR/FORCE_COLOR/COLUMNS
    unless ``env`` sets them."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("TORCH_", "NCCL", "NCCLX_"))
            and k not in ("NO_COLOR", "FORCE_COLOR", "TERM", "COLUMNS")}
    assert terminal and set(terminal) <= {"stdout", "stderr"}, terminal
    leader, follower = pty.openpty()

    def to(name: str) -> int:
        return follower if name in terminal else subprocess.PIPE

    proc = subprocess.Popen([ncclx_exe(), *args], stdin=subprocess.DEVNULL, stdout=to("stdout"),
                            stderr=to("stderr"), cwd=cwd, env={**base, "TERM": "xterm", **(env or {})})
    # The follower stays open here until the command has exited and its output is read (with
    # every follower closed, Linux may answer EIO before the last output reaches the leader).
    # Once the command has exited, a marker is written behind its output on the follower: the
    # terminal holds all of it when the marker comes out of the leader, however long a loaded
    # machine takes to move it (no quiet period to guess).
    pipes = {p.fileno(): name for p, name in ((proc.stdout, "stdout"), (proc.stderr, "stderr")) if p}
    got = {name: b"" for name in ("terminal", "stdout", "stderr")}
    # Read every stream as it comes, so a full pipe cannot stall the command.
    fds, deadline = [leader, *pipes], time.monotonic() + timeout
    marked = False
    try:
        while fds:
            if not marked and proc.poll() is not None:
                os.write(follower, _END_OF_OUTPUT)
                marked = True
            if marked and fds == [leader] and _END_OF_OUTPUT in got["terminal"]:
                got["terminal"] = got["terminal"].replace(_END_OF_OUTPUT, b"", 1)
                break  # the command is gone, its pipes are closed and its output all read
            ready, _, _ = select.select(fds, [], [], min(0.1, max(0.0, deadline - time.monotonic())))
            if not ready:
                if time.monotonic() >= deadline:
                    proc.kill()
                    raise AssertionError(f"ncclx {' '.join(args)} still running after {timeout} s; "
                                         f"the terminal so far: {got['terminal']!r}")
                continue
            for fd in ready:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:  # EIO: the terminal is closed
                    chunk = b""
                if chunk:
                    got[pipes.get(fd, "terminal")] += chunk
                else:
                    fds.remove(fd)
        returncode = proc.wait(timeout=timeout)
    finally:
        os.close(follower)
        os.close(leader)
        for p in (proc.stdout, proc.stderr):
            if p:
                p.close()
    return TerminalRun(returncode, *(got[n].decode() for n in ("terminal", "stdout", "stderr")))


def other_python(var: str) -> str:
    """The interpreter of another venv named by env ``var`` (set by scripts/test.sh)."""
    path = os.environ.get(var)
    if path and Path(path).exists():
        return path
    if os.environ.get("CI"):
        pytest.fail(f"{var} is not set in CI: scripts/test.sh must set it")
    if not path:
        pytest.skip(f"{var} not set: scripts/test.sh sets it (pytest was run directly)")
    venv = Path(path).parents[1].name  # .venv-2.13/bin/python -> .venv-2.13
    pytest.skip(f"{venv} does not exist: scripts/test.sh creates it, `scripts/test.sh --quick` does not")


# The venv of each supported torch release: scripts/test.sh exports the variables.
RELEASE_PYTHON_VARS = {"2.13": "NCCLX_TEST_PY213", "2.14": "NCCLX_TEST_PY214", "2.15": "NCCLX_TEST_PY215"}


def torch_python(release: str) -> str:
    """An interpreter whose torch is ``release`` ("2.14"): its NCCLX_TEST_PY* variable, or
    this interpreter when its torch is that release (the main run: 2.15)."""
    from ncclx_migrate._torch.probe import installed_torch_version
    from ncclx_migrate._torch.releases import release_of

    var = RELEASE_PYTHON_VARS[release]
    mine = installed_torch_version()
    if not os.environ.get(var) and mine is not None and release_of(mine) == release:
        return sys.executable
    return other_python(var)


def once(tmp_path_factory: pytest.TempPathFactory, name: str, make: Callable[[Path], Any]) -> tuple[Path, Any]:
    """``make(folder)`` once per test session, across all pytest-xdist workers: the first worker
    to ask runs it under a file lock while the others wait, then every caller gets ``folder`` and
    the (JSON) result.  For set-ups that start torch processes (a gloo job, a torch probe)."""
    base = tmp_path_factory.getbasetemp()
    root = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "once"
    folder = root / name.replace(os.sep, "_")
    folder.mkdir(parents=True, exist_ok=True)
    return folder, _made_once(Path(f"{folder}.json"), lambda: make(folder))


def _made_once(done: Path, make: Callable[[], Any]) -> Any:
    """``make()``'s JSON result, kept in ``done``: the first process to ask computes it under a
    file lock beside it while the others wait, then all read it."""
    with open(f"{done}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not done.exists():
            tmp = done.with_name(f"{done.name}.tmp{os.getpid()}")
            tmp.write_text(json.dumps(make()))
            tmp.replace(done)
        return json.loads(done.read_text())


def collected(name: str, make: Callable[[], Any]) -> Any:
    """``make()``'s (JSON) result, computed once for all pytest-xdist workers and runs while
    src/ and tests/fixtures/ stay as they are: for test parameters that take the codemod to
    find (every worker collects every module, the 2.13/2.14 runs too).  Kept in .cache/collect/
    under a hash of those files, written under a file lock."""
    digest = hashlib.sha256(name.encode())
    for path in sorted([*(ROOT / "tests" / "fixtures").rglob("*"), *(ROOT / "src").rglob("*.py")]):
        if path.is_file():
            digest.update(b"\0" + str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    folder = ROOT / ".cache" / "collect"
    folder.mkdir(parents=True, exist_ok=True)
    return _made_once(folder / f"{name}-{digest.hexdigest()[:24]}.json", make)


def has_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


# Fixtures that start torch processes: a test using one is `slow` wherever it lives, so
# `scripts/test.sh --quick` (-m "not slow and not torch and not browser") leaves it out.
SLOW_FIXTURES = frozenset({"scenario", "probe", "user_script"})
# A test outside `slow` whose own and child processes' CPU time passes this is named at the
# end of the run (starting torch costs about 2.7 CPU seconds here; an `ncclx` command well
# under one).
# CPU time, not wall time: it reads the same on an idle machine and a loaded one.
QUICK_CPU_S = 2.5


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if SLOW_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
    if has_cuda():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run scripts/gpu-tests.sh on one)")
    for item in items:
        if item.get_closest_marker("gpu") is not None:  # not item.keywords: that also holds directory names
            item.add_marker(skip)


def _cpu_s() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Any:
    start = _cpu_s()
    try:
        return (yield)
    finally:  # a module or session fixture's cost lands on the first test that uses it
        item.user_properties.append(("setup_cpu_s", round(_cpu_s() - start, 2)))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    start = _cpu_s()
    try:
        return (yield)
    finally:  # the processes a test started and waited for count; pytest-xdist forwards this
        item.user_properties.append(("cpu_s", round(_cpu_s() - start, 2)))


# The suite is CPU-bound on 2 cores: what a test costs in CPU, not its wall time under load,
# is what the whole command's time is made of.
COSTLIEST = 20


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """List the tests that cost the most CPU (set-up and call, their processes included), and,
    with NCCLX_TEST_COSTS=1, name the tests `--quick` runs that cost seconds of CPU: they belong
    in `slow` (or need a cheaper set-up), or `scripts/test.sh --quick` stops being quick."""
    cost: dict[str, float] = {}
    for r in (r for reports in terminalreporter.stats.values() for r in reports):
        props = dict(getattr(r, "user_properties", ()))
        if getattr(r, "when", None) in ("setup", "call") and getattr(r, "nodeid", None):
            cost[r.nodeid] = max(cost.get(r.nodeid, 0.0), props.get("setup_cpu_s", 0) + props.get("cpu_s", 0))
    if cost:
        terminalreporter.section(f"{COSTLIEST} costliest tests in CPU seconds (set-up + call, with their processes)")
        for nodeid, cpu in sorted(cost.items(), key=lambda kv: -kv[1])[:COSTLIEST]:
            terminalreporter.line(f"{cpu:6.1f} s CPU  {nodeid}")
    heavy = sorted(
        ((dict(r.user_properties)["cpu_s"], r.nodeid) for r in terminalreporter.stats.get("passed", [])
         if r.when == "call" and dict(r.user_properties).get("cpu_s", 0) > QUICK_CPU_S
         and not {"slow", "torch", "browser"} & set(r.keywords)),
        reverse=True,
    )
    if heavy and os.environ.get("NCCLX_TEST_COSTS"):  # for maintainers: a user running the tests needs none of it
        terminalreporter.section("tests scripts/test.sh --quick runs that cost seconds of CPU")
        for cpu, nodeid in heavy:
            terminalreporter.line(f"{cpu:6.1f} s CPU  {nodeid}: mark it `slow` or make it cheaper")


@pytest.fixture
def reparse_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every pass the codemod makes over a tree a fix built is checked against a pass over the
    fixed text parsed again (``NCCLX_CHECK_REPARSE=1``, _python/_engine.py). The data-only cases
    use it (every fixture shape, each kind that holds Python): in every in-process test it cost
    a sixth of their CPU for no shape they do not have."""
    from ncclx_migrate._migrate._python import _engine

    monkeypatch.setattr(_engine, "_REPARSE_CHECK", True)
