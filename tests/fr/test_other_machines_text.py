"""Text from another machine's dump never reaches the terminal raw (issue 37): frame and file
names, group descriptions and versions holding CSI, OSC 0/8/52 and lone C1 controls are shown
escaped, as Python's repr writes them, by `ncclx fr analyze` and `fr repair` on a real terminal.
Hand-made pickles, as torch writes them; no torch process."""

from __future__ import annotations

import pickle
from pathlib import Path

from ..conftest import on_a_terminal
from ..report.test_other_machines_text import EVIL, RAW, SHOWN


def _entry(seq: int, state: str) -> dict[str, object]:
    return {"process_group": ["0", "default_pg" + EVIL], "collective_seq_id": seq,
            "profiling_name": "gloo:all_reduce", "input_sizes": [[4]], "input_dtypes": ["Float"],
            "output_sizes": [[4]], "output_dtypes": ["Float"], "state": state, "retired": state == "completed",
            "is_p2p": False, "frames": [{"name": "train_step" + EVIL, "filename": "/job/train" + EVIL + ".py",
                                         "line": 12}]}


def _hung_job(folder: Path) -> Path:
    """Rank 0 waits in all_reduce #2, which rank 1 never entered."""
    folder.mkdir()
    for rank in (0, 1):
        entries = [_entry(1, "completed")] + ([_entry(2, "scheduled")] if rank == 0 else [])
        dump = {"version": "2.10", "pg_config": {"0": {"name": "0", "desc": "default_pg" + EVIL, "ranks": "[0, 1]"}},
                "pg_status": {"0": {"last_enqueued_collective": len(entries), "last_completed_collective": 1}},
                "entries": entries}
        (folder / f"fr_trace_{rank}").write_bytes(pickle.dumps(dump))
    return folder


def test_fr_analyze_shows_control_sequences_never_sends_them(tmp_path: Path) -> None:
    run = on_a_terminal("fr", "analyze", str(_hung_job(tmp_path / "dumps")))
    assert run.returncode == 1, run.terminal
    for raw in RAW:
        assert raw not in run.terminal, (raw, run.terminal)
    screen = run.terminal.replace("\r\n", "\n")
    assert f"rank 1 never entered all_reduce #2 of group default_pg{SHOWN}; rank 0 waited" in screen
    assert f"the waiting ranks called it from train_step{SHOWN} at /job/train{SHOWN}.py:12" in screen
    assert "verdict: culprit rank 1" in screen


def test_fr_repair_counts_entries_in_agreement(tmp_path: Path) -> None:
    run = on_a_terminal("fr", "repair", str(_hung_job(tmp_path / "dumps")), str(tmp_path / "out"))
    assert run.returncode == 0, run.terminal
    screen = run.terminal.replace("\r\n", "\n")
    assert "fr_trace_0: rank 0 (gloo, 2 entries)\n" in screen and "fr_trace_1: rank 1 (gloo, 1 entry)\n" in screen
