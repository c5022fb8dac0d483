"""The streaming analyzer on synthetic dumps (tests/fr/synthetic.py): the same report with
and without worker processes, the per_rank view (docs/flight-recorder.md), mismatches
found across shared traces, and torchfrtrace's verdict on the same folder."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest

from ..conftest import run_ncclx
from .synthetic import PREFIX, rank_dump, write_job
from .torchfrtrace import torchfrtrace


def _report(folder: Path, *extra: str) -> dict:
    res = run_ncclx("fr", "analyze", str(folder), "--json", *extra)
    assert res.returncode == 1, res.stderr
    return json.loads(res.stdout)


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_job(tmp_path_factory.mktemp("job") / "dumps", world=12, entries=40, culprit=5, stacks=True)


def test_workers_give_the_same_report(job: Path) -> None:
    one = _report(job, "--jobs", "1")
    two = _report(job, "--jobs", "2")
    assert one == two
    g = one["groups"][0]
    assert g["first_incomplete"]["missing_ranks"] == [5]
    assert g["culprit_ranks"] == [5]
    assert one["ignored"] == []


def test_per_rank_shows_where_each_rank_stopped(job: Path) -> None:
    g = _report(job)["groups"][0]
    per = g["per_rank"]
    assert sorted(per, key=int) == [str(r) for r in range(12)]
    assert per["5"]["state"] == "never-entered"
    assert per["5"]["last_enqueued"] == 139 and per["5"]["last_completed"] == 139
    assert per["0"]["state"] == "scheduled"  # gloo never leaves "scheduled"
    assert per["0"]["last_enqueued"] == 140
    last = per["0"]["last_entries"]
    assert [e["seq"] for e in last] == [136, 137, 138, 139, 140]
    assert last[-1] == {
        "seq": 140, "op": "broadcast", "state": "scheduled", "retired": False,
        "input_sizes": [[256, 8]], "input_dtypes": ["Float"],
        "output_sizes": [[256, 8]], "output_dtypes": ["Float"],
        "frames": [{"name": "train_step", "filename": "/job/train.py", "line": 120},
                   {"name": "all_reduce", "filename": "/venv/torch/distributed/distributed_c10d.py", "line": 2950}],
    }


def test_human_report_names_ranges_and_the_callsite(job: Path) -> None:
    res = run_ncclx("fr", "analyze", str(job))
    assert res.returncode == 1
    assert "rank 5 never entered broadcast #140 of group default_pg; ranks 0-4, 6-11 waited" in res.stdout
    assert "the waiting ranks called it from train_step at /job/train.py:120" in res.stdout
    assert "#139 ranks 0-11" in res.stdout


def test_a_size_mismatch_inside_shared_traces(tmp_path: Path) -> None:
    folder = write_job(tmp_path / "dumps", world=10, entries=30, culprit=5)
    odd = rank_dump(7, 10, 30, 5)
    entry = next(e for e in odd["entries"] if e["collective_seq_id"] == 120)  # type: ignore[union-attr]
    entry["input_sizes"] = [[3, 3]]
    (folder / f"{PREFIX}7").write_bytes(pickle.dumps(odd))
    g = _report(folder, "--jobs", "2")["groups"][0]
    m = g["mismatches"][0]
    assert (m["seq"], m["field"], m["culprit_ranks"], m["found"]) == (120, "input_sizes", [7], {"7": "[[3, 3]]"})
    assert m["expected"] == "[[1024, 1024]]"
    assert g["culprit_ranks"] == [5]  # the hang still explains it first


@pytest.mark.torch
def test_torchfrtrace_agrees_on_the_synthetic_job(job: Path) -> None:
    pytest.importorskip("torch")
    ours = _report(job)["groups"][0]
    verdict = torchfrtrace(job, "-p", PREFIX)
    assert "Not all ranks joining collective, sequence number: 140" in verdict.output, verdict.output[-3000:]
    assert verdict.missing_ranks == set(ours["first_incomplete"]["missing_ranks"]) == {5}


@pytest.mark.parametrize("fmt", ["pickle", "json"])
def test_column_reader_matches_the_row_reader(fmt: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fast path (whole columns at C speed) gives exactly what the row reader gives."""
    from ncclx_migrate._fr import _load

    d = rank_dump(3, 8, 50, 5, fmt=fmt, stacks=True)
    entries = d["entries"]
    assert isinstance(entries, list)
    extra = dict(entries[10], process_group=["1", "tail"])  # a second group
    entries.insert(20, extra)
    entries.insert(30, dict(entries[29]))  # a coalesced seq
    entries[5]["input_sizes"] = [[1, 2], [3]]
    entries[6]["input_sizes"] = []
    data = json.dumps(d).encode() if fmt == "json" else pickle.dumps(d)
    fast = _load.parse_dump(data, Path("x"), 3)
    assert _load._reduce_columns(_load._decode(data, "x")[1]["entries"], {}, set()) is not None
    monkeypatch.setattr(_load, "_reduce_columns", lambda *a: None)
    slow = _load.parse_dump(data, Path("x"), 3)
    assert fast == slow
    assert sorted(fast.groups) == ["0", "1"]
