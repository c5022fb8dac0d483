"""The per-file cache of `ncclx migrate`: a warm run prints what a cold one prints, byte for
byte, and a file whose result used another file's helper is scanned again when that helper
changes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import run_ncclx

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"


def _same(a: subprocess.CompletedProcess[str], b: subprocess.CompletedProcess[str]) -> None:
    assert (a.returncode, a.stdout, a.stderr) == (b.returncode, b.stdout, b.stderr)


def _pack(cache: Path) -> dict[str, dict[str, object]]:
    """Every entry kept for the one set of options used (its shards together)."""
    (options,) = cache.glob("v1/*/*")
    entries: dict[str, dict[str, object]] = {}
    for shard in options.glob("*.json"):
        entries.update(json.loads(shard.read_text())["entries"])
    return entries


@pytest.mark.slow
def test_warm_equals_cold_byte_for_byte_over_every_fixture(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    args = ["migrate", "--cache-dir", str(cache), "tests/fixtures"]
    cold_json = run_ncclx(*args[:1], "--format", "json", *args[1:], cwd=ROOT)
    assert cold_json.returncode == 1 and json.loads(cold_json.stdout)["files_scanned"] > 250
    _same(cold_json, run_ncclx(*args[:1], "--format", "json", *args[1:], cwd=ROOT))
    _same(run_ncclx("migrate", "--no-cache", "tests/fixtures", cwd=ROOT), run_ncclx(*args, cwd=ROOT))
    cold_diff = run_ncclx(*args[:1], "--diff", *args[1:], cwd=ROOT)
    assert cold_diff.stdout.count("+++ b/") > 20
    _same(cold_diff, run_ncclx(*args[:1], "--diff", *args[1:], cwd=ROOT))
    assert not (ROOT / "tests" / "fixtures" / ".ncclx_cache").exists()
    for options in cache.glob("v1/*/*"):  # one per options: the report's and the diff's
        entries = {p for shard in options.glob("*.json") for p in json.loads(shard.read_text())["entries"]}
        assert {str(p.relative_to(ROOT)) for p in FIXTURES.rglob("*.in.py")} <= entries


HELPER = "import os\n\nimport torch\n\n\ndef get_local_device():\n    return torch.device(\"cuda\", int(os.environ[\"{var}\"]))\n"
TRAIN = ("import torch\nimport torch.distributed as dist\n\nfrom pkg.device import get_local_device\n\n\n"
         "def main():\n    torch.cuda.set_device(get_local_device())\n    dist.init_process_group(\"nccl\")\n")


def _project(tmp_path: Path) -> Path:
    (tmp_path / ".git").mkdir(parents=True)  # the project root: the cache goes to .ncclx_cache/ there
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "device.py").write_text(HELPER.format(var="LOCAL_RANK"))
    (tmp_path / "train.py").write_text(TRAIN)
    for i in range(3):
        (tmp_path / f"other{i}.py").write_text(f"import os\nos.environ['TORCH_NCCL_TRACE_BUFFER_SIZE'] = '{i}'\n")
    return tmp_path


def _codes(proc: subprocess.CompletedProcess[str]) -> list[tuple[str, str]]:
    return [(f["path"], f["code"]) for f in json.loads(proc.stdout)["findings"]]


@pytest.mark.slow
def test_editing_a_helper_module_invalidates_the_file_that_used_it(tmp_path: Path) -> None:
    root = _project(tmp_path)
    cold = run_ncclx("migrate", "--format", "json", ".", cwd=root)
    assert ("train.py", "NCX130") in _codes(cold)  # LOCAL_RANK, through pkg/device.py: hardening
    cache = root / ".ncclx_cache"
    assert (cache / ".gitignore").read_text().endswith("\n*\n")
    kept = _pack(cache)["train.py"]
    assert ["helper", "get_local_device"] in [f[:2] for f in kept["facts"]]  # type: ignore[union-attr]
    _same(cold, run_ncclx("migrate", "--format", "json", ".", cwd=root))
    (root / "pkg" / "device.py").write_text(HELPER.format(var="SLURM_LOCALID"))
    warm = run_ncclx("migrate", "--format", "json", ".", cwd=root)
    _same(warm, run_ncclx("migrate", "--no-cache", "--format", "json", ".", cwd=root))
    assert ("train.py", "NCX134") in _codes(warm) and ("train.py", "NCX130") not in _codes(warm)
    # An __init__.py removed changes the module's name: the import no longer finds the helper.
    os.unlink(root / "pkg" / "__init__.py")
    _same(run_ncclx("migrate", "--format", "json", ".", cwd=root),
          run_ncclx("migrate", "--no-cache", "--format", "json", ".", cwd=root))


CHAIN = {  # a pick two helpers and two modules away from the init (issue 35, section 3)
    "pkg/rank.py": "import os\n\n\ndef node_rank():\n    return int(os.environ[\"{var}\"])\n",
    "pkg/bind.py": ("import torch\n\nfrom pkg.rank import node_rank\n\n\ndef _bind():\n"
                    "    torch.cuda.set_device(node_rank())\n\n\ndef setup():\n    _bind()\n"),
    "train.py": "import torch.distributed as dist\n\nfrom pkg.bind import setup\n\n\ndef main():\n"
                "    setup()\n    dist.init_process_group(\"nccl\")\n",
}


@pytest.mark.slow
def test_editing_the_far_end_of_a_helper_chain_invalidates_the_file_that_used_it(tmp_path: Path) -> None:
    root = tmp_path
    (root / ".git").mkdir()
    (root / "pkg").mkdir()
    (root / "pkg" / "__init__.py").write_text("")
    for rel, text in CHAIN.items():
        (root / rel).write_text(text.replace("{var}", "LOCAL_RANK"))
    cold = run_ncclx("migrate", "--format", "json", ".", cwd=root)
    assert ("train.py", "NCX130") in _codes(cold)  # setup() -> _bind() -> node_rank(): LOCAL_RANK
    _same(cold, run_ncclx("migrate", "--format", "json", ".", cwd=root))
    (root / "pkg" / "rank.py").write_text(CHAIN["pkg/rank.py"].replace("{var}", "SLURM_LOCALID"))
    warm = run_ncclx("migrate", "--format", "json", ".", cwd=root)
    _same(warm, run_ncclx("migrate", "--no-cache", "--format", "json", ".", cwd=root))
    assert ("train.py", "NCX134") in _codes(warm) and ("train.py", "NCX130") not in _codes(warm)


def test_a_warm_run_scans_only_what_changed(tmp_path: Path) -> None:
    """Each file's entry is kept with the digest it was scanned at: an untouched file's entry
    is the same object after a run that edited another file."""
    root = _project(tmp_path)
    assert run_ncclx("migrate", "-q", ".", cwd=root).returncode == 1
    before = _pack(root / ".ncclx_cache")
    (root / "other0.py").write_text("import os\nos.environ['TORCH_NCCL_TRACE_BUFFER_SIZE'] = '9'\n")
    assert run_ncclx("migrate", "-q", ".", cwd=root).returncode == 1
    after = _pack(root / ".ncclx_cache")
    changed = sorted(p for p in after if after[p].get("outcome") != before[p].get("outcome")
                     or after[p]["digest"] != before[p]["digest"])
    assert changed == ["other0.py"]


def test_a_setup_py_tree_gets_its_cache_a_bare_one_none(tmp_path: Path) -> None:
    """The issue 35 shape: a checkout whose top holds setup.py (and requirements.txt), no .git
    and no pyproject.toml, is a project as the target torch and the scope take it: its cache
    goes there, and a warm run prints what the cold one printed.  Under no project file there
    is none."""
    work = tmp_path / "work"
    (work / "pkg").mkdir(parents=True)
    (work / "setup.py").write_text('from setuptools import setup\n\nsetup(name="t", install_requires=["torch>=2.14"])\n')
    shutil.copyfile(ROOT / "examples" / "legacy-trainer" / "train.py", work / "pkg" / "train.py")
    cold = run_ncclx("migrate", str(work / "pkg" / "train.py"))
    assert "target torch 2.14 (from " in cold.stderr and "setup.py" in cold.stderr  # read from it
    assert _pack(work / ".ncclx_cache")
    _same(cold, run_ncclx("migrate", str(work / "pkg" / "train.py")))
    bare = tmp_path / "bare"
    bare.mkdir()
    shutil.copyfile(work / "pkg" / "train.py", bare / "train.py")
    run_ncclx("migrate", "-q", str(bare))
    assert not list(bare.rglob(".ncclx_cache"))  # no project file, no .git: nowhere to put it


def test_no_cache_flag_and_env(tmp_path: Path) -> None:
    root = _project(tmp_path / "p")
    run_ncclx("migrate", "-q", "--no-cache", ".", cwd=root)
    assert not (root / ".ncclx_cache").exists()
    run_ncclx("migrate", "-q", ".", cwd=root, env={"NCCLX_CACHE_DIR": str(tmp_path / "env")})
    assert not (root / ".ncclx_cache").exists() and _pack(tmp_path / "env")


def _own_groups_elsewhere(root: Path) -> Path:
    """The cpp_multi case whose pool (src/pool.cpp) fills itself with groups it builds, copied
    under ``root`` as a project; its pool file."""
    case = FIXTURES / "cpp_multi" / "own_groups_elsewhere"
    for src in case.rglob("*.in.*"):
        dst = root / src.relative_to(case).parent / src.name.replace(".in.", ".")
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)
    (root / ".git").mkdir()
    return root / "src" / "pool.cpp"


_BUILT = "groups_[mesh] = newGroup(store_, rankIn(mesh), sizeOf(mesh));"
_ADOPTED = "groups_[mesh] = adopted_.at(mesh);"


@pytest.mark.slow
def test_editing_a_cpp_factory_invalidates_the_file_that_casts_its_groups(tmp_path: Path) -> None:
    """A cast of a pool's own groups (src/reduce.cpp) is cleared by what src/pool.cpp fills
    the pool with: when the pool is filled from a caller instead, the warm run reports it."""
    root = tmp_path / "p"
    pool = _own_groups_elsewhere(root)
    cold = run_ncclx("migrate", "--format", "json", ".", cwd=root)
    lines = [f["line"] for f in json.loads(cold.stdout)["findings"] if f["path"] == "src/reduce.cpp"]
    assert lines == [18]  # the caller-handed group only
    kept = _pack(root / ".ncclx_cache")["src/reduce.cpp"]
    assert ["cpp_returns", "own:GroupPool::groupFor"] in [f[:2] for f in kept["facts"]]  # type: ignore[union-attr]
    pool.write_text(pool.read_text().replace(_BUILT, _ADOPTED))
    warm = run_ncclx("migrate", "--format", "json", ".", cwd=root)
    _same(warm, run_ncclx("migrate", "--no-cache", "--format", "json", ".", cwd=root))
    lines = [f["line"] for f in json.loads(warm.stdout)["findings"] if f["path"] == "src/reduce.cpp"]
    assert lines == [9, 11, 18]  # the pool's groups may now be nccl2's: the cast and _reduce_oop


@pytest.mark.slow
def test_a_cpp_factory_that_starts_building_its_groups_clears_the_cached_casts(tmp_path: Path) -> None:
    """The other way round: kept while no function of the project returned its own groups
    (src/reduce.cpp then never looked at what its pool holds), a result must not survive the
    edit that makes src/pool.cpp build them."""
    root = tmp_path / "p"
    pool = _own_groups_elsewhere(root)
    pool.write_text(pool.read_text().replace(_BUILT, _ADOPTED))
    cold = run_ncclx("migrate", "--format", "json", ".", cwd=root)
    assert [f["line"] for f in json.loads(cold.stdout)["findings"] if f["path"] == "src/reduce.cpp"] == [9, 11, 18]
    pool.write_text(pool.read_text().replace(_ADOPTED, _BUILT))
    warm = run_ncclx("migrate", "--format", "json", ".", cwd=root)
    _same(warm, run_ncclx("migrate", "--no-cache", "--format", "json", ".", cwd=root))
    assert [f["line"] for f in json.loads(warm.stdout)["findings"] if f["path"] == "src/reduce.cpp"] == [18]
