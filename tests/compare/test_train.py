"""``ncclx compare --train``: a tiny CPU model under two arms, identical, perturbed, broken."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from ncclx_migrate._compare._trainlog import child_error

from .test_collectives import _heavy, compare, perturbed

TINY = str(Path(__file__).parent / "train_tiny.py")
# torch prefixes an uncaught error with the rank once a process group is up (2.15).
ERROR = "[rank0]: RuntimeError: tiny: the batch at step 2 has the wrong shape"


@_heavy
def test_identical_arms_agree_step_by_step_and_in_step_time() -> None:
    # 50 ms of work a step in both arms; no load on a shared node makes 9 of 10 steps of one
    # arm twice as long as the other's: a 100% threshold keeps this test to what it proves.
    proc = compare("--train", "--threshold", "100", "--arm", "gloo,TINY_SLEEP=0.05", "--arm", "gloo,TINY_SLEEP=0.05",
                   "--", sys.executable, TINY, "12")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert lines[-1] == "result: the arms agree: 1 metric equal exactly over 12 steps"
    speed = lines[-2]
    assert speed.startswith("  step time: B ") and " ms a step (medians); B/A " in speed
    assert " over 10 paired steps: " in speed and "slower" not in speed


def test_a_slower_arm_is_named_when_the_whole_interval_is_beyond_the_threshold(tmp_path: Path) -> None:
    # Step time is what the tool measures from the lines' arrival: a script that sleeps is a
    # real step time without the cost of a torch import per arm.
    script = tmp_path / "steps.py"
    script.write_text("import os, time\nfor i in range(12):\n"
                      "    time.sleep(float(os.environ['WORK']))\n    print(f'step={i} loss={1 / (i + 1)!r}')\n")
    proc = compare("--train", "--threshold", "100", "--arm", "gloo,WORK=0.01", "--arm", "gloo,WORK=0.2", "--",
                   sys.executable, str(script))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("result: the arms agree: 1 metric equal exactly over 12 steps, but B is slower: "
                           "step time B/A ")
    assert last.endswith(") beyond the 100% threshold") and "(95% interval " in last


def test_tokens_per_second_is_compared_where_the_output_prints_it(tmp_path: Path) -> None:
    script = tmp_path / "tps.py"
    script.write_text("import os\nfor i in range(12):\n"
                      "    print(f'step {i} loss={1 / (i + 1)!r} tokens/s={int(os.environ[\"TPS\"]) + i % 3}')\n")
    proc = compare("--train", "--format", "json", "--arm", "gloo,TPS=1000", "--arm", "gloo,TPS=400", "--",
                   sys.executable, str(script))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    speed = report["speed"]
    assert (speed["measure"], speed["decision"], speed["pairs"], speed["A"], speed["B"]) == (
        "tokens/s", "slower", 11, 1001, 401)
    assert 2.4 < speed["interval"][0] <= speed["ratio"] <= speed["interval"][1] < 2.6
    assert report["verdict"].startswith("the arms agree: 1 metric equal exactly over 12 steps, but B is slower: "
                                        "tokens/s B/A 2.49")


def test_require_sensitivity_gates_on_the_step_time_interval(tmp_path: Path) -> None:
    """With --train, --require-sensitivity asks the step time's interval what the collectives'
    ask theirs: equal numbers exit 3 when a slowdown of PCT could not have been seen.  tokens/s
    printed by the script makes the ratios exact: steady in one run, B alternating 1000 and
    500 tokens/s (every other step twice as slow) in another."""
    script = tmp_path / "tps.py"
    script.write_text("import os, sys\nfor i in range(int(sys.argv[1])):\n"
                      "    tps = 1000 // (1 + int(os.environ['WOBBLE']) * (i % 2))\n"
                      "    print(f'step {i} loss={1 / (i + 1)!r} tokens/s={tps}')\n")

    def run(wobble: str, steps: str) -> tuple[int, dict[str, Any]]:
        proc = compare("--train", "--require-sensitivity", "50", "--format", "json", "--arm", "gloo,WOBBLE=0",
                       "--arm", f"gloo,WOBBLE={wobble}", "--", sys.executable, str(script), steps)
        return proc.returncode, json.loads(proc.stdout)

    rc, report = run("0", "12")  # every ratio 1: a 5% slowdown would have been seen
    assert (rc, report["speed"]["detectable"]) == (0, 0.05), report["verdict"]
    assert report["verdict"] == "the arms agree: 1 metric equal exactly over 12 steps"
    rc, report = run("1", "12")  # 11 pairs, 6 of them at 2x: the interval reaches from 1 to 2
    assert (rc, report["speed"]["decision"], report["speed"]["interval"]) == (3, "unclear", [1.0, 2.0])
    assert report["verdict"] == ("not sensitive enough for --require-sensitivity 50%: could not detect a step-time "
                                 "slowdown smaller than 110% here (1 metric equal exactly over 12 steps)")
    rc, report = run("0", "4")  # 3 timed pairs: no interval at all
    assert rc == 3 and report["verdict"] == (
        "not sensitive enough for --require-sensitivity 50%: 3 paired steps are too few to detect a step-time "
        "slowdown of any size (run more steps) (1 metric equal exactly over 4 steps)")


@_heavy
def test_a_perturbed_all_reduce_names_the_first_divergent_step_as_the_output_does() -> None:
    # The Linear layer's bias gradient is one fp32 (4 bytes): one off by one from the first
    # step, so the second loss differs: the script prints it as step=1 (it counts from 0).
    proc = compare("--train", "--steps", "5", "--arm", "gloo", "--arm", perturbed("wrong:all_reduce_sum:4:0"),
                   "--", sys.executable, TINY, "5")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("result: the arms diverge: metric 'loss[=:] *([-0-9.eE+]+)' diverges at step 1: B ")
    assert "against A " in last and "(off by " in last


def test_lines_that_name_no_step_are_counted() -> None:
    code = "import os; print('loss=1.0'); print('loss=' + os.environ['L'])"
    proc = compare("--train", "--arm", "gloo,L=2.0", "--arm", "gloo,L=3.0", "--", sys.executable, "-c", code)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == (
        "result: the arms diverge: metric 'loss[=:] *([-0-9.eE+]+)' diverges at its 2nd value (the lines name no "
        "step): B 3.0 against A 2.0 (off by 1, relative 0.333)")


@_heavy
def test_no_metric_or_a_metric_that_never_moves_gets_no_verdict() -> None:
    code = "print('step 1 loss=1.0'); print('step 2 loss=1.0')"
    proc = compare("--train", "--arm", "gloo", "--arm", "gloo", "--", sys.executable, "-c", code)
    assert proc.returncode == 2
    assert "never moved (1.0 at every step in both arms)" in proc.stdout
    proc = compare("--train", "--arm", "gloo", "--arm", "gloo", "--metric", "gnorm=([0-9.]+)", "--",
                   sys.executable, "-c", code)
    assert proc.returncode == 2
    assert "result: no verdict: metric 'gnorm=([0-9.]+)' not found in the output of arms A and B" in proc.stdout


@_heavy
def test_a_command_that_fails_in_both_arms_is_named_with_its_own_error() -> None:
    proc = compare("--train", "--arm", "gloo,TINY_FAIL_AT=2", "--arm", "gloo,TINY_FAIL_AT=2", "--",
                   sys.executable, TINY, "5")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    out = proc.stdout
    assert out.count("    its stderr ends:\n") == 2
    assert out.count(f"    | {ERROR}\n") == 2  # the child's own traceback, both arms
    assert "--metric" not in out  # the command failed: the metric is not to blame
    assert out.strip().splitlines()[-1] == (
        f"result: no verdict: the training command failed in both arms: arm A: the command exited 1: {ERROR}; "
        f"arm B: the command exited 1: {ERROR}")


@_heavy
def test_a_command_that_fails_in_one_arm_is_a_difference_and_the_json_keeps_its_stderr() -> None:
    # Arm B is also perturbed: its numbers part at step 1, and it fails at step 2.
    proc = compare("--train", "--format", "json", "--arm", "gloo",
                   "--arm", perturbed("wrong:all_reduce_sum:4:0") + ",TINY_FAIL_AT=2", "--", sys.executable, TINY, "5")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    assert report["verdict"] == f"the arms diverge: arm B: the command exited 1: {ERROR}"
    a, b = report["arms"]
    assert (a["failed"], a["failure"], a["returncode"]) == (False, None, 0)
    assert (b["failed"], b["failure"], b["returncode"]) == (True, ERROR, 1)
    assert b["stderr_tail"][0] == "[rank0]: Traceback (most recent call last):" and b["stderr_tail"][-1] == ERROR
    metric = report["metrics"][0]
    assert metric["steps"] == {"A": [0, 1, 2, 3, 4], "B": [0, 1]}
    assert (metric["first_divergent_step"], metric["first_divergent_value"]) == (1, 2)
    assert report["findings"][1].startswith("metric 'loss[=:] *([-0-9.eE+]+)' diverges at step 1: B ")
    assert "speed" not in report  # a failed run's step times are not a speed


# torchrun's stderr (torch 2.15.0, 2 ranks, a script that raises after init_process_group),
# cut to its shape: the children's tracebacks, then torchrun's own log lines and summary.
TORCHRUN_STDERR = """\
W1203 11:45:00.280000 11107 torch/distributed/run.py:982] *****************************************
[rank1]: Traceback (most recent call last):
[rank1]:   File "/tmp/fail_train.py", line 5, in <module>
[rank1]:     raise ValueError(f"shape mismatch in rank {dist.get_rank()}")
[rank1]: ValueError: shape mismatch in rank 1
W1203 11:45:06.839000 11107 torch/distributed/elastic/multiprocessing/api.py:1028] Sending process 11122 closing signal SIGTERM
E1203 11:45:06.873000 11107 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: 1) local_rank: 0
Traceback (most recent call last):
  File "/work/main/.venv/bin/torchrun", line 6, in <module>
    sys.exit(main())
  File "/work/main/.venv/lib/python3.11/site-packages/torch/distributed/launcher/api.py", line 386, in launch_agent
    raise ChildFailedError(
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
/tmp/fail_train.py FAILED
------------------------------------------------------------
Failures:
  <NO_OTHER_FAILURES>
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  exitcode  : 1 (pid: 11121)
  error_file: <N/A>
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
============================================================"""


def test_under_torchrun_the_childs_error_is_shown_not_the_launchers_summary() -> None:
    own, error = child_error(TORCHRUN_STDERR.splitlines())
    assert error == "[rank1]: ValueError: shape mismatch in rank 1"
    assert own == TORCHRUN_STDERR.splitlines()[1:5]
