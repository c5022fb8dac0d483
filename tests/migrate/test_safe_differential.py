"""Every safe fix in the fixtures keeps behaviour whatever environment the job inherits.

For each fixture (tests/fixtures/python, tests/fixtures/files) whose safe-only rewrite
changes a file that names a variable of the env table, the original and the rewrite are
executed under a matrix of inherited environments (each involved name unset or set to
its own value) and must give identical observations: what torch reads (new name, then
old), and what each child process gets.  How each kind is executed: tests/migrate/_differential.py.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from ncclx_migrate._migrate._files import scan
from ncclx_migrate._migrate._python import transform_source
from tests.conftest import collected
from tests.migrate_files._cases import SAFE, cases, read

from ._differential import changed as _changed
from ._differential import involved, matrix, run_python, run_shell
from ._ipython import var_expand
from .test_fixtures import FIXTURES, options_for

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


def _python_cases() -> list[tuple[str, str, str]]:
    out = []
    for p in sorted(FIXTURES.glob("*.in.py")):
        src = p.read_text(encoding="utf-8")
        options = replace(options_for(src), apply_unsafe=False)
        new = transform_source(src, p.name, options).new_text
        if new is not None and new != src and involved(_changed(src, new)):
            out.append((p.name[: -len(".in.py")], src, new))
    return out


# ---------------------------------------------------- executable parts of non-script files
_RUN = re.compile(r"^RUN[ \t]+(?!\[)((?:[^\n]*\\\n)*[^\n]*)", re.MULTILINE | re.IGNORECASE)


def _dockerfile_runs(text: str) -> list[tuple[str, str]]:
    return [("shell", m.group(1)) for m in _RUN.finditer(text)]


def _yaml_blocks(text: str) -> list[tuple[str, str]]:
    """Block scalars (``key: |`` / ``- |``): scripts in CI files, k8s args, Helm values."""
    lines = text.splitlines()
    out = []
    for k, line in enumerate(lines):
        if not re.search(r"(?::|-)\s+[|>][-+]?\s*$", line):
            continue
        indent = len(line) - len(line.lstrip())
        body = []
        for nxt in lines[k + 1 :]:
            if nxt.strip() and len(nxt) - len(nxt.lstrip()) <= indent:
                break
            body.append(nxt)
        cut = min((len(b) - len(b.lstrip()) for b in body if b.strip()), default=0)
        out.append(("shell", "\n".join(b[cut:] for b in body) + "\n"))
    return out


def _notebook_parts(text: str) -> list[tuple[str, str]]:
    out = []
    python: list[str] = []
    for cell in json.loads(text)["cells"]:
        if cell["cell_type"] != "code":
            continue
        src = "".join(cell["source"])
        if src.lstrip().startswith("%%"):
            if re.match(r"%%(bash|sh|script\s+(ba)?sh)\b", src.lstrip()):  # bodies IPython does not expand
                out.append(("shell", src.split("\n", 1)[1] if "\n" in src else ""))
            continue
        for line in src.splitlines():
            bang = re.match(r"\s*(?:[A-Za-z_][\w.]*\s*=\s*)?!(.*)$", line)
            if bang:  # what the shell gets: the line as IPython expands it
                out.append(("shell", var_expand(bang.group(1)) + "\n"))
                continue
            m = re.match(r"\s*%(?:set_)?env\s+(.*)$", line)
            m = m and re.match(r"([A-Za-z_]\w*)(?:=|\s+)(.*)$", var_expand(m.group(1)))
            if m:  # what %env does to the kernel's environment
                python.append(f"import os; os.environ[{m.group(1)!r}] = {m.group(2).strip()!r}")
            elif not line.lstrip().startswith(("%", "!")):
                python.append(line)
    out.append(("python", "\n".join(python) + "\n"))
    return out


_PARTS = {"shell": lambda t: [("shell", t)], "dockerfile": _dockerfile_runs, "yaml": _yaml_blocks,
          "notebook": _notebook_parts}


def _file_cases() -> list[tuple[str, str, str, str]]:
    out = []
    for case in cases():
        kind = case.input.parent.name
        text = read(case.input)
        result = scan(case.name, text, SAFE)
        assert result is not None
        new = result.new_text
        if kind in _PARTS and new is not None and new != text and involved(_changed(text, new)):
            out.append((case.id, kind, text, new))
    return out


# JSON turns the tuples into lists: back to tuples for the ids and the unpacking below.
PY_CASES = [tuple(c) for c in collected("safe_differential_python", _python_cases)]
FILE_CASES = [tuple(c) for c in collected("safe_differential_files", _file_cases)]


def _compare(kind: str, before: str, after: str) -> None:
    names = involved(_changed(before, after))
    envs = matrix(names)
    run = run_python if kind == "python" else run_shell
    old, new = run(before, names, envs), run(after, names, envs)
    for env, a, b in zip(envs, old, new, strict=True):
        assert a == b, f"behaviour changes when the job inherits {env}:\nbefore {a}\nafter  {b}"


@pytest.mark.parametrize(("case", "before", "after"), PY_CASES, ids=[c[0] for c in PY_CASES])
def test_python_safe_fixes_keep_behaviour(case: str, before: str, after: str) -> None:
    _compare("python", before, after)


@pytest.mark.parametrize(("case", "kind", "before", "after"), FILE_CASES,
                         ids=[c[0] for c in FILE_CASES])
def test_file_safe_fixes_keep_behaviour(case: str, kind: str, before: str, after: str) -> None:
    old, new = _PARTS[kind](before), _PARTS[kind](after)
    assert len(old) == len(new)
    for (k, a), (_, b) in zip(old, new, strict=True):
        if a != b:
            _compare(k, a, b)


def test_the_cases_cover_every_kind() -> None:
    assert {c[0] for c in PY_CASES} >= {"ncx120_env", "ncx101_child_env"}
    assert {c[1] for c in FILE_CASES} >= {"shell", "dockerfile", "yaml", "notebook"}


# The harness itself: the fixes it replaced (NEW set outright) must fail it.
@pytest.mark.parametrize(("kind", "before", "after"), [
    ("python", 'import os\nos.environ["NCCL_ASYNC_ERROR_HANDLING"] = "1"\n',
     'import os\nos.environ["NCCL_ASYNC_ERROR_HANDLING"] = os.environ["TORCH_NCCL_ASYNC_ERROR_HANDLING"] = "1"\n'),
    ("python", 'import os\nos.environ.setdefault("TORCH_NCCL_TRACE_CPP_STACK", "1")\n',
     'import os\nos.environ.setdefault("TORCH_NCCL_TRACE_CPP_STACK", "1")\n'
     'os.environ.setdefault("TORCH_FR_CPP_STACK", "1")\n'),
    ("python", 'import subprocess, os\nenv = dict(os.environ, TORCH_NCCL_DUMP_ON_TIMEOUT="1")\n'
     'subprocess.run(["w"], env=env)\n',
     'import subprocess, os\nenv = dict(os.environ, TORCH_NCCL_DUMP_ON_TIMEOUT="1", TORCH_FR_DUMP_ON_TIMEOUT="1")\n'
     'subprocess.run(["w"], env=env)\n'),
    ("python", 'import os\nos.environ["TORCH_DIST_USE_NCCL2"] = "1"\n', "import os\n"),
    ("shell", "export TORCH_NCCL_TRACE_BUFFER_SIZE=2000\n",
     "export TORCH_NCCL_TRACE_BUFFER_SIZE=2000\nexport TORCH_FR_BUFFER_SIZE=2000\n"),
    ("shell", "export TORCH_NCCL_TRACE_BUFFER_SIZE=1\nTORCH_NCCL_TRACE_BUFFER_SIZE=2 torchrun x\n",
     "export TORCH_NCCL_TRACE_BUFFER_SIZE=1\n"
     'export TORCH_FR_BUFFER_SIZE="${TORCH_FR_BUFFER_SIZE-$TORCH_NCCL_TRACE_BUFFER_SIZE}"\n'
     "TORCH_NCCL_TRACE_BUFFER_SIZE=2 torchrun x\n"),
    ("shell", "docker run -e NCCL_BLOCKING_WAIT=1 img\n",
     "docker run -e NCCL_BLOCKING_WAIT=1 -e TORCH_NCCL_BLOCKING_WAIT=1 img\n"),
], ids=["py-assign", "py-setdefault", "py-dict", "py-toggle-removal", "sh-export", "sh-twice",
        "sh-docker"])
def test_the_harness_catches_a_fix_that_overrides_what_the_job_inherits(
        kind: str, before: str, after: str) -> None:
    with pytest.raises(AssertionError, match="behaviour changes"):
        _compare(kind, before, after)


def test_the_codemod_leaves_those_shapes_unsafe(tmp_path: Path) -> None:
    """The shapes above are findings whose fix is unsafe (or absent), never safe."""
    from ncclx_migrate._migrate._model import FixKind

    src = ('import os\nos.environ.putenv("NCCL_ASYNC_ERROR_HANDLING", "1")\n'
           'env = dict(os.environ, TORCH_NCCL_DUMP_ON_TIMEOUT="1")\n'
           'os.environ["TORCH_NCCL_TRACE_CPP_STACK"] = "1"\nos.environ["TORCH_NCCL_TRACE_CPP_STACK"] = "2"\n'
           'os.environ["TORCH_DIST_USE_NCCL2"] = "1"\n')
    options = replace(options_for(""), apply_unsafe=False)
    result = transform_source(src, "x.py", options)
    assert result.findings and all(f.fix is not FixKind.SAFE for f in result.findings)
    sh = scan("run.sh", "export TORCH_NCCL_TRACE_BUFFER_SIZE=1\nTORCH_NCCL_TRACE_BUFFER_SIZE=2 torchrun x\n"
              "docker run -e NCCL_BLOCKING_WAIT=1 img\nunset NCCL_ASYNC_ERROR_HANDLING\n"
              "export NCCL_ASYNC_ERROR_HANDLING=1\n", SAFE)
    assert sh is not None
    assert [(f.line, f.fix) for f in sh.findings] == [
        (1, FixKind.UNSAFE), (2, FixKind.SAFE), (3, FixKind.UNSAFE), (5, FixKind.UNSAFE)]
