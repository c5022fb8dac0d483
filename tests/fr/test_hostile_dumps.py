"""Hostile dumps (issue 9): every malformed dump gives one line naming the file and exit 2,
never a traceback, within bounded time and memory (each run under a 1.5 GB address-space
limit and a timeout); stray rank numbers are named and ignored; `fr repair` never leaves a
half-written OUT.  Hand-made files only."""

from __future__ import annotations

import json
import os
import pickle
import resource
import subprocess
from pathlib import Path

import pytest

from ..conftest import ncclx_exe

_LIMIT = 1536 << 20


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (_LIMIT, _LIMIT))


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [ncclx_exe(), "fr", *args], capture_output=True, text=True, timeout=60,
        preexec_fn=_limit, env={"PATH": "/usr/bin:/bin", "NO_COLOR": "1", "LC_ALL": "C.UTF-8", "PYTHONPATH": _pythonpath()},
    )


def _pythonpath() -> str:
    return os.environ.get("PYTHONPATH", "")


def _entry(seq: object = 1, **kw: object) -> dict[str, object]:
    e: dict[str, object] = {
        "process_group": ["0", "default_pg"], "collective_seq_id": seq, "profiling_name": "gloo:all_reduce",
        "input_sizes": [[4]], "input_dtypes": ["Float"], "output_sizes": [[4]], "output_dtypes": ["Float"],
        "state": "completed", "retired": True, "is_p2p": False, "frames": [],
    }
    e.update(kw)
    return e


def _dump(world: int = 2, **kw: object) -> dict[str, object]:
    d: dict[str, object] = {
        "version": "2.10",
        "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": str(list(range(world)))}},
        "pg_status": {"0": {"last_enqueued_collective": 1, "last_completed_collective": 1}},
        "entries": [_entry()],
    }
    d.update(kw)
    return d


def _one_line(res: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert res.returncode == 2, (res.returncode, res.stdout[-500:], res.stderr[-2000:])
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr[-2000:]
    for n in needles:
        assert n in lines[0], lines[0]


def _folder(tmp_path: Path, bad: bytes, good: bool = True) -> Path:
    if good:
        (tmp_path / "fr_trace_0").write_bytes(pickle.dumps(_dump()))
    (tmp_path / "fr_trace_1").write_bytes(bad)
    return tmp_path


# --- JSON text torch never writes --------------------------------------------------------

_JSON_CASES = {
    "seq-infinity": json.dumps(_dump(entries=[_entry(seq=1e400)])),
    "frame-line-infinity": json.dumps(
        _dump(entries=[_entry(frames=[{"name": "f", "filename": "x.py", "line": 1e400}])])
    ),
    "status-infinity": json.dumps(_dump(pg_status={"0": {"last_completed_collective": 1e400}})),
    "pg-config-list": json.dumps(_dump(pg_config=[1, 2])),
    "pg-config-string": json.dumps(_dump(pg_config="0")),
    "pg-status-list": json.dumps(_dump(pg_status=["x"])),
    "pg-status-string": json.dumps(_dump(pg_status="x")),
    "deep-nesting": json.dumps(_dump()).replace('"entries": [', '"x": ' + "[" * 200_000 + "]" * 200_000 + ', "entries": ['),
    "5000-digit-int": json.dumps(_dump()).replace('"collective_seq_id": 1', '"collective_seq_id": ' + "9" * 5000),
}


@pytest.mark.parametrize("case", sorted(_JSON_CASES))
def test_malformed_json_dump_is_one_line_naming_the_file(tmp_path: Path, case: str) -> None:
    folder = _folder(tmp_path, _JSON_CASES[case].encode())
    _one_line(_run("analyze", str(folder)), "fr_trace_1")


def test_lone_surrogate_in_names_is_printed_escaped(tmp_path: Path) -> None:
    entry = _entry(process_group=["0", "pg\ud800"], profiling_name="gloo:op\udcff", state="scheduled", retired=False)
    text = json.dumps(_dump(world=1, entries=[entry], pg_status={})).encode()
    folder = Path(os.fsdecode(os.fsencode(tmp_path) + b"/dumps\xff"))  # a non-UTF-8 folder name too
    folder.mkdir()
    (folder / "fr_trace_0").write_bytes(text)
    res = _run("analyze", str(folder))
    assert res.returncode == 1 and "Traceback" not in res.stderr, res.stderr
    assert "entered op\\udcff #1 of group" in res.stdout, res.stdout
    res = _run("analyze", str(folder), "--json")
    assert res.returncode == 1, res.stderr
    json.loads(res.stdout)
    res = _run("repair", str(folder), str(tmp_path / "out"))
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr


# --- pickles ----------------------------------------------------------------------------

_MARK = "@@HOSTILE@@"


def _splice(obj: dict[str, object], payload: bytes) -> bytes:
    """Protocol-2 pickle of ``obj`` with the string _MARK replaced by raw opcodes ``payload``."""
    data = pickle.dumps(obj, protocol=2)
    enc = _MARK.encode()
    marker = b"X" + len(enc).to_bytes(4, "little") + enc
    assert data.count(marker) == 1
    return data.replace(marker, payload)


def _deep(n: int) -> bytes:
    return b"]" * n + b"a" * (n - 1)  # n nested lists (EMPTY_LIST, then APPEND each into the one below)


def _bomb(levels: int = 40) -> bytes:
    """One list shared 2**levels times through the memo: a few hundred bytes."""
    out = b"]q\x00" + b"0"  # EMPTY_LIST, BINPUT 0, POP
    for i in range(levels):  # memo[i + 1] = [memo[i], memo[i]]
        out += b"](" + b"h" + bytes([i]) + b"h" + bytes([i]) + b"eq" + bytes([i + 1]) + b"0"
    out += b"h" + bytes([levels])  # BINGET the top one
    return out


_PICKLE_PLACES = {
    "input_sizes": lambda: _dump(entries=[_entry(input_sizes=_MARK)]),
    "frames": lambda: _dump(entries=[_entry(frames=_MARK)]),
    "pg_config_ranks": lambda: _dump(pg_config={"0": {"name": "0", "desc": "default_pg", "ranks": _MARK}}),
    "unknown_key": lambda: _dump(extra=_MARK),
    "ncclx_meta": lambda: _dump(ncclx={"main_thread_at": _MARK, "world_size": _MARK}),
}


@pytest.mark.parametrize("place", sorted(_PICKLE_PLACES))
@pytest.mark.parametrize("kind", ["memo-bomb", "deep"])
def test_hostile_pickle_stays_bounded(tmp_path: Path, place: str, kind: str) -> None:
    payload = _bomb() if kind == "memo-bomb" else _deep(100_000)
    data = _splice(_PICKLE_PLACES[place](), payload)
    assert len(data) < 400_000
    folder = _folder(tmp_path, data)
    res = _run("analyze", str(folder), "--json")
    assert "Traceback" not in res.stderr, res.stderr[-2000:]
    if res.returncode == 2:
        _one_line(res, "fr_trace_1")
    else:
        assert res.returncode in (0, 1), res.stderr
        json.loads(res.stdout)


def test_huge_pickled_int_seq_is_one_line(tmp_path: Path) -> None:
    data = pickle.dumps(_dump(entries=[_entry(seq=10**5000)]))
    _one_line(_run("analyze", str(_folder(tmp_path, data))), "fr_trace_1", "collective_seq_id")


def test_oversized_file_is_refused_before_reading(tmp_path: Path) -> None:
    folder = _folder(tmp_path, pickle.dumps(_dump(entries=[_entry()] * 3)) + b"\0" * (2 << 20))
    _one_line(_run("analyze", str(folder), "--max-dump-mb", "1"), "fr_trace_1", "--max-dump-mb")


# --- file names ---------------------------------------------------------------------------


def test_non_ascii_digit_suffix_is_not_a_rank(tmp_path: Path) -> None:
    (tmp_path / "fr_trace_0").write_bytes(pickle.dumps(_dump(world=1)))
    (tmp_path / "fr_trace_²").write_bytes(b"junk")
    res = _run("analyze", str(tmp_path), "--prefix", "fr_trace_")
    assert res.returncode == 0, res.stdout + res.stderr


@pytest.mark.parametrize("stray", ["fr_trace_7", "fr_trace_20241130", "fr_trace_99999999999", "fr_trace_" + "9" * 200])
def test_stray_rank_number_is_named_and_ignored(tmp_path: Path, stray: str) -> None:
    good = pickle.dumps(_dump(world=2))
    (tmp_path / "fr_trace_0").write_bytes(good)
    (tmp_path / "fr_trace_1").write_bytes(good)
    (tmp_path / stray).write_bytes(good)  # a copy of a real dump, or a dated backup
    res = _run("analyze", str(tmp_path), "--json")
    assert res.returncode == 0, res.stderr[-2000:]
    report = json.loads(res.stdout)
    assert [d["rank"] for d in report["dumps"]] == [0, 1]
    assert report["groups"][0]["ranks"] == [0, 1]
    assert any(i.startswith(stray[:30]) for i in report["ignored"]), report["ignored"]
    human = _run("analyze", str(tmp_path))
    assert human.returncode == 0
    assert "ignored: fr_trace_" in human.stdout


# --- fr repair -----------------------------------------------------------------------------


def test_repair_never_leaves_a_partial_out(tmp_path: Path) -> None:
    src = tmp_path / "dumps"
    src.mkdir()
    (src / "fr_trace_0").write_bytes(pickle.dumps(_dump()))
    # analysable (the loader never walks unknown keys), but too deep to pickle back
    (src / "fr_trace_1").write_bytes(_splice(_dump(extra=_MARK), _deep(100_000)))
    out = tmp_path / "out"
    res = _run("repair", str(src), str(out))
    _one_line(res, "nested too deeply")
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dumps"]  # no temporary folder left


def test_repair_refuses_a_non_empty_out_and_writes_an_empty_one(tmp_path: Path) -> None:
    src = tmp_path / "dumps"
    src.mkdir()
    (src / "fr_trace_0").write_bytes(pickle.dumps(_dump(world=1)))
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep").write_text("mine")
    _one_line(_run("repair", str(src), str(out)), str(out), "not an empty folder")
    assert [p.name for p in out.iterdir()] == ["keep"]
    (out / "keep").unlink()
    res = _run("repair", str(src), str(out))
    assert res.returncode == 0, res.stderr
    assert [p.name for p in out.iterdir()] == ["fr_trace_0"]
