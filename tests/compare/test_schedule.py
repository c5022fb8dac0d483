"""The interleaving order of ``ncclx compare`` (torch-free): every case alternates which arm
goes first from round to round, whatever the number of cases."""

from __future__ import annotations

import pytest

from ncclx_migrate._compare._run import schedule
from ncclx_migrate._compare._stats import bh_rejected, detectable, interval, needed, sign_test


@pytest.mark.parametrize("cases", [1, 2, 3, 4, 7])
def test_each_case_alternates_which_arm_goes_first(cases: int) -> None:
    order = schedule(cases, range(6))
    assert len(order) == 2 * 6 * cases
    for i in range(cases):
        firsts = [order[n][2] for n in range(0, len(order), 2) if order[n][1] == i]
        assert firsts == [0, 1, 0, 1, 0, 1] if i % 2 == 0 else [1, 0, 1, 0, 1, 0]
    assert all(order[n][:2] == order[n + 1][:2] and order[n][2] != order[n + 1][2] for n in range(0, len(order), 2))


def test_the_sign_test_and_its_interval_decide_alike() -> None:
    ratios = [1.3, 1.25, 1.4, 1.2, 1.35, 1.3, 1.28, 1.5, 1.22, 1.31]
    t = sign_test(ratios, 0.05)
    assert t.p_slower == 1 / 1024 and t.p == 2 / 1024
    assert interval(ratios, 0.05) == (1.22, 1.4)  # the 2nd smallest and the 2nd largest of 10
    assert needed(10, 0.05) == 9 and needed(4, 0.05) is None and interval(ratios[:4], 0.05) is None
    # The median is 1.3; the interval's lower end, 1.22, sits 1.3/1.22 below it: a slowdown must lift it past 1.05.
    size = detectable(ratios, 0.05, 0.05)
    assert size is not None and abs(size - (1.05 * 1.3 / 1.22 - 1)) < 1e-9


def test_benjamini_hochberg_level_matches_what_it_rejects() -> None:
    rejected, level = bh_rejected([0.001, 0.002, 0.04, 0.3])
    assert rejected == {0, 1} and level == 0.05 * 2 / 4
    assert bh_rejected([0.5, 0.9]) == (set(), 0.025)
