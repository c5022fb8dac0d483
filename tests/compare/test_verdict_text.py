"""What a user reads of ``ncclx compare``'s timing verdict (torch-free): the rounds are made up
here, the judging and the text are the command's own (``_verdict.judge``, ``_render``).

Issue 33 §3, "Reading it": every regression is named (not only the first), never as
"regression: regression:", the counts agree in number, and a case shows the interval that
decided it, not a spread such as "±417% slower"."""

from __future__ import annotations

import random
from typing import Any

from ncclx_migrate._compare._render import render_text
from ncclx_migrate._compare._run import ArmRun, RankOut, Settings, case_list
from ncclx_migrate._compare._spec import parse_arm
from ncclx_migrate._compare._verdict import judge

S = Settings(world=2, device="cpu", sizes=[1024, 65536], dtypes=["fp32", "int32"],
             collectives=["all_reduce_sum", "broadcast"], warmup=1, iters=20, timeout=60, rounds=20)


def _runs(slow: dict[tuple[str, str, int], tuple[float, float]]) -> list[ArmRun]:
    """Both arms' records, 2 ranks each, the sweep's 20 rounds and 20 re-measured ones, with
    +-3% of noise; ``slow``: case -> B's factor in the sweep and in the re-measure."""
    rng = random.Random(33)
    runs = []
    for label in "AB":
        ranks = {}
        for rank in range(S.world):
            cases: list[dict[str, Any]] = []
            for coll, dtype, nbytes in case_list(S):
                sweep, again = slow.get((coll, dtype, nbytes), (1.0, 1.0)) if label == "B" else (1.0, 1.0)
                for rnd in range(2 * S.rounds):
                    factor = sweep if rnd < S.rounds else again
                    us = 100.0 * factor * rng.uniform(0.97, 1.03)
                    cases.append({"c": coll, "t": dtype, "s": nbytes, "r": rnd, "us": [us], "check": "ok"})
            ranks[rank] = RankOut(head={"rank": rank, "impl": "gloo"}, cases=cases, done=True, stage="finished")
        runs.append(ArmRun(parse_arm("gloo", label, "gloo"), ranks, 1.0, False, [], startup=1.0))
    return runs


def _said(text: str, prefix: str) -> list[str]:
    """The wrapped paragraphs that start with ``prefix``, each on one line again."""
    out: list[str] = []
    collecting = False
    for line in text.splitlines():
        if not line.startswith(" "):
            collecting = line.startswith(prefix)
            if collecting:
                out.append(line)
        elif collecting:
            out[-1] += " " + line.strip()
    return out


def _read(slow: dict[tuple[str, str, int], tuple[float, float]]) -> tuple[dict[str, Any], str]:
    report = judge(_runs(slow), S, 0.05, "2.15.0")
    return report, render_text(report, width=100)


def test_every_regression_is_named_with_the_interval_that_decided_it() -> None:
    slowed = [("all_reduce_sum", dtype, n) for dtype in S.dtypes for n in S.sizes]
    report, text = _read({case: (2.0, 2.0) for case in slowed})
    assert report["exit"] == 1 and len(report["regressions"]) == 4 and report["improvements"] == []
    [result] = _said(text, "result: ")
    assert result == ("result: the arms disagree (0 mismatches, 4 regressions): B slower than A beyond 5% in "
                      "all_reduce_sum 1K fp32, all_reduce_sum 64K fp32, all_reduce_sum 1K int32, "
                      "all_reduce_sum 64K int32")
    assert "regression: regression" not in text and "±" not in text
    slower = _said(text, "slower: ")
    assert [line.split(":")[1].strip() for line in slower] == [
        "all_reduce_sum 1K fp32", "all_reduce_sum 64K fp32", "all_reduce_sum 1K int32", "all_reduce_sum 64K int32"]
    for line, item in zip(slower, report["regressions"], strict=True):
        low, high = item["remeasured"]
        assert 0.85 < low <= high < 1.15  # 2x, within the noise
        assert line.endswith(f"(measured again: {low:+.1%} to {high:+.1%}, wholly beyond the 5% threshold)")
    rows = _rows(text)
    assert len(rows) == 8
    for item in report["regressions"]:  # the table shows the re-measured interval, the one that decided it
        low, high = item["remeasured"]
        line = rows[item["collective"], "1K" if item["bytes"] == 1024 else "64K", item["dtype"]]
        assert line.split()[-3:] == [f"[{low * 100:+.0f}..{high * 100:+.0f}%]", "slower", "ok"], line
    assert [key for key, line in rows.items() if "slower" in line] == slowed_keys(slowed)


def slowed_keys(cases: list[tuple[str, str, int]]) -> list[tuple[str, str, str]]:
    return [(c, "1K" if n == 1024 else "64K", t) for c, t, n in cases]


def _rows(text: str) -> dict[tuple[str, str, str], str]:
    """(collective, size, dtype) -> its table row."""
    out, coll = {}, ""
    for line in text.splitlines():
        if line and not line.startswith(" "):
            coll = line if line in S.collectives else ""
        elif coll and line.startswith(("  1K ", "  64K ")):
            size, dtype = line.split()[:2]
            out[coll, size, dtype] = line
    return out


def test_counts_agree_in_number_and_a_burst_not_seen_again_is_not_named() -> None:
    one = ("broadcast", "int32", 65536)
    burst = ("all_reduce_sum", "fp32", 1024)
    report, text = _read({one: (1.5, 1.5), burst: (3.0, 1.0)})
    assert report["exit"] == 1
    [result] = _said(text, "result: ")
    assert result == ("result: the arms disagree (0 mismatches, 1 regression): B slower than A beyond 5% in "
                      "broadcast 64K int32")
    [unconfirmed] = _said(text, "not confirmed: ")
    assert unconfirmed.startswith("not confirmed: 1 case looked different in the sweep but not when measured "
                                  "again: all_reduce_sum 1K fp32 (")
    assert "1 cases" not in text and "1 regressions" not in text
    # S: 1 warm-up call, and 20 calls over 20 rounds
    assert "20 paired rounds per case, the arms alternating ABBA; per round and arm 1 timed call (1 warm-up call " \
           "first);" in " ".join(text.split())


def test_identical_arms_agree_and_say_what_could_have_been_seen() -> None:
    """+-3% of noise in each block: a 5% slowdown could not have been told from it, and the
    verdict says how large one would have had to be, rather than that the arms are as fast."""
    report, text = _read({})
    assert report["exit"] == 0 and report["regressions"] == report["improvements"] == report["unconfirmed"] == []
    sizes = {x["collective"]: x["detectable"] for x in report["sensitivity"]}
    assert list(sizes) == ["all_reduce_sum", "broadcast"] and all(0.05 < d < 0.2 for d in sizes.values())
    [result] = _said(text, "result: ")
    assert result == ("result: the arms agree: 8 cases correct in both, no slowdown beyond 5% demonstrated; could "
                      f"not detect a slowdown smaller than {sizes['all_reduce_sum']:.0%} in all_reduce_sum, "
                      f"{sizes['broadcast']:.0%} in broadcast here")
    [seen] = _said(text, "could have been detected")
    assert seen == ("could have been detected (a steady slowdown of B this large would have been named in a "
                    f"typical case): all_reduce_sum {sizes['all_reduce_sum']:.0%}, broadcast {sizes['broadcast']:.0%}")
    assert max(len(line) for line in text.splitlines() if not line.startswith("  ")) <= 100
