"""Arm against arm: every rank's checks, the float sums compared across arms, and the timings.

Times follow nccl-tests: each call's time is the mean over ranks (its default ``-a 1``).
The arms run interleaved (``_run.schedule``): per case, round after round, a short block of
arm A and one of arm B back to back.  A round's ratio is B's block median over A's; the
case's verdict is a sign test on those ratios (``_stats``), with Benjamini-Hochberg over all
cases of the run, and a flagged case is measured again in fresh rounds before it is named.
Per collective the report states the smallest steady slowdown that this node's noise would
have let the run find (docs/compare.md, "What could have been detected").
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from .._words import count
from ._run import NO_REPORT, ArmRun, Settings, case_list
from ._spec import COLLECTIVES, DTYPES, busbw_factor, human_size
from ._stats import ALPHA, bh_rejected, detectable, interval, sign_test

__all__ = ["SCHEMA", "judge", "span_text"]

SCHEMA = "ncclx.compare/1"
EXIT_AGREE, EXIT_DISAGREE, EXIT_COULD_NOT_RUN, EXIT_INSENSITIVE = 0, 1, 2, 3


def _quartiles(xs: Sequence[float]) -> tuple[float, float, float]:
    if len(xs) == 1:
        return xs[0], xs[0], xs[0]
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return q[0], q[1], q[2]


def _blocks(records: dict[int, dict[str, Any]]) -> dict[int, list[float]]:
    """round -> that block's calls, each the mean over ranks (rounds every rank reported)."""
    out: dict[int, list[float]] = {}
    if not records:
        return out
    rounds = set.intersection(*(set(r["blocks"]) for r in records.values()))
    for rnd in sorted(rounds):
        per_rank = [records[k]["blocks"][rnd] for k in records]
        n = min(len(t) for t in per_rank)
        if n:
            out[rnd] = [sum(t[i] for t in per_rank) / len(per_rank) for i in range(n)]
    return out


def _timing(blocks: dict[int, list[float]], nbytes: int, coll: str, world: int) -> dict[str, Any] | None:
    calls = [x for b in blocks.values() for x in b]
    if not calls:
        return None
    q1, med, q3 = _quartiles(calls)
    algbw = nbytes / (med * 1e-6) / 1e9 if med > 0 else 0.0
    factor = busbw_factor(coll, world)
    out: dict[str, Any] = {"median_us": round(med, 2), "q1_us": round(q1, 2), "q3_us": round(q3, 2),
           "min_us": round(min(calls), 2), "max_us": round(max(calls), 2),
           "spread": round((q3 - q1) / med, 4) if med > 0 else 0.0, "blocks": len(blocks),
           "algbw_gbps": round(algbw, 4), "busbw_gbps": round(algbw * factor, 4)}
    span = interval([statistics.median(b) for b in blocks.values()], ALPHA)
    if span and span[0] > 0:  # the 95% interval of the median block time, and its busbw
        out["interval_us"] = [round(span[0], 2), round(span[1], 2)]
        out["busbw_interval_gbps"] = [round(nbytes / (span[1] * 1e-6) / 1e9 * factor, 4),
                                      round(nbytes / (span[0] * 1e-6) / 1e9 * factor, 4)]
    return out


def _ratios(a: dict[int, list[float]], b: dict[int, list[float]], rounds: range) -> list[float]:
    out = []
    for rnd in rounds:
        if rnd in a and rnd in b:
            ma, mb = statistics.median(a[rnd]), statistics.median(b[rnd])
            if ma > 0:
                out.append(mb / ma)
    return out


def _merge(recs: list[dict[str, Any]]) -> dict[str, Any]:
    """One rank's records of one case (one per block) as one: the first block's check and
    sample, every block's calls by round."""
    out: dict[str, Any] = {"blocks": {}}
    for rec in recs:
        for key, value in rec.items():
            if key not in ("us", "r", "c", "t", "s"):
                out.setdefault(key, value)
            if key == "check" and value != "ok":
                out["check"] = value  # a later block's error outranks the first's "ok"
        if rec.get("us"):
            out["blocks"][int(rec.get("r", 0))] = rec["us"]
    return out


def _case_key(rec: dict[str, Any]) -> tuple[str, str, int]:
    return str(rec["c"]), str(rec["t"]), int(rec["s"])


def _where(coll: str, dtype: str, nbytes: int) -> str:
    return f"{coll} {human_size(nbytes)} {dtype}"


def _pct(x: float) -> str:
    return f"{x:+,.1%}" if abs(x) < 10 else f"{x:+,.0%}"


def span_text(span: list[float] | None) -> str:
    """An interval of B/A - 1 in words: "+8.0% to +15.1%" (or "unbounded")."""
    return f"{_pct(span[0])} to {_pct(span[1])}" if span else "unbounded (too few rounds)"


def judge(runs: Sequence[ArmRun], s: Settings, threshold: float, torch_version: str | None,
          require: float | None = None) -> dict[str, Any]:
    """The whole report as a JSON-able dict (``SCHEMA``), with ``exit`` and ``verdict``.
    ``report["flagged_cases"]``: the case indices (``_run.case_list``) to measure again."""
    base, cand = runs[0], runs[-1]
    report: dict[str, Any] = {
        "schema": SCHEMA, "torch": torch_version, "world": s.world, "device": s.device,
        "settings": {"sizes": s.sizes, "dtypes": s.dtypes, "collectives": s.collectives, "warmup": s.warmup,
                     "iters": s.iters, "rounds": s.rounds, "block_iters": s.block_iters, "threshold": threshold,
                     "alpha": ALPHA, "require_sensitivity": require, "timeout": s.timeout},
        "arms": [{"label": r.arm.label, "spec": r.arm.spec, "backend": r.arm.backend,
                  "env": r.arm.env, "expected": r.arm.expected, "built": r.impl, "seconds": r.seconds,
                  "startup_s": r.startup,
                  "init_errors": {str(k): v for k, v in r.init_errors.items()},
                  "hung": {str(k): v for k, v in r.hung.items()}, "log": r.log if (r.hung or r.init_errors) else [],
                  "flight_recorder": r.fr} for r in runs],
        "rows": [], "mismatches": [], "regressions": [], "improvements": [], "unconfirmed": [], "notes": [],
    }
    problems: list[str] = []
    could_not_run = [f"arm {r.arm.label} ({r.arm.describe()}): rank {rank}: {err}"
                     for r in runs for rank, err in list(r.init_errors.items())[:1]]
    for r in runs:
        for rank, stage in r.hung.items():
            if stage == NO_REPORT:
                problems.append(f"arm {r.arm.label}: rank {rank}: {NO_REPORT}")
            elif r.killed:
                problems.append(f"arm {r.arm.label}: rank {rank} hung in {stage} (killed at the --timeout deadline)")
            else:
                problems.append(f"arm {r.arm.label}: rank {rank} stopped in {stage} without a result "
                                f"(the rank's process died; its log: {' | '.join(r.log[-2:]) or 'empty'})")
    if base.impl and base.impl == cand.impl and base.arm.backend != cand.arm.backend:
        report["notes"].append(f"both arms built {base.impl}: nothing different was compared")
    by_arm = []
    for r in runs:
        raw: dict[tuple[str, str, int], dict[int, list[dict[str, Any]]]] = {}
        for rank, out in r.ranks.items():
            for rec in out.cases:
                raw.setdefault(_case_key(rec), {}).setdefault(rank, []).append(rec)
        by_arm.append({key: {rank: _merge(recs) for rank, recs in ranks.items()} for key, ranks in raw.items()})
    order = {c: n for n, c in enumerate(COLLECTIVES)}
    index = {key: n for n, key in enumerate(case_list(s))}
    keys = sorted(set(by_arm[0]) | set(by_arm[-1]),
                  key=lambda k: (order.get(k[0], 99), DTYPES.index(k[1]) if k[1] in DTYPES else 9, k[2]))
    main, again = range(s.rounds), range(s.rounds, 2 * s.rounds)
    timed: list[tuple[dict[str, Any], list[float], list[float]]] = []  # (row, main ratios, re-measured)
    for coll, dtype, nbytes in keys:
        row: dict[str, Any] = {"collective": coll, "dtype": dtype, "bytes": nbytes, "arms": []}
        per_arm = [cases.get((coll, dtype, nbytes), {}) for cases in by_arm]
        skip = next((rec["skip"] for recs in per_arm for rec in recs.values() if "skip" in rec), None)
        if skip:
            row["skip"] = skip
            report["rows"].append(row)
            continue
        unsupported = []
        blocks = [_blocks(recs) for recs in per_arm]
        for r, recs, bl in zip(runs, per_arm, blocks, strict=True):
            t = _timing(bl, nbytes, coll, s.world) if recs and len(bl) else None
            check = "ok"
            for rank in sorted(recs):
                c = str(recs[rank].get("check", "missing"))
                if c.startswith("unsupported"):
                    unsupported.append(r.arm.label)
                    check = c
                    break
                if c != "ok":
                    check = f"rank {rank}: {c}"
                    report["mismatches"].append({"arm": r.arm.label, "collective": coll, "dtype": dtype,
                                                 "bytes": nbytes, "rank": rank, "what": c})
                    break
            if not recs:
                check = "not run"
            row["arms"].append({"label": r.arm.label, "check": check, **(t or {})})
        if len(unsupported) == 1:
            report["mismatches"].append({"arm": unsupported[0], "collective": coll, "dtype": dtype, "bytes": nbytes,
                                         "rank": None, "what": "unsupported in this arm only"})
        _compare_sums(report, runs, per_arm, coll, dtype, nbytes)
        first = _ratios(blocks[0], blocks[-1], main)
        if first:
            row["case"] = index.get((coll, dtype, nbytes))
            row["rounds"] = len(first)
            timed.append((row, first, _ratios(blocks[0], blocks[-1], again)))
        report["rows"].append(row)
    _decide(report, timed, threshold)
    report["sensitivity"] = _sensitivity(timed, threshold)
    _verdict(report, runs, s, threshold, require, problems, could_not_run)
    return report


def _decide(report: dict[str, Any], timed: list[tuple[dict[str, Any], list[float], list[float]]],
            threshold: float) -> None:
    """Benjamini-Hochberg over every timed case's sign test; each case flagged is named only
    when its fresh rounds, on their own, pass Benjamini-Hochberg again among the flagged
    cases, in the same direction."""
    tests = [sign_test(first, threshold) for _row, first, _again in timed]
    flagged, level = bh_rejected([t.p for t in tests])
    report["level"] = level
    report["flagged_cases"] = [timed[i][0]["case"] for i in sorted(flagged) if timed[i][0].get("case") is not None]
    ordered = sorted(flagged)
    retests = [sign_test(timed[i][2], threshold) for i in ordered]
    confirmed, level2 = bh_rejected([t.p for t in retests])
    report["remeasure_level"] = level2
    again_at = {i: (n in confirmed, retests[n]) for n, i in enumerate(ordered)}
    for n, ((row, first, again), t) in enumerate(zip(timed, tests, strict=True)):
        row["delta"] = round(t.ratio - 1, 4)
        span = interval(first, level)
        row["interval"] = [round(x - 1, 4) for x in span] if span else None
        row["timing"] = "same" if span and 1 - threshold <= span[0] and span[1] <= 1 + threshold else "unclear"
        if n not in flagged:
            continue
        slower = t.p_slower <= t.p_faster
        a, b = row["arms"][0], row["arms"][-1]
        item = {"collective": row["collective"], "dtype": row["dtype"], "bytes": row["bytes"],
                "baseline_us": a.get("median_us"), "candidate_us": b.get("median_us"), "delta": row["delta"],
                "interval": row["interval"], "direction": "slower" if slower else "faster"}
        check = interval(again, level2) if again else None
        item["remeasured"] = [round(x - 1, 4) for x in check] if check else None
        item["remeasured_rounds"] = len(again)
        passed, retest = again_at[n]
        if passed and (retest.p_slower <= retest.p_faster) == slower:
            row["timing"] = "regression" if slower else "improvement"
            row["decided_by"] = item["remeasured"]
            report["regressions" if slower else "improvements"].append(item)
        else:
            row["timing"] = "unconfirmed"
            report["unconfirmed"].append(item)


def _sensitivity(timed: list[tuple[dict[str, Any], list[float], list[float]]],
                 threshold: float) -> list[dict[str, Any]]:
    """Per collective: the smallest steady slowdown of B its typical case would have shown.
    A slowdown of a whole collective (its m_c of the run's m cases) passes Benjamini-Hochberg
    at ``ALPHA x m_c / m``, and the re-measure (BH among the m_c flagged) at ``ALPHA``."""
    m = len(timed)
    out = []
    for coll in dict.fromkeys(row["collective"] for row, _f, _a in timed):
        mine = [first for row, first, _a in timed if row["collective"] == coll]
        level = ALPHA * len(mine) / m
        sizes = sorted((d if d is not None else float("inf"))
                       for d in (detectable(first, threshold, level) for first in mine))
        typical = sizes[(len(sizes) - 1) // 2]
        out.append({"collective": coll, "cases": len(mine),
                    "detectable": None if typical == float("inf") else round(typical, 4),
                    "rounds": max(len(f) for f in mine)})
    return out


def _verdict(report: dict[str, Any], runs: Sequence[ArmRun], s: Settings, threshold: float,
             require: float | None, problems: list[str], could_not_run: list[str]) -> None:
    base, cand = runs[0], runs[-1]
    mismatch_text = [
        f"{_where(m['collective'], m['dtype'], m['bytes'])}: arm {m['arm']}"
        + (f", rank {m['rank']}" if m["rank"] is not None else "") + f": {m['what']}"
        for m in report["mismatches"]]

    def named(g: dict[str, Any]) -> str:
        return (f"{_where(g['collective'], g['dtype'], g['bytes'])}: {cand.arm.label} {g['candidate_us']:,.1f} us "
                f"against {base.arm.label} {g['baseline_us']:,.1f} us, {_pct(g['delta'])} (measured again: "
                f"{span_text(g['remeasured'])}, wholly beyond the {threshold:.0%} threshold)")

    regress_text = [named(g) for g in report["regressions"]]
    report["improvement_text"] = [named(g) for g in report["improvements"]]
    blind = [x for x in report["sensitivity"] if x["detectable"] is None or x["detectable"] > threshold]
    report["sensitivity_text"] = [_blind([x]) for x in blind]
    ran = sum(1 for row in report["rows"] if "skip" not in row and any("median_us" in a for a in row["arms"]))
    if could_not_run or (ran == 0 and not problems):
        code = EXIT_COULD_NOT_RUN
        verdict = "could not run: " + ("; ".join(could_not_run) or "no case ran in either arm")
    elif problems or mismatch_text or regress_text:
        code = EXIT_DISAGREE
        counts = [count(len(mismatch_text), "mismatch", "mismatches"), count(len(regress_text), "regression")]
        if problems:
            counts.insert(0, count(len(problems), "hang finding"))
        parts = [*problems[:1], *mismatch_text[:1]]
        if regress_text:
            parts.append(f"{cand.arm.label} slower than {base.arm.label} beyond {threshold:.0%} in "
                         + ", ".join(_where(g["collective"], g["dtype"], g["bytes"]) for g in report["regressions"]))
        verdict = "the arms disagree (" + ", ".join(counts) + "): " + "; ".join(parts)
    else:
        code = EXIT_AGREE
        verdict = (f"the arms agree: {count(ran, 'case')} correct in both, no slowdown beyond {threshold:.0%} "
                   "demonstrated")
        if blind:
            verdict += "; " + _blind(blind)
        if require is not None:
            weak = [x for x in report["sensitivity"] if x["detectable"] is None or x["detectable"] > require]
            if weak:
                code = EXIT_INSENSITIVE
                verdict = (f"not sensitive enough for --require-sensitivity {require:.0%}: {_blind(weak)} "
                           f"({count(ran, 'case')} correct in both)")
    report["problems"] = problems
    report["mismatch_text"] = mismatch_text
    report["regression_text"] = regress_text
    report["verdict"] = verdict
    report["exit"] = code


def _blind(xs: list[dict[str, Any]]) -> str:
    """"could not detect a slowdown smaller than 12% in broadcast, 30% in sendrecv here"."""
    sized = [f"{x['detectable']:.0%} in {x['collective']}" for x in xs if x["detectable"] is not None]
    none = [x["collective"] for x in xs if x["detectable"] is None]
    parts = []
    if sized:
        parts.append("could not detect a slowdown smaller than " + ", ".join(sized) + " here")
    if none:
        rounds = max(x["rounds"] for x in xs if x["detectable"] is None)
        parts.append(f"could not detect a slowdown of any size in {', '.join(none)} with "
                     f"{count(rounds, 'round')} (raise --rounds)")
    return "; ".join(parts)


def _compare_sums(report: dict[str, Any], runs: Sequence[ArmRun], per_arm: list[dict[int, dict[str, Any]]],
                  coll: str, dtype: str, nbytes: int) -> None:
    """Float sums: each arm is within its bound of the exact sum; here, the arms against each
    other, on the sampled elements, within the sum of both bounds."""
    a, b = per_arm[0], per_arm[-1]
    for rank in sorted(set(a) & set(b)):
        sa, sb = a[rank].get("sample"), b[rank].get("sample")
        ta = a[rank].get("sample_tol")
        if not sa or not sb or not ta or len(sa) != len(sb):
            continue
        for i, (x, y, tol) in enumerate(zip(sa, sb, ta, strict=True)):
            if abs(x - y) > 2 * tol:
                report["mismatches"].append({
                    "arm": runs[-1].arm.label, "collective": coll, "dtype": dtype, "bytes": nbytes, "rank": rank,
                    "what": f"arms differ at sampled element {i}: {x!r} against {y!r} (bound {2 * tol:.3g})"})
                return
