"""Arm against arm: every rank's checks, the float sums compared across arms, and the timings.

Times follow nccl-tests: each iteration's time is the mean over ranks (its default
``-a 1``); a case's time is the median of its iterations, with the interquartile range as
its spread.  algbw = bytes / time, busbw = algbw x nccl-tests' factor.  A difference beyond
the threshold is a regression (or an improvement) only when the two arms' interquartile
ranges do not overlap; otherwise it is unreadable: noise is as large as the difference.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from .._words import count
from ._run import NO_REPORT, ArmRun, Settings
from ._spec import COLLECTIVES, DTYPES, busbw_factor, human_size

__all__ = ["SCHEMA", "judge"]

SCHEMA = "ncclx.compare/1"
EXIT_AGREE, EXIT_DISAGREE, EXIT_COULD_NOT_RUN = 0, 1, 2


def _quartiles(xs: Sequence[float]) -> tuple[float, float, float]:
    if len(xs) == 1:
        return xs[0], xs[0], xs[0]
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return q[0], q[1], q[2]


def _timing(records: dict[int, dict[str, Any]], nbytes: int, coll: str, world: int) -> dict[str, Any] | None:
    per_rank = [r["us"] for r in records.values() if r.get("us")]
    if not per_rank or len(per_rank) != len(records):
        return None
    iters = min(len(t) for t in per_rank)
    mean = [sum(t[i] for t in per_rank) / len(per_rank) for i in range(iters)]
    q1, med, q3 = _quartiles(mean)
    algbw = nbytes / (med * 1e-6) / 1e9 if med > 0 else 0.0
    return {"median_us": round(med, 2), "q1_us": round(q1, 2), "q3_us": round(q3, 2),
            "min_us": round(min(mean), 2), "max_us": round(max(mean), 2),
            "spread": round((q3 - q1) / med, 4) if med > 0 else 0.0,
            "algbw_gbps": round(algbw, 4), "busbw_gbps": round(algbw * busbw_factor(coll, world), 4)}


def _case_key(rec: dict[str, Any]) -> tuple[str, str, int]:
    return str(rec["c"]), str(rec["t"]), int(rec["s"])


def _where(coll: str, dtype: str, nbytes: int) -> str:
    return f"{coll} {human_size(nbytes)} {dtype}"


def judge(runs: Sequence[ArmRun], s: Settings, threshold: float, torch_version: str | None) -> dict[str, Any]:
    """The whole report as a JSON-able dict (``SCHEMA``), with ``exit`` and ``verdict``."""
    base, cand = runs[0], runs[-1]
    report: dict[str, Any] = {
        "schema": SCHEMA, "torch": torch_version, "world": s.world, "device": s.device,
        "settings": {"sizes": s.sizes, "dtypes": s.dtypes, "collectives": s.collectives, "warmup": s.warmup,
                     "iters": s.iters, "threshold": threshold, "timeout": s.timeout},
        "arms": [{"label": r.arm.label, "spec": r.arm.spec, "backend": r.arm.backend,
                  "env": r.arm.env, "expected": r.arm.expected, "built": r.impl, "seconds": r.seconds,
                  "init_errors": {str(k): v for k, v in r.init_errors.items()},
                  "hung": {str(k): v for k, v in r.hung.items()}, "log": r.log if (r.hung or r.init_errors) else [],
                  "flight_recorder": r.fr} for r in runs],
        "rows": [], "mismatches": [], "regressions": [], "improvements": [], "unreadable": [], "notes": [],
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
        cases: dict[tuple[str, str, int], dict[int, dict[str, Any]]] = {}
        for rank, out in r.ranks.items():
            for rec in out.cases:
                cases.setdefault(_case_key(rec), {})[rank] = rec
        by_arm.append(cases)
    order = {c: n for n, c in enumerate(COLLECTIVES)}
    keys = sorted(set(by_arm[0]) | set(by_arm[-1]),
                  key=lambda k: (order.get(k[0], 99), DTYPES.index(k[1]) if k[1] in DTYPES else 9, k[2]))
    for coll, dtype, nbytes in keys:
        row: dict[str, Any] = {"collective": coll, "dtype": dtype, "bytes": nbytes, "arms": []}
        per_arm = [cases.get((coll, dtype, nbytes), {}) for cases in by_arm]
        skip = next((rec["skip"] for recs in per_arm for rec in recs.values() if "skip" in rec), None)
        if skip:
            row["skip"] = skip
            report["rows"].append(row)
            continue
        unsupported = []
        for r, recs in zip(runs, per_arm, strict=True):
            t = _timing(recs, nbytes, coll, s.world)
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
        a, b = row["arms"][0], row["arms"][-1]
        if "median_us" in a and "median_us" in b and a["median_us"] > 0:
            delta = b["median_us"] / a["median_us"] - 1
            row["delta"] = round(delta, 4)
            overlap = b["q1_us"] <= a["q3_us"] and a["q1_us"] <= b["q3_us"]
            item = {"collective": coll, "dtype": dtype, "bytes": nbytes, "baseline_us": a["median_us"],
                    "candidate_us": b["median_us"], "delta": round(delta, 4),
                    "spread": max(a["spread"], b["spread"])}
            if abs(delta) > threshold and overlap:
                row["timing"] = "unreadable"
                report["unreadable"].append(item)
            elif delta > threshold:
                row["timing"] = "regression"
                report["regressions"].append(item)
            elif delta < -threshold:
                row["timing"] = "improvement"
                report["improvements"].append(item)
            else:
                row["timing"] = "same"
        report["rows"].append(row)
    mismatch_text = [
        f"{_where(m['collective'], m['dtype'], m['bytes'])}: arm {m['arm']}"
        + (f", rank {m['rank']}" if m["rank"] is not None else "") + f": {m['what']}"
        for m in report["mismatches"]]
    regress_text = [
        f"{_where(g['collective'], g['dtype'], g['bytes'])}: {cand.arm.label} {g['candidate_us']:,.1f} us "
        f"against {base.arm.label} {g['baseline_us']:,.1f} us ({g['delta']:+.1%}; threshold {threshold:.0%})"
        for g in report["regressions"]]
    ran = sum(1 for row in report["rows"] if "skip" not in row and any("median_us" in a for a in row["arms"]))
    if could_not_run or (ran == 0 and not problems):
        code = EXIT_COULD_NOT_RUN
        verdict = "could not run: " + ("; ".join(could_not_run) or "no case ran in either arm")
    elif problems or mismatch_text or regress_text:
        code = EXIT_DISAGREE
        parts = [*problems, *(f"mismatch: {t}" for t in mismatch_text[:1]),
                 *(f"regression: {t}" for t in regress_text[:1])]
        counts = [f"{len(mismatch_text)} mismatch{'es' if len(mismatch_text) != 1 else ''}",
                  f"{len(regress_text)} regression{'s' if len(regress_text) != 1 else ''}"]
        if problems:
            counts.insert(0, f"{len(problems)} hang finding{'s' if len(problems) != 1 else ''}")
        verdict = "the arms disagree (" + ", ".join(counts) + "): " + parts[0]
    else:
        code = EXIT_AGREE
        verdict = f"the arms agree: {count(ran, 'case')} correct in both, no regression beyond {threshold:.0%}"
    report["problems"] = problems
    report["mismatch_text"] = mismatch_text
    report["regression_text"] = regress_text
    report["verdict"] = verdict
    report["exit"] = code
    return report


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
