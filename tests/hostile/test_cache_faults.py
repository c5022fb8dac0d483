"""A missing, corrupt, read-only or concurrently written cache never fails a run nor changes
what it prints; at most one warning line on stderr."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ncclx_exe

from .conftest import env, run_bounded, without_root_file_access

FILES = {
    "train.py": 'import os\nos.environ["TORCH_DIST_USE_NCCL2"] = "0"\nos.environ["TORCH_NCCL_TRACE_CPP_STACK"] = "1"\n',
    "launch.sh": "#!/bin/bash\nexport TORCH_DIST_USE_NCCL2=0\n",
    "job.yaml": "env:\n  - name: TORCH_NCCL_ENABLE_MONITORING\n    value: '1'\n",
}


def _tree(root: Path) -> Path:
    for name, text in FILES.items():
        (root / name).write_text(text)
    return root


def _run(root: Path, cache: Path, *extra: str, prefix: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_bounded("migrate", "--cache-dir", str(cache), *extra, ".", cwd=root, prefix=prefix or [])


def _same_output(got: subprocess.CompletedProcess[str], ref: subprocess.CompletedProcess[str]) -> None:
    assert (got.returncode, got.stdout, got.stderr) == (ref.returncode, ref.stdout, ref.stderr)


def _shards(cache: Path) -> dict[Path, dict[str, dict[str, object]]]:
    """Each shard file of the cache with its entries."""
    return {p: json.loads(p.read_text())["entries"] for p in sorted(cache.glob("v1/*/*/*.json"))}


@pytest.mark.slow
def test_a_missing_cache_is_made_and_a_corrupt_one_rebuilt(tmp_path: Path) -> None:
    root = tmp_path / "src"
    root.mkdir()
    _tree(root)
    cache = tmp_path / "a" / "b" / "cache"  # its parents do not exist either
    ref = run_bounded("migrate", "--no-cache", ".", cwd=root)
    assert ref.returncode == 1
    _same_output(_run(root, cache), ref)
    good = _shards(cache)
    assert sum(len(e) for e in good.values()) == len(FILES)

    def status(p: str) -> list[int]:
        st = os.stat(root / p)
        return [st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]

    variants = [
        lambda text, entries: "{not json", lambda text, entries: text[: len(text) // 2],
        lambda text, entries: "[]", lambda text, entries: '{"entries": []}',
        lambda text, entries: json.dumps({"entries": {p: {"abspath": str(root / p), "digest": e["digest"], "facts": 7,
                                                          "outcome": {"findings": [{"p": 1}]}}
                                                      for p, e in entries.items()}}),
        # a status that matches the file, with a kept pre-pass record of another shape
        lambda text, entries: json.dumps({"entries": {p: {**e, "stat": status(p), "pre": {"sets": 5, "imports": [[1]]}}
                                                      for p, e in entries.items()}}),
    ]
    for bad in variants:
        for shard, entries in good.items():
            shard.write_text(bad(json.dumps({"entries": entries}), entries))
        _same_output(_run(root, cache), ref)  # no warning: a corrupt cache is rebuilt
        assert {s: e.keys() for s, e in _shards(cache).items()} == {s: e.keys() for s, e in good.items()}
    _same_output(_run(root, cache), ref)


@pytest.mark.slow
def test_a_read_only_cache_warns_once_and_changes_nothing(tmp_path: Path) -> None:
    prefix = without_root_file_access()
    if prefix is None:
        pytest.skip("root here ignores file modes and setpriv is missing")
    root = tmp_path / "src"
    root.mkdir()
    _tree(root)
    cache = tmp_path / "cache"
    assert _run(root, cache).returncode == 1
    (root / "train.py").write_text(FILES["train.py"] + 'os.environ["TORCH_NCCL_ENABLE_MONITORING"] = "1"\n')
    ref = run_bounded("migrate", "--no-cache", ".", cwd=root)
    for d in [cache, *cache.rglob("*")]:
        os.chmod(d, 0o555 if d.is_dir() else 0o444)
    try:
        got = _run(root, cache, prefix=prefix)
        assert (got.returncode, got.stdout) == (ref.returncode, ref.stdout)
        extra = got.stderr.replace(ref.stderr, "", 1).splitlines()
        assert len(extra) == 1 and extra[0].startswith("ncclx migrate: warning: cache not written (")
        assert "--no-cache" in extra[0]
        # Nowhere to make it at all (a parent that is a file): the same.
        (tmp_path / "file").write_text("")
        got = _run(root, tmp_path / "file" / "cache")
        assert (got.returncode, got.stdout) == (ref.returncode, ref.stdout)
        assert len(got.stderr.replace(ref.stderr, "", 1).splitlines()) == 1
        # Unreadable too: every file is scanned, the output is the same.
        os.chmod(cache, 0o000)
        got = _run(root, cache, prefix=prefix)
        assert (got.returncode, got.stdout) == (ref.returncode, ref.stdout)
        assert len(got.stderr.replace(ref.stderr, "", 1).splitlines()) == 1
    finally:
        for d in [cache, *cache.rglob("*")]:
            os.chmod(d, 0o755)


@pytest.mark.slow
def test_concurrent_runs_share_a_cache(tmp_path: Path) -> None:
    root = tmp_path / "src"
    root.mkdir()
    _tree(root)
    for i in range(20):  # enough files for the process pool
        (root / f"m{i}.py").write_text(f"import os\nos.environ['TORCH_NCCL_TRACE_BUFFER_SIZE'] = '{i}'\n")
    ref = run_bounded("migrate", "--no-cache", ".", cwd=root)
    cache = tmp_path / "cache"
    procs = [subprocess.Popen([ncclx_exe(), "migrate", "--cache-dir", str(cache), *args, "."], cwd=root,
                              env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for args in ([], ["-j", "1"], [], ["-j", "2"])]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert (p.returncode, out, err) == (ref.returncode, ref.stdout, ref.stderr)
    _same_output(_run(root, cache), ref)
    shards = _shards(cache)
    assert sum(len(e) for e in shards.values()) == len(FILES) + 20
    assert not list(cache.rglob(".pack-*"))  # no temporary left
