"""``ncclx compare --train``: a tiny CPU model under two arms, identical then perturbed."""

from __future__ import annotations

import sys
from pathlib import Path

from .test_collectives import HEAVY, compare, perturbed

pytestmark = HEAVY

TINY = str(Path(__file__).parent / "train_tiny.py")


def test_identical_arms_agree_step_by_step() -> None:
    proc = compare("--train", "--steps", "5", "--arm", "gloo", "--arm", "gloo", "--", sys.executable, TINY, "5")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == (
        "result: the arms agree: 1 metric equal exactly over 5 steps")


def test_a_perturbed_all_reduce_names_the_first_divergent_step() -> None:
    # The Linear layer's bias gradient is one fp32 (4 bytes): one off by one from the first step.
    proc = compare("--train", "--steps", "5", "--arm", "gloo", "--arm", perturbed("wrong:all_reduce_sum:4:0"),
                   "--", sys.executable, TINY, "5")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("result: the arms diverge: metric 'loss[=:] *([-0-9.eE+]+)' diverges at step 2: B ")
    assert "against A " in last and "(off by " in last


def test_no_metric_or_a_metric_that_never_moves_gets_no_verdict() -> None:
    code = "print('step 1 loss=1.0'); print('step 2 loss=1.0')"
    proc = compare("--train", "--arm", "gloo", "--arm", "gloo", "--", sys.executable, "-c", code)
    assert proc.returncode == 2
    assert "never moved (1.0 at every step in both arms)" in proc.stdout
    proc = compare("--train", "--arm", "gloo", "--arm", "gloo", "--metric", "gnorm=([0-9.]+)", "--",
                   sys.executable, "-c", code)
    assert proc.returncode == 2
    assert "result: no verdict: metric 'gnorm=([0-9.]+)' not found in the output of arms A and B" in proc.stdout
