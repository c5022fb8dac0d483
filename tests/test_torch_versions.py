"""Every torch-version fact the toolkit reasons about, checked on torch 2.13, 2.14 and 2.15.

The facts live in ``_torch.releases`` (one table per fact); tests/torch_probe.py measures them
on the torch of each release's venv (scripts/test.sh exports NCCLX_TEST_PY213/PY214; the main
run is 2.15), and docs/torch-versions.md is rendered from the same tables, so neither the
code nor the doc can drift from what torch does.  Regenerate the doc with
``python -m tests.test_torch_versions``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from ncclx_migrate._migrate._target import detect_target
from ncclx_migrate._torch.envvars import ENV_VARS, TOGGLE_VAR
from ncclx_migrate._torch.releases import (
    BACKEND_NAMES,
    ENV_UNNAMED,
    GENERIC_TIMEOUT_MIN,
    NAME_BUILDS,
    NCCL_BUILDS,
    NCCL_TIMEOUT_MIN,
    NCCL_TIMEOUT_NAMES,
    SHIM_BUILDS,
    SUPPORTED_RELEASES,
    TOGGLE_VALUES,
    USE_NCCL2_RETURNS,
    default_timeout_minutes,
)
from tests.conftest import ROOT, once, other_python, run_ncclx, torch_python

DOC = ROOT / "docs" / "torch-versions.md"
RELEASES = pytest.mark.parametrize("release", SUPPORTED_RELEASES)
pytestmark = pytest.mark.slow  # starts the torch of every release


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCH_", "NCCL", "NCCLX_"))}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "src"), env.get("PYTHONPATH")) if p)
    return env


def _measure(python: str) -> dict[str, object]:
    proc = subprocess.run([python, str(ROOT / "tests" / "torch_probe.py")], capture_output=True,
                          text=True, env=_env(), timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    facts: dict[str, object] = json.loads(proc.stdout)
    return facts


@pytest.fixture(scope="session")
def probe(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], dict[str, object]]:
    """``probe(python)``: the facts tests/torch_probe.py measures there, once per session."""

    def get(python: str) -> dict[str, object]:
        facts: dict[str, object] = once(tmp_path_factory, f"torch-probe-{python}",
                                        lambda _: _measure(python))[1]
        return facts

    return get


@RELEASES
def test_each_fact_is_what_this_release_does(release: str, probe: Callable[[str], dict[str, object]]) -> None:
    got = probe(torch_python(release))
    assert got["release"] == release
    assert got["nccl"] == NCCL_BUILDS[release]
    assert got["names"] == NAME_BUILDS[release]
    assert tuple(got["nccl_timeout"]) == NCCL_TIMEOUT_NAMES[release]  # type: ignore[arg-type]
    assert got["generic_timeout_min"] == GENERIC_TIMEOUT_MIN
    # The 2.13 wheel here is the CPU build: it has no NCCL constant at all.
    assert got["nccl_timeout_min"] == (None if release == "2.13" else NCCL_TIMEOUT_MIN)
    assert got["shim"] == SHIM_BUILDS[release]
    assert got["use_nccl2"] == USE_NCCL2_RETURNS[release]
    assert tuple(got["env_unnamed"]) == ENV_UNNAMED[release]  # type: ignore[arg-type]


@RELEASES
@pytest.mark.parametrize("backend", ["nccl", "nccl2", "nccl-legacy", "cpu:gloo,cuda:nccl-lazy"])
def test_default_timeout_check_says_what_torch_gives(
    release: str, backend: str, probe: Callable[[str], dict[str, object]]
) -> None:
    python = torch_python(release)
    name = backend.rpartition(":")[2]
    proc = run_ncclx("doctor", "--level", "static", "--json", "--check", "default-timeout",
                     "--backend", backend, python=python)
    (result,) = json.loads(proc.stdout)["checks"]
    measured = probe(python)
    exists = name == "nccl" or NAME_BUILDS[release][name] is not None
    if not exists and name != "nccl-legacy":  # 2.13: "Unknown backend type nccl2"
        assert (result["status"], proc.returncode) == ("fail", 1)
        assert f'backend "{name}" does not exist on torch {release}' in result["message"]
        return
    nccl_default = name in measured["nccl_timeout"]  # type: ignore[operator]
    assert result["details"]["minutes"] == {name: NCCL_TIMEOUT_MIN if nccl_default else GENERIC_TIMEOUT_MIN}
    assert proc.returncode == 0
    if nccl_default:
        assert result["status"] == "ok"
    else:  # 2.14 explicit names; 2.13's nccl-legacy through the shim
        assert result["status"] == "warn"
        assert f"waits 30 minutes before a hang is reported on torch {release}" in result["message"]
        assert "timeout=datetime.timedelta(minutes=10)" in result["remedy"]
        assert ("TORCH_DIST_USE_NCCL2=1" in result["remedy"]) is (release == "2.14")


def test_target_torch_judges_the_timeout_of_that_release() -> None:
    for target, status in (("2.14", "warn"), ("2.15", "ok"), ("2.16", "skip"), ("2.12", "fail")):
        proc = run_ncclx("doctor", "--level", "static", "--json", "--check", "default-timeout",
                         "--backend", "nccl2", "--target-torch", target)
        (result,) = json.loads(proc.stdout)["checks"]
        assert result["status"] == status, (target, result)
        assert f"torch {target} (--target-torch)" in result["message"]
    # Without torch (a login node) the release comes from --target-torch alone.
    notorch = other_python("NCCLX_TEST_PY_NOTORCH")
    for extra, status in (((), "skip"), (("--target-torch", "2.14"), "warn")):
        proc = run_ncclx("doctor", "--level", "static", "--json", "--check", "default-timeout",
                         "--backend", "nccl2", *extra, python=notorch)
        assert json.loads(proc.stdout)["checks"][0]["status"] == status


@RELEASES
@pytest.mark.parametrize("value", TOGGLE_VALUES)
def test_doctor_predicts_what_nccl_builds_without_importing_torch(release: str, value: str) -> None:
    env = {} if value == "unset" else {TOGGLE_VAR: value}
    proc = run_ncclx("doctor", "--level", "static", "--json", "--check", "nccl-resolution",
                     env=env, python=torch_python(release))
    (result,) = json.loads(proc.stdout)["checks"]
    cpu_wheel = release == "2.13"  # the 2.13 wheel here has no NCCL at all
    assert result["details"]["implementation"] == (None if cpu_wheel else NCCL_BUILDS[release][value])


@RELEASES
@pytest.mark.parametrize("value", TOGGLE_VALUES[1:])
def test_import_time_toggle_warning_tells_what_this_release_builds(release: str, value: str) -> None:
    env = {**_env(), TOGGLE_VAR: value}
    proc = subprocess.run([torch_python(release), "-W", "always", "-c", "import ncclx_migrate"],
                          capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    found = [line for line in proc.stderr.splitlines() if "[NCX101]" in line]
    text = found[0] if found else None
    builds, default = NCCL_BUILDS[release][value], NCCL_BUILDS[release]["unset"]
    if builds != default:  # the value really changes what "nccl" builds here
        if builds == "nccl2":  # 2.14's opt-in
            assert text is None
        else:  # 2.15's rollback
            assert text is not None and f'{TOGGLE_VAR}=0 rolls "nccl" back to legacy' in text
        return
    if text is None:  # harmless: "1" where nccl2 is already the default
        assert (release, value) == ("2.15", "1")
        return
    # What it says about THIS release (the rest speaks of 2.15) matches torch.
    here = text if release == "2.15" else text.split(" on torch 2.15")[0]
    assert "nothing" in here, text
    words = {"nccl-legacy": '"nccl" builds legacy', "nccl2": '"nccl" builds nccl2'}
    if value not in ("0", "1"):  # a spelling torch ignores: what "nccl" builds on this release
        assert f"{words[builds]} on {release}; unset it" in here, text


def test_target_detection_reads_a_2_14_only_pin(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text("torch>=2.14,<2.15\n")
    assert detect_target(str(tmp_path)) == ((2, 14), str(tmp_path / "requirements.txt"))
    (tmp_path / "requirements.txt").unlink()
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\ndependencies = ["torch~=2.14.0"]\n')
    assert detect_target(str(tmp_path))[0] == (2, 14)


FIXES = '''
import datetime, os, socket
import torch
import torch.distributed as dist

s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
dist.init_process_group("gloo", rank=0, world_size=1)
opts = dist.ProcessGroupNCCL.Options()
opts.lazy_init = True
dist.group.WORLD._get_backend(torch.device("cpu"))._set_default_timeout(datetime.timedelta(seconds=90))
print("ran", getattr(opts, "lazy_init", None))
dist.destroy_process_group()
'''


@pytest.mark.parametrize("release", ["2.14", "2.15"])
def test_fixes_for_a_2_14_project_run_on_2_14_and_2_15(tmp_path: Path, release: str) -> None:
    python = torch_python(release)
    (tmp_path / "requirements.txt").write_text("torch>=2.14,<2.16\n")
    script = tmp_path / "train.py"
    script.write_text(FIXES)
    proc = run_ncclx("migrate", "--write", "--unsafe-fixes", ".", cwd=tmp_path, python=python)
    assert "target torch 2.14 (from" in proc.stderr, proc.stderr
    text = script.read_text()
    assert 'if hasattr(opts, "lazy_init"):\n    opts.lazy_init = True' in text  # NCX133, 2.14 has none
    assert "set_timeout(datetime.timedelta(seconds=90), dist.group.WORLD)" in text  # NCX111, >= 2.14
    ran = subprocess.run([python, str(script)], capture_output=True, text=True, env=_env(), timeout=120)
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert ran.stdout.split() == ["ran", "True" if release == "2.15" else "None"]


def render() -> str:
    """docs/torch-versions.md, from the _torch.releases tables."""
    rels = SUPPORTED_RELEASES
    head = "| | " + " | ".join(f"torch {r}" for r in rels) + " |\n|---|" + "---|" * len(rels) + "\n"

    def row(label: str, cells: list[str]) -> str:
        return f"| {label} | " + " | ".join(cells) + " |\n"

    def impl(value: str | None) -> str:
        return "unknown name" if value is None else {"nccl-legacy": "legacy `ProcessGroupNCCL`",
                                                     "nccl2": "`ProcessGroupNCCL2`",
                                                     "nccl-lazy": "`ProcessGroupNCCLLazy`"}[value]

    out = [
        "# What each supported torch release does\n\n",
        "<!-- Generated by `python -m tests.test_torch_versions` from the tables in\n",
        "     src/ncclx_migrate/_torch/releases.py; tests/test_torch_versions.py fails when this file\n",
        "     differs, and checks every row against the real torch of each release. -->\n\n",
        "The table a platform engineer consults before a fleet upgrade. Every cell is measured on\n",
        "the real wheels (torch 2.13.0 CPU build, 2.14.1 and 2.15.0 CUDA builds from PyPI; no GPU\n",
        "needed) by `tests/torch_probe.py`, which the test suite runs under each release.\n\n",
        "## `TORCH_DIST_USE_NCCL2`: what `backend=\"nccl\"` builds\n\n", head,
    ]
    for value in TOGGLE_VALUES:
        label = "unset" if value == "unset" else f'`{TOGGLE_VAR}="{value}"`'
        out.append(row(label, [impl(NCCL_BUILDS[r][value]) for r in rels]))
    out += [
        "\n2.14 opts in on the literal `\"1\"` only; 2.15 rolls back on the literal `\"0\"` only. "
        "The value is read once, when `\"nccl\"` is first registered.\n\n",
        "## Backend names\n\n", head,
    ]
    for name in BACKEND_NAMES[1:]:
        out.append(row(f'`backend="{name}"` (torch\'s own)', [impl(NAME_BUILDS[r][name]) for r in rels]))
    shim = {"legacy": "registered by the shim: legacy `ProcessGroupNCCL`",
            "torch": "torch's own name, wrapped to warn (NCX103)"}
    out.append(row('`"nccl-legacy"` with `install_legacy_shim()`', [shim[SHIM_BUILDS[r]] for r in rels]))
    use = {"legacy": '`"legacy"` (no nccl2; warns NCX103)', "nccl2": '`"nccl2"`: `"nccl"` builds `ProcessGroupNCCL2`'}
    out.append(row("`use_nccl2()` returns", [use[USE_NCCL2_RETURNS[r]] for r in rels]))
    out += ["\n## Default timeout of a group created without `timeout=`\n\n", head]
    for name in BACKEND_NAMES:
        cells = []
        for r in rels:
            own = name == "nccl" or NAME_BUILDS[r][name] is not None
            if not own and name != "nccl-legacy":
                cells.append("unknown name")
                continue
            cells.append(f"{default_timeout_minutes(r, name)} min" + ("" if own else " (through the shim)"))
        out.append(row(f'`"{name}"`', cells))
    out += [
        "\n`ncclx doctor` check `default-timeout` warns about the 30-minute cases "
        "(`_get_default_timeout`: distributed_c10d.py:1387-1400 in 2.14.1, :1552-1565 in 2.15.0). "
        "The 2.13 CPU wheel has no NCCL constant; the CUDA build's is 10 minutes.\n\n",
        "## Environment variables: named by torch at all?\n\n",
        "Whether any string of the release's `libtorch*.so` or `torch/distributed/*.py` contains the\n",
        "name (a substring search: c10d tail-merges `NCCL_X` into `TORCH_NCCL_X`). Which backend reads\n",
        "each one, and the fix, is in [rules.md](rules.md) (NCX120-NCX123, NCX203) and `_torch/envvars.py`.\n",
        "The 2.13 column is the CPU wheel, which has no `libtorch_cuda.so`: \"no\" there can mean\n",
        "CUDA-only.\n\n", head.replace("| |", "| variable (kind) |", 1),
    ]
    kinds = {r.name: r.kind.value for r in ENV_VARS}
    names = sorted(set(kinds) | {r.replacement for r in ENV_VARS if r.replacement})
    for name in names:
        label = f"`{name}`" + (f" ({kinds[name]})" if name in kinds else " (replacement)")
        out.append(row(label, ["no" if name in ENV_UNNAMED[r] else "yes" for r in rels]))
    return "".join(out)


# The generated tables end here; the hand-written "Behaviour in detail" below it is kept as is.
HAND_WRITTEN = "<!-- End of the generated tables."


def test_doc_table_is_rendered_from_the_facts() -> None:
    generated, marker, _ = DOC.read_text(encoding="utf-8").partition(HAND_WRITTEN)
    assert marker, f"docs/torch-versions.md lost its {HAND_WRITTEN!r} line"
    assert generated == render() + "\n", (
        "docs/torch-versions.md is stale: run `python -m tests.test_torch_versions`"
    )


if __name__ == "__main__":
    _, marker, tail = DOC.read_text(encoding="utf-8").partition(HAND_WRITTEN)
    DOC.write_text(render() + "\n" + marker + tail, encoding="utf-8")
    sys.stdout.write(f"wrote {DOC}\n")
