"""Helpers for the backend tests: user scripts and gloo ranks in real subprocesses."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from ..forked import run_forked

WARNING_RE = re.compile(r"^(?P<file>.+?):(?P<line>\d+): (?P<category>\w+): (?P<text>.*)$", re.M)


@dataclass
class Warned:
    file: str
    line: int
    category: str
    text: str

    @property
    def code(self) -> str | None:
        m = re.match(r"\[(NCX\d+)\]", self.text)
        return m.group(1) if m else None


def warnings_in(stderr: str) -> list[Warned]:
    return [
        Warned(m["file"], int(m["line"]), m["category"], m["text"])
        for m in WARNING_RE.finditer(stderr)
    ]


def clean_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This environment without TORCH_*/NCCL*/NCCLX_* variables, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCH_", "NCCL", "NCCLX_"))}
    env.pop("PYTHONWARNINGS", None)
    env.update(extra or {})
    return env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Script:
    path: Path

    def run(
        self,
        env: dict[str, str] | None = None,
        args: tuple[str, ...] = (),
        py_flags: tuple[str, ...] = (),
        timeout: float = 120,
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, *py_flags, str(self.path), *args],
            capture_output=True,
            text=True,
            env=clean_env(env),
            cwd=self.path.parent,
            timeout=timeout,
        )


@pytest.fixture
def user_script(tmp_path: Path):  # type: ignore[no-untyped-def]
    """Write ``source`` as ``train.py`` (dedented) and return a runnable Script."""

    def make(source: str, name: str = "train.py") -> Script:
        path = tmp_path / name
        path.write_text(textwrap.dedent(source).lstrip("\n"))
        return Script(path)

    return make


def line_of(script: Script, marker: str) -> int:
    """1-based line number of the first line containing ``marker``."""
    for number, line in enumerate(script.path.read_text().splitlines(), 1):
        if marker in line:
            return number
    raise AssertionError(f"{marker!r} not in {script.path}")


def run_ranks(
    script: Script, world: int, env: dict[str, str] | None = None, timeout: float = 180
) -> list[dict[str, object]]:
    """Run ``world`` copies of ``script`` (argv: rank world port) as forks of one interpreter
    that imported torch (tests/forked.py); each prints one JSON line.
    ``timeout`` only catches a hang (a passing run ends when its ranks exit): 90 s was hit by
    ranks still importing torch when three test runs shared 2 busy cores."""
    port = str(free_port())
    ranks = run_forked(script.path, [[str(rank), str(world), port] for rank in range(world)],
                       script.path.parent / ".rank", env=clean_env(env), cwd=script.path.parent,
                       timeout=timeout)
    results: list[dict[str, object]] = []
    for rank, ran in enumerate(ranks):
        assert ran.returncode == 0, f"rank {rank} exited {ran.returncode}:\n{ran.stderr[-3000:]}"
        lines = [ln for ln in ran.stdout.splitlines() if ln.startswith("{")]
        assert lines, f"rank {rank} printed no result:\n{ran.stdout}\n{ran.stderr[-3000:]}"
        result = json.loads(lines[-1])
        result["_stderr"] = ran.stderr
        results.append(result)
    return results
