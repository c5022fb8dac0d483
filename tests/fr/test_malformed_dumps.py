"""Bad input gets one clear line on stderr naming the file, and exit code 2; a malicious
pickle is refused without running anything.  Hand-made files only (malformed on purpose)."""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import pytest

from ncclx_migrate._fr._pickle import DumpError, load_restricted

from ..conftest import run_ncclx

GOOD = {
    "version": "2.10",
    "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0]"}},
    "pg_status": {},
    "entries": [],
}


class _RunsCode:
    """Unpickling this calls os.system; a safe loader must refuse it."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, (f"touch {self.marker}",))


def _analyze(folder: Path) -> tuple[int, str, str]:
    res = run_ncclx("fr", "analyze", str(folder))
    return res.returncode, res.stdout, res.stderr


def _one_line_error(err: str, *needles: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    for n in needles:
        assert n in lines[0], lines[0]


def test_malicious_pickle_is_refused_and_never_runs(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    dump = dict(GOOD, entries=[_RunsCode(marker)])
    (tmp_path / "fr_0").write_bytes(pickle.dumps(dump))
    code, _, err = _analyze(tmp_path)
    assert code == 2
    _one_line_error(err, "fr_0", "refused to load", "posix.system")
    assert not marker.exists()


def test_restricted_unpickler_allows_plain_data_only(tmp_path: Path) -> None:
    plain = {"a": [1, 2.5, None, True], "b": ("x", b"y"), "c": {"d": -3}}
    assert load_restricted(pickle.dumps(plain), "x") == plain
    with pytest.raises(DumpError, match=r"asks for (__builtin__|builtins)\.set"):
        load_restricted(pickle.dumps({1, 2}, protocol=2), "x")  # protocol 2 builds sets via a global
    with pytest.raises(DumpError, match="asks for pathlib"):
        load_restricted(pickle.dumps(tmp_path), "x")


def test_truncated_dump(tmp_path: Path) -> None:
    data = pickle.dumps(dict(GOOD, entries=[{"x": "y" * 100}]))
    (tmp_path / "fr_0").write_bytes(data[: len(data) // 2])
    code, _, err = _analyze(tmp_path)
    assert code == 2
    _one_line_error(err, "fr_0", "truncated")


def test_unknown_version(tmp_path: Path) -> None:
    (tmp_path / "fr_0").write_bytes(pickle.dumps(dict(GOOD, version="9.1")))
    code, _, err = _analyze(tmp_path)
    assert code == 2
    _one_line_error(err, "fr_0", "unknown flight-recorder format version '9.1'")


def test_empty_folder(tmp_path: Path) -> None:
    code, _, err = _analyze(tmp_path)
    assert code == 2
    _one_line_error(err, str(tmp_path), "empty folder")


def test_missing_folder(tmp_path: Path) -> None:
    code, _, err = _analyze(tmp_path / "nope")
    assert code == 2
    _one_line_error(err, "nope", "no such folder")


def test_a_dump_file_instead_of_its_folder(tmp_path: Path) -> None:
    dump = tmp_path / "fr_trace_0"
    dump.write_bytes(b"x")
    code, _, err = _analyze(dump)
    assert code == 2
    _one_line_error(err, "fr_trace_0", "is a file, not a folder", str(tmp_path))


def test_empty_file(tmp_path: Path) -> None:
    (tmp_path / "fr_0").write_bytes(b"")
    code, _, err = _analyze(tmp_path)
    assert code == 2
    _one_line_error(err, "fr_0", "empty file")


def test_not_a_dump(tmp_path: Path) -> None:
    (tmp_path / "fr_0").write_text("hello\n")
    code, _, err = _analyze(tmp_path)
    assert code == 2
    _one_line_error(err, "fr_0", "not a flight-recorder dump")


def test_truncated_json(tmp_path: Path) -> None:
    (tmp_path / "fr_0").write_text(json.dumps(GOOD)[:-5])
    code, _, err = _analyze(tmp_path)
    assert code == 2
    _one_line_error(err, "fr_0", "not valid JSON")


def test_ambiguous_prefix_needs_prefix_option(tmp_path: Path) -> None:
    for name in ("a_0", "b_0"):
        (tmp_path / name).write_bytes(pickle.dumps(GOOD))
    code, _, err = _analyze(tmp_path)
    assert code == 2
    _one_line_error(err, "several prefixes", "--prefix")
    res = run_ncclx("fr", "analyze", str(tmp_path), "--prefix", "a_")
    assert res.returncode == 0, res.stderr


@pytest.mark.parametrize("out", ["file", "unwritable", "same"])
def test_repair_output_errors_are_one_line(tmp_path: Path, out: str) -> None:
    dumps = tmp_path / "dumps"
    dumps.mkdir()
    (dumps / "fr_0").write_bytes(pickle.dumps(GOOD))
    target = {"file": dumps / "fr_0", "unwritable": Path("/proc/ncclx-no/out"), "same": dumps}[out]
    before = (dumps / "fr_0").read_bytes()
    res = run_ncclx("fr", "repair", str(dumps), str(target))
    assert res.returncode == 2
    _one_line_error(res.stderr, str(target))
    assert (dumps / "fr_0").read_bytes() == before  # the originals are never overwritten
