"""The hang watchdog on real gloo runs: every rank leaves a dump, ranks that never entered
the collective included, and `ncclx fr analyze` (and torchfrtrace, unrepaired) name the culprit."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from ..conftest import run_ncclx
from .scenarios import PREFIX
from .torchfrtrace import Verdict, torchfrtrace_runs

pytestmark = [pytest.mark.torch, pytest.mark.slow]

# The culprit stays out 5 s, then exits; gloo's own timeout (30 s) never fires first.
FAST = {"GLOO_TIMEOUT": "30", "SKIP_SLEEP": "5", "HANG_DUMP": "1.5"}


# The runs torchfrtrace reads too.
_SKIP = dict(name="skip", world=4, culprit=2, mode="watchdog", **FAST)
_TYPE = dict(name="type", world=3, culprit=1, mode="watchdog", GLOO_TIMEOUT="6", HANG_DUMP="1.5")


def _meta(folder: Path, rank: int) -> dict:
    with open(folder / f"{PREFIX}{rank}", "rb") as f:
        return pickle.load(f)["ncclx"]


def _report(folder: Path) -> tuple[int, dict, str]:
    res = run_ncclx("fr", "analyze", str(folder), "--json")
    human = run_ncclx("fr", "analyze", str(folder))
    return res.returncode, json.loads(res.stdout), human.stdout


def _group(report: dict, name: str = "default_pg") -> dict:
    return next(g for g in report["groups"] if g["group"] == name)


def test_every_rank_dumps_and_the_skipper_is_named(scenario) -> None:
    run = scenario(**_SKIP)
    assert run.files() == [f"{PREFIX}{r}" for r in range(4)], run.outputs
    # The rank that never entered the collective dumped because a peer asked it to.
    assert _meta(run.folder, 2)["trigger"] == "peer-request"
    triggers = {_meta(run.folder, r)["trigger"] for r in (0, 1, 3)}
    assert "local-deadline" in triggers
    assert all(f"ncclx hang dump (rank {r}):" in run.outputs[r] for r in range(4))  # each names its rank
    # The waiting ranks dumped while #3 still hung (within the limit, not after gloo gave up).
    with open(run.folder / f"{PREFIX}0", "rb") as f:
        last = pickle.load(f)["entries"][-1]
    assert (last["collective_seq_id"], last["retired"]) == (3, False)
    code, report, human = _report(run.folder)
    assert code == 1
    assert "rank 2 never entered all_reduce #3 of group default_pg; ranks 0, 1 and 3 waited" in human
    assert "rank 2 was at main at " in human and "worker.py" in human  # where the culprit was
    assert "repaired:" not in human  # the watchdog writes gloo's pg_config correctly
    g = _group(report)
    assert g["first_incomplete"] == {
        "seq": 3, "op": "all_reduce", "why": "never-entered",
        "missing_ranks": [2], "entered_ranks": [0, 1, 3], "no_dump_ranks": [],
    }
    assert report["missing_dumps"] == []


@pytest.fixture(scope="module")
def torchs(scenario) -> dict[str, Verdict]:  # type: ignore[no-untyped-def]
    """torchfrtrace's verdicts on the unrepaired dumps, torch imported once for both."""
    runs = {"skip": _SKIP, "type": _TYPE}
    verdicts = torchfrtrace_runs([(scenario(**kw).folder, "-p", PREFIX) for kw in runs.values()])
    return dict(zip(runs, verdicts, strict=True))


def test_torchfrtrace_reads_watchdog_dumps_without_repair(torchs) -> None:  # type: ignore[no-untyped-def]
    verdict = torchs["skip"]
    assert "Not all ranks joining collective, sequence number: 3" in verdict.output, verdict.output
    assert verdict.missing_ranks == {2}


def test_rank_that_exits(scenario) -> None:
    run = scenario("exit", world=3, culprit=2, mode="watchdog", **FAST)
    assert run.files() == [f"{PREFIX}0", f"{PREFIX}1"], run.outputs
    code, report, human = _report(run.folder)
    assert code == 1
    assert report["missing_dumps"] == [2]
    assert _group(report)["culprit_ranks"] == [2]
    assert "rank 2 left no dump" in human


def test_type_mismatch(scenario, torchs) -> None:  # type: ignore[no-untyped-def]
    run = scenario(**_TYPE)
    assert run.files() == [f"{PREFIX}{r}" for r in range(3)], run.outputs
    code, report, human = _report(run.folder)
    assert code == 1
    assert "rank 1 called broadcast as collective #3 of group default_pg where the other ranks called all_reduce" in human
    # Dumped while the collective hung: nobody had finished it.
    assert _group(report)["first_incomplete"]["why"] == "not-completed"
    verdict = torchs["type"]
    assert verdict.culprit_ranks == set(_group(report)["culprit_ranks"]) == {1}


def test_hang_in_a_barrier(scenario) -> None:
    run = scenario("barrier", world=3, culprit=0, mode="watchdog", **FAST)
    assert run.files() == [f"{PREFIX}{r}" for r in range(3)], run.outputs
    code, report, human = _report(run.folder)
    assert code == 1
    assert "rank 0 never entered barrier #3 of group default_pg; ranks 1 and 2 waited" in human
    assert _group(report)["culprit_ranks"] == [0]


def test_hang_in_a_subgroup(scenario) -> None:
    run = scenario("subgroup", world=3, culprit=2, mode="watchdog", **FAST)
    assert run.files() == [f"{PREFIX}{r}" for r in range(3)], run.outputs
    code, report, human = _report(run.folder)
    assert code == 1
    assert "rank 2 never entered all_reduce #1 of group tail; rank 1 waited" in human
    tail = _group(report, "tail")
    assert tail["ranks"] == [1, 2]
    assert tail["culprit_ranks"] == [2]
    assert _group(report)["first_incomplete"] is None


def test_stack_traces_in_the_dump(scenario) -> None:
    run = scenario("skip", world=2, culprit=1, mode="watchdog", HANG_DUMP_STACKS="1", **FAST)
    with open(run.folder / f"{PREFIX}0", "rb") as f:
        dump = pickle.load(f)
    last = dump["entries"][-1]
    assert last["collective_seq_id"] == 3 and last["retired"] is False
    assert any(fr["filename"].endswith("worker.py") for fr in last["frames"]), last["frames"]
    assert any("worker.py" in line for s in dump["ncclx"]["python_stacks"].values() for line in map(str, s))


def test_env_var_turns_it_on(scenario) -> None:
    run = scenario("skip", world=3, culprit=1, mode="env", NCCLX_HANG_DUMP="1.5", **FAST)
    assert run.files() == [f"{PREFIX}{r}" for r in range(3)], run.outputs
    code, report, _ = _report(run.folder)
    assert code == 1
    assert _group(report)["culprit_ranks"] == [1]


def test_healthy_run_writes_nothing(scenario) -> None:
    run = scenario("ok", world=3, mode="watchdog", SKIP_SLEEP="4", HANG_DUMP="1")
    assert all("collective #3 completed" in o for o in run.outputs), run.outputs
    assert run.files() == []


# --- in-process behaviour (no process group needed) ------------------------------------


def _py(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    import os

    base = {k: v for k, v in os.environ.items() if not k.startswith(("TORCH_", "NCCLX_"))}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={**base, **env}, timeout=60
    )


def test_import_with_env_var_starts_a_thread_but_not_torch() -> None:
    code = (
        "import sys, threading, ncclx_migrate\n"
        "print('torch' in sys.modules, [t.name for t in threading.enumerate() if t.name.startswith('ncclx')])"
    )
    assert _py(code, NCCLX_HANG_DUMP="60").stdout.split() == ["False", "['ncclx-hang-dump']"]
    assert _py(code).stdout.split() == ["False", "[]"]


def test_bad_env_value_warns_in_one_line() -> None:
    res = _py("import os\nimport ncclx_migrate", NCCLX_HANG_DUMP="soon")
    assert res.returncode == 0
    # Attributed to the user's import line, not to ncclx_migrate's own files.
    assert res.stderr.startswith("<string>:2: RuntimeWarning: "), res.stderr
    assert "NCCLX_HANG_DUMP='soon' is not a number of seconds > 0; the hang watchdog is off" in res.stderr
    assert "Traceback" not in res.stderr


def test_handle_stop_and_retune() -> None:
    code = (
        "import threading, ncclx_migrate\n"
        "h = ncclx_migrate.enable_hang_dump(30)\n"
        "assert ncclx_migrate.enable_hang_dump(10) is h and h.seconds == 10\n"
        "h.stop(); print(h.running, [t.name for t in threading.enumerate() if t.name.startswith('ncclx')])\n"
        "try:\n    ncclx_migrate.enable_hang_dump(-1)\nexcept ValueError:\n    print('refused')\n"
    )
    res = _py(code)
    assert res.stdout.split() == ["False", "[]", "refused"], res.stderr


_PEER_REQUEST = """
import json, os, sys, time
from datetime import timedelta
import torch, torch.distributed as dist
import ncclx_migrate

store = dist.TCPStore("127.0.0.1", 0, 1, is_master=True, timeout=timedelta(seconds=10))
# A request left by an earlier attempt of the job (torchelastic keeps its store).
store.add("ncclx/hang_dump/count", 1)
store.set("ncclx/hang_dump/1", json.dumps({"rank": 5, "reason": "old attempt", "recorder": "gloo"}))
hang = ncclx_migrate.enable_hang_dump(0.4, stack_traces=False)
dist.init_process_group("gloo", store=store, rank=0, world_size=1)
dist.all_reduce(torch.ones(2))
time.sleep(1.0)
print("stale:", [p.name for p in hang.dumps])
n = store.add("ncclx/hang_dump/count", 1)
store.set(f"ncclx/hang_dump/{n}", json.dumps({"rank": 7, "reason": "test", "recorder": "gloo"}))
for _ in range(50):
    if hang.dumps:
        break
    time.sleep(0.1)
print("fresh:", [p.name for p in hang.dumps])
os._exit(0)
"""


def test_peer_request_protocol(tmp_path: Path) -> None:
    """A rank dumps when a peer posts a request in the store, and ignores stale ones."""
    pytest.importorskip("torch")
    res = _py(_PEER_REQUEST, TORCH_FR_DUMP_TEMP_FILE=str(tmp_path / PREFIX))
    assert res.stdout.split("\n")[:2] == ["stale: []", f"fresh: ['{PREFIX}0']"], res.stdout + res.stderr
    assert "rank 7 asked: test" in res.stderr
    assert _meta(tmp_path, 0)["trigger"] == "peer-request"
