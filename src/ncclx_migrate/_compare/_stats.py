"""The statistics of ``ncclx compare``: paired rounds, sign-test intervals, Benjamini-Hochberg.

Torch-free and distribution-free.  A cell (collective, dtype, size) gives one ratio per round:
arm B's block median over arm A's, measured back to back.  On a shared node the ratios are
heavy-tailed (a neighbour's burst can make one block 20x slower), so nothing here assumes a
normal distribution: the only assumption is that, were the arms the same, a round's ratio is
as likely above any value as the swapped ratio would be (the blocks alternate ABBA, so the
node's slow moments fall on both arms alike).  Under that assumption the number of rounds
whose ratio exceeds ``1 + threshold`` is at most Binomial(n, 1/2), which is the sign test and
its order-statistic confidence interval for the median ratio.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["ALPHA", "CellTest", "bh_rejected", "binom_tail", "detectable", "interval", "needed", "sign_test"]

ALPHA = 0.05  # the false-alarm rate allowed over all cells of one run, both directions together


def binom_tail(n: int, c: int) -> float:
    """P(Binomial(n, 1/2) >= c)."""
    if c <= 0:
        return 1.0
    if c > n:
        return 0.0
    return sum(math.comb(n, k) for k in range(c, n + 1)) / 2.0 ** n


def needed(n: int, level: float) -> int | None:
    """The fewest of ``n`` rounds beyond the threshold that show a difference at two-sided
    ``level`` (None: even all ``n`` would not)."""
    for c in range(n + 1):
        if 2 * binom_tail(n, c) <= level:
            return c
    return None


def interval(ratios: Sequence[float], level: float) -> tuple[float, float] | None:
    """The two-sided order-statistic interval for the median ratio at ``level`` (None: too few
    rounds for any finite interval).  The interval lies wholly above ``x`` exactly when the
    sign test finds the ratio above ``x`` at that level, so the interval is the decision."""
    xs = sorted(ratios)
    c = needed(len(xs), level)
    if c is None or c == 0:
        return None
    j = len(xs) - c  # 0-based: the (n-c+1)-th smallest
    return xs[j], xs[len(xs) - 1 - j]


@dataclass(frozen=True)
class CellTest:
    n: int  # paired rounds
    ratio: float  # the median of the rounds' B/A ratios
    p_slower: float  # one-sided sign-test p that B is slower than A by more than the threshold
    p_faster: float

    @property
    def p(self) -> float:
        """Both directions tested: twice the smaller one-sided p (at most 1)."""
        return min(1.0, 2 * min(self.p_slower, self.p_faster))


def _median(xs: Sequence[float]) -> float:
    s = sorted(xs)
    m = len(s) // 2
    return s[m] if len(s) % 2 else (s[m - 1] + s[m]) / 2


def sign_test(ratios: Sequence[float], threshold: float) -> CellTest:
    n = len(ratios)
    above = sum(1 for r in ratios if r > 1 + threshold)
    below = sum(1 for r in ratios if r < 1 - threshold)
    return CellTest(n, _median(ratios) if ratios else 1.0, binom_tail(n, above), binom_tail(n, below))


def bh_rejected(ps: Sequence[float], alpha: float = ALPHA) -> tuple[set[int], float]:
    """Benjamini-Hochberg: the indices rejected, and the per-cell level that decided it
    (``alpha x rejected / m``; ``alpha / m`` when none is): a cell is rejected exactly when its
    p is at most that level, so its interval at that level is the one shown."""
    m = len(ps)
    if m == 0:
        return set(), alpha
    order = sorted(range(m), key=lambda i: ps[i])
    k = 0
    for rank, i in enumerate(order, start=1):
        if ps[i] <= alpha * rank / m:
            k = rank
    level = alpha * max(k, 1) / m
    return {i for i in order[:k]}, level


def detectable(ratios: Sequence[float], threshold: float, level: float) -> float | None:
    """The smallest steady slowdown of arm B that this cell's noise would have let the test
    find at ``level``: every round's ratio times (1 + slowdown) must put the interval's lower
    end above 1 + threshold.  None: with this few rounds no slowdown can be found."""
    xs = sorted(ratios)
    c = needed(len(xs), level)
    if c is None or c == 0 or not xs:
        return None
    low = xs[len(xs) - c] / _median(xs)  # the lower end, relative to the median (<= 1)
    return (1 + threshold) / low - 1 if low > 0 else None
