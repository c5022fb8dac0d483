"""``--train``'s speed: step time (or tokens/s, where the output prints it), arm against arm.

The steps are paired by the step the lines name (else by their place): step k of arm B
against step k of arm A did the same work, so a step that is slow in both (an evaluation, a
checkpoint, a longer batch) cancels in the ratio.  A step's time is the time between the
arrival of its metric line and the previous step's (the command's stdout is unbuffered); the
first timed step is warm-up and left out.  The decision is the collectives' one
(``_stats``): the sign-test interval of the median B/A ratio, and "slower" only when the
whole interval lies beyond ``--threshold``.
"""

from __future__ import annotations

import re
from typing import Any

from ._stats import detectable, interval, sign_test
from ._trainlog import step_name

__all__ = ["LEVEL", "TOKENS", "compare_speed", "speed_text"]

LEVEL = 0.05  # one test per run: the interval is 95%
WARM_STEPS = 1  # timed steps left out at the start (compilation, allocator warm-up)
_NUM = r"([0-9][0-9,]*(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?)"
# "tokens/s=1234", "tok/s: 1.2e4", "tokens_per_sec 1234", "1234 tokens/s"
# The named form first: in "loss=6 tokens/s=1006" the value after the name is the one.
TOKENS = (re.compile(rf"(?:\b(?:tokens?|tok)/s(?:ec)?|\btokens_per_s(?:ec(?:ond)?)?)\s*[=:]?\s*{_NUM}", re.I),
          re.compile(rf"{_NUM}\s*(?:tokens?|tok)/s(?:ec)?\b", re.I))

Lines = list[tuple[float, str, str]]


def _tokens(lines: Lines) -> dict[int | str, float]:
    out: dict[int | str, float] = {}
    n = 0
    for _, _, line in lines:
        m = TOKENS[0].search(line) or TOKENS[1].search(line)
        if m is None:
            continue
        try:
            value = float(m.group(1).replace(",", ""))
        except ValueError:
            continue
        n += 1
        step = step_name(line)
        out.setdefault(step if step is not None else f"#{n}", value)
    return out


def _step_times(arrivals: list[tuple[int | None, float]]) -> dict[int | str, float]:
    """Seconds per step from when each step's first metric line arrived."""
    first: dict[int | str, float] = {}
    for n, (step, at) in enumerate(arrivals):
        first.setdefault(step if step is not None else f"#{n}", at)
    keys = list(first)
    return {keys[i]: first[keys[i]] - first[keys[i - 1]] for i in range(1 + WARM_STEPS, len(keys))}


def compare_speed(per_arm_lines: list[Lines], per_arm_arrivals: list[list[tuple[int | None, float]]],
                  threshold: float, labels: list[str]) -> dict[str, Any]:
    """The speed item of the report: what was timed, the pairs' median ratio, its interval,
    the decision ("slower", "faster", "same", "unclear", "too few") and the smallest slowdown
    the run could have seen."""
    tokens = [_tokens(lines) for lines in per_arm_lines]
    if all(len(t) > WARM_STEPS for t in tokens):
        kind = "tokens/s"
        a, b = ({k: v for k, v in list(t.items())[WARM_STEPS:]} for t in (tokens[0], tokens[-1]))
        ratio = {k: a[k] / b[k] for k in a if k in b and b[k] > 0}  # as a time: > 1 is B slower
    else:
        kind = "step time"
        a, b = _step_times(per_arm_arrivals[0]), _step_times(per_arm_arrivals[-1])
        ratio = {k: b[k] / a[k] for k in a if k in b and a[k] > 0}
    ratios = list(ratio.values())
    item: dict[str, Any] = {"measure": kind, "pairs": len(ratios), "threshold": threshold, "level": LEVEL,
                            labels[0]: _median(list(a.values())), labels[-1]: _median(list(b.values()))}
    ci = interval(ratios, LEVEL) if ratios else None
    if ci is None:
        item.update(decision="too few", ratio=None, interval=None, detectable=None)
        return item
    test = sign_test(ratios, threshold)
    low, high = ci
    if low > 1 + threshold:
        decision = "slower"
    elif high < 1 - threshold:
        decision = "faster"
    elif low >= 1 - threshold and high <= 1 + threshold:
        decision = "same"
    else:
        decision = "unclear"
    item.update(decision=decision, ratio=round(test.ratio, 4), interval=[round(low, 4), round(high, 4)],
                detectable=_round(detectable(ratios, threshold, LEVEL)))
    return item


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


def _median(xs: list[float]) -> float | None:
    if not xs:
        return None
    s = sorted(xs)
    m = len(s) // 2
    return s[m] if len(s) % 2 else (s[m - 1] + s[m]) / 2


def speed_text(item: dict[str, Any], labels: list[str]) -> str:
    """One line for the text report."""
    a, b = labels[0], labels[-1]
    unit = "tokens/s" if item["measure"] == "tokens/s" else "ms a step"

    def show(v: float | None) -> str:
        if v is None:
            return "-"
        return f"{v:,.0f}" if item["measure"] == "tokens/s" else f"{v * 1000:,.1f}"

    head = f"{item['measure']}: {b} {show(item[b])} against {a} {show(item[a])} {unit} (medians)"
    if item["decision"] == "too few":
        return f"{head}; {item['pairs']} paired steps are too few for an interval: run more steps"
    low, high = item["interval"]
    span = f"{b}/{a} {item['ratio']:.3f}, 95% interval {low:.3f} to {high:.3f} over {item['pairs']} paired steps"
    pct = f"{item['threshold']:.0%}"
    said = {"slower": f"{b} is slower beyond the {pct} threshold",
            "faster": f"{b} is faster beyond the {pct} threshold",
            "same": f"the same within {pct}",
            "unclear": f"no difference beyond {pct} shown"}[item["decision"]]
    if item["decision"] in ("same", "unclear"):
        seen = item["detectable"]
        said += (f"; only a slowdown of {seen:.0%} or more could have been seen" if seen is not None
                 else "; too few steps to see any slowdown")
    return f"{head}; {span}: {said}"
