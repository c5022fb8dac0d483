"""Compare reports from many ranks or nodes: the cluster gather and ``ncclx doctor merge``.

The merged report has the same check ids: each check's status is the worst across the
inputs and its message names who is in which state, plus one ``cluster-consistency``
check that names the minority ranks/hosts for every fact that differs ("ranks 4-7 on
node-b run NCCL 2.28.3; the others 2.30.7") and the ranks that never reported.
"""

from __future__ import annotations

import json
import os
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from .._words import count
from ._model import CheckResult, Report, ReportError, Status

__all__ = ["FINGERPRINT", "Source", "compare", "load_reports", "merge_reports", "ranges", "who"]

MAX_REPORT_BYTES = 64 << 20  # a report is a few KB; a bigger file is not one

# (verb phrase for one, for several, check id, details key, status when ranks disagree)
FINGERPRINT: tuple[tuple[str, str, str, str, Status], ...] = (
    ("runs torch", "run torch", "torch-version", "version", Status.FAIL),
    ("runs NCCL", "run NCCL", "nccl-version", "runtime", Status.FAIL),
    ("runs RCCL", "run RCCL", "rccl-version", "runtime", Status.FAIL),
    ('builds "nccl" as', 'build "nccl" as', "nccl-resolution", "implementation", Status.FAIL),
    ("has TORCH_DIST_USE_NCCL2 =", "have TORCH_DIST_USE_NCCL2 =", "legacy-toggle", "value", Status.FAIL),
    ("has TORCH_NCCL2_RECONFIGURE_SHRINK_GROW =", "have TORCH_NCCL2_RECONFIGURE_SHRINK_GROW =",
     "fast-reconfigure", "shrink_grow", Status.FAIL),
    ("has a flight-recorder buffer of", "have a flight-recorder buffer of", "flight-recorder", "buffer_size",
     Status.WARN),
    ("has dump-on-timeout", "have dump-on-timeout", "flight-recorder", "dump_on_timeout", Status.WARN),
    ("dumps the flight recorder to", "dump the flight recorder to", "flight-recorder", "dump_prefix",
     Status.WARN),
    ("has NCCLX_HANG_DUMP =", "have NCCLX_HANG_DUMP =", "flight-recorder", "hang_dump", Status.WARN),
    ("has extensions built for legacy only:", "have extensions built for legacy only:", "compiled-extensions",
     "legacy_only_packages", Status.WARN),
    ("sees GPUs:", "see GPUs:", "gpu-binding", "device_count", Status.WARN),
    ("has", "have", "env-vars", "nccl_env", Status.WARN),
    ("has", "have", "env-vars", "torch_env", Status.WARN),
)


@dataclass(frozen=True)
class Source:
    """One input report and how to name it."""

    report: Report
    label: str  # file name for merge, "" for the cluster gather


def ranges(numbers: Iterable[int], limit: int | None = None) -> str:
    """[0,1,2,3,5] -> "0-3,5"; past ``limit`` characters: "0,2,4,...,1022" (the rest elided)."""
    nums = sorted(set(numbers))
    out: list[str] = []
    start = prev = None
    for n in nums:
        if start is None:
            start = prev = n
        elif prev is not None and n == prev + 1:
            prev = n
        else:
            out.append(f"{start}-{prev}" if start != prev else str(start))
            start = prev = n
    if start is not None:
        out.append(f"{start}-{prev}" if start != prev else str(start))
    text = ",".join(out)
    if limit is not None and len(text) > limit and len(out) > 2:
        head: list[str] = []
        for part in out[:-1]:
            if len(",".join([*head, part, "...", out[-1]])) > limit:
                break
            head.append(part)
        text = ",".join([*head, "...", out[-1]])
    return text


def label(sources: Sequence[Source]) -> str:
    """Short, one-screen name of a group: "ranks 0-1023 (1024) on 128 hosts", "3 reports (a, b, c)"."""
    ranks = sorted(s.report.rank for s in sources if s.report.rank is not None)
    hosts = sorted({s.report.host for s in sources})
    on = f" on {hosts[0]}" if len(hosts) == 1 else f" on {len(hosts)} hosts"
    if len(ranks) == len(sources) and ranks:
        n = len(ranks)
        return f"ranks {ranges(ranks, 40)} ({n}){on}" if n > 1 else f"rank {ranks[0]}{on}"
    names = [f"{s.report.host} ({s.label})" if s.label else s.report.host for s in sources]
    if len(names) <= 3:
        return ", ".join(names)
    return f"{len(names)} reports ({', '.join(names[:2])}, ...)"


def who(sources: Sequence[Source]) -> str:
    """"ranks 4-7 on node-b", "rank 3 on node-a, rank 9 on node-c", or hosts/files."""
    by_host: dict[str, list[int]] = defaultdict(list)
    unranked: list[str] = []
    for s in sources:
        if s.report.rank is not None:
            by_host[s.report.host].append(s.report.rank)
        else:
            unranked.append(f"{s.report.host} ({s.label})" if s.label else s.report.host)
    parts = [
        f"{'ranks' if len(r) > 1 else 'rank'} {ranges(r)} on {host}"
        for host, r in sorted(by_host.items(), key=lambda kv: min(kv[1]))
    ]
    return ", ".join(parts + unranked)


def _fmt(value: Any) -> str:
    if value is None:
        return "unset"
    return str(value)


def _fmt_pair(value: Any, majority: Any) -> tuple[str, str]:
    """Both values as text; for variable sets only the variables that differ."""
    if not (isinstance(value, dict) and isinstance(majority, dict)):
        return _fmt(value), _fmt(majority)
    keys = sorted(k for k in {*value, *majority} if value.get(k) != majority.get(k))

    def show(d: dict[str, Any]) -> str:
        return ", ".join(f"{k}={d[k]}" if k in d else f"{k} unset" for k in keys)

    return show(value), show(majority)


_ORDER = [Status.ERROR, Status.FAIL, Status.WARN, Status.OK, Status.SKIP]
MAX_VALUES = 3  # minority values of one fact named one by one; past that, counted in one line


def _many_values(groups: Sequence[tuple[str, list[Source]]], many: str, majority: Any) -> str:
    """One line for a fact with many minority values: who holds them, how many values, the
    largest groups by value with their ranks, and how many more."""
    everyone = [s for _, group in groups for s in group]
    pairs = [(_fmt_pair(json.loads(key), majority), group) for key, group in groups[:MAX_VALUES - 1]]
    shown = [f"{mine} on {label(group)}" for (mine, _), group in pairs]
    theirs = "; ".join(dict.fromkeys(t for (_, t), _ in pairs))
    return (f"{label(everyone)} {many} {len(groups)} different values (the others {theirs}): "
            f"{'; '.join(shown)}; and {len(groups) - len(shown)} more values (--json lists them all)")


def _worst(statuses: Iterable[Status]) -> Status:
    found = set(statuses)
    return next((s for s in _ORDER if s in found), Status.SKIP)


def compare(sources: Sequence[Source], expected_ranks: Sequence[int] = (), timeout: float | None = None,
            ) -> CheckResult:
    """The cluster-consistency check over ``sources``."""
    findings: list[tuple[Status, str]] = []
    problems: list[tuple[Status, str, str]] = []  # the same, one screen at any rank count, with the fix
    same_image = ("make every node run the same image and environment (same torch/NCCL wheels, same "
                  "TORCH_*/NCCL* variables in the launcher)")
    divergent: list[dict[str, Any]] = []
    agreed: dict[str, Any] = {}  # the facts every report shares (ncclx report reads them)
    for one, many, cid, key, severity in FINGERPRINT:
        values: dict[str, list[Source]] = defaultdict(list)
        for s in sources:
            check = s.report.get(cid)
            if check is None or key not in check.details:
                continue
            values[json.dumps(check.details[key], sort_keys=True)].append(s)
        if len(values) == 1:
            agreed[f"{cid}.{key}"] = json.loads(next(iter(values)))
        if len(values) < 2:
            continue
        # Majority first; ties go to the value the lowest rank (or first input) holds.
        order = sorted(values.items(), key=lambda kv: (-len(kv[1]), sources.index(kv[1][0])))
        majority_key, majority = order[0]
        majority_value = json.loads(majority_key)
        minority = []
        for value_key, group in order[1:]:
            value = json.loads(value_key)
            verb = one if len(group) == 1 else many
            mine, theirs = _fmt_pair(value, majority_value)
            if len(order) - 1 <= MAX_VALUES:
                findings.append((severity, f"{who(group)} {verb} {mine} (the others {theirs})"))
                problems.append((severity, f"{label(group)} {verb} {mine} (the others {theirs})", same_image))
            minority.append({"value": value, "who": who(group),
                             "ranks": [s.report.rank for s in group], "hosts": sorted({s.report.host for s in group})})
        if len(order) - 1 > MAX_VALUES:  # values that differ rank by rank: one line, the JSON has them all
            line = _many_values(order[1:], many, majority_value)
            findings.append((severity, line))
            problems.append((severity, line, same_image))
        divergent.append({"fact": f"{cid}.{key}", "majority": majority_value, "majority_count": len(majority),
                          "minority": minority})
    reported = sorted(s.report.rank for s in sources if s.report.rank is not None)
    missing = sorted(set(expected_ranks) - set(reported))
    if missing:
        within = f" within {timeout:g}s" if timeout else ""
        findings.insert(0, (Status.FAIL, f"{'ranks' if len(missing) > 1 else 'rank'} {ranges(missing)} did not "
                            f"report{within}"))
        problems.insert(0, (Status.FAIL, f"{'ranks' if len(missing) > 1 else 'rank'} {ranges(missing, 40)}"
                            + (f" ({len(missing)})" if len(missing) > 1 else "") + f" did not report{within}",
                            "check the missing ranks' nodes (did the process start? is MASTER_ADDR reachable?)"))
    failing = [
        {"who": who([s]), "check": c.id, "status": c.status.value, "message": c.message}
        for s in sources for c in s.report.checks if c.status in (Status.FAIL, Status.ERROR)
    ]
    details: dict[str, Any] = {
        "reports": len(sources),
        "expected": len(expected_ranks) or len(sources),
        "reported_ranks": reported,
        "missing_ranks": missing,
        "hosts": sorted({s.report.host for s in sources}),
        "divergent": divergent,
        "agreed": agreed,
        "failing": failing,
    }
    n = len(sources)
    if not findings:
        what = f"{count(n, 'rank' if reported else 'report')} on {count(len(details['hosts']), 'host')}"
        if n == 1:
            return CheckResult("cluster-consistency", Status.OK, f"{what}: nothing to compare it with", "", details)
        return CheckResult("cluster-consistency", Status.OK,
                           f"{what} agree on torch, NCCL, backend, toggles and flight-recorder settings", "",
                           details)
    status = _worst(s for s, _ in findings)
    findings.sort(key=lambda t: _ORDER.index(t[0]))
    problems.sort(key=lambda t: _ORDER.index(t[0]))
    details["problems"] = [{"status": st.value, "message": m, "remedy": r} for st, m, r in problems]
    remedy = []
    if missing:
        remedy.append("check the missing ranks' nodes (did the process start? is MASTER_ADDR reachable?)")
    if divergent:
        remedy.append(same_image)
    return CheckResult("cluster-consistency", status, "; ".join(m for _, m in findings), "; ".join(remedy),
                       details)


def everyone(n: int, expected: int, noun: str) -> str:
    """How many inputs a merged check that is the same everywhere covers, as its message ends:
    "(all 3 ranks)", "(1 rank)", or "(2 of 3 ranks; the rest did not report)"."""
    if n < expected:
        return f"({n:,} of {count(expected, noun)}; the rest did not report)"
    return f"(all {count(n, noun)})" if n > 1 else f"({count(n, noun)})"


# Matches what everyone() appends (the text output puts it on the check's heading).
EVERYONE_RE = r" \((all [\d,]+ (ranks|reports)|1 (rank|report)|[\d,]+ of [\d,]+ (ranks|reports); the rest did not report)\)$"


def _merge_check(cid: str, sources: Sequence[Source], expected: int = 0) -> CheckResult:
    groups: dict[tuple[Status, str], list[Source]] = defaultdict(list)
    remedies: dict[tuple[Status, str], str] = {}
    for s in sources:
        c = s.report.get(cid)
        if c is None:
            continue
        groups[(c.status, c.message)].append(s)
        remedies.setdefault((c.status, c.message), c.remedy)
    status = _worst(k[0] for k in groups)
    if len(groups) == 1:
        (st, msg), members = next(iter(groups.items()))
        noun = "rank" if all(m.report.rank is not None for m in members) else "report"
        details: dict[str, Any] = {"groups": [{"status": st.value, "who": who(members), "label": label(members),
                                               "count": len(members), "message": msg,
                                               "remedy": remedies[(st, msg)]}]}
        first = members[0].report.get(cid)
        if first is not None and "problems" in first.details:  # the same problems everywhere: one bullet each
            details["problems"] = first.details["problems"]
        return CheckResult(cid, st, f"{msg} {everyone(len(members), max(expected, len(members)), noun)}",
                           remedies[(st, msg)], details)
    ordered = sorted(groups.items(), key=lambda kv: (_ORDER.index(kv[0][0]), -len(kv[1])))
    parts = [f"{st.value} on {who(members)}: {msg}" for (st, msg), members in ordered]
    remedy = "; ".join(dict.fromkeys(remedies[k] for k, _ in ordered if remedies[k] and k[0] is not Status.OK))
    return CheckResult(cid, status, " | ".join(parts), remedy,
                       {"groups": [{"status": st.value, "who": who(m), "label": label(m), "count": len(m),
                                    "message": msg, "remedy": remedies[(st, msg)]} for (st, msg), m in ordered]})


def merge_reports(sources: Sequence[Source], level: str = "merge", expected_ranks: Sequence[int] = (),
                  timeout: float | None = None, host: str | None = None, rank: int | None = None) -> Report:
    ids: list[str] = []
    for s in sources:
        for c in s.report.checks:
            if c.id not in ids and c.id != "cluster-consistency":
                ids.append(c.id)
    checks = [_merge_check(cid, sources, len(expected_ranks)) for cid in ids]
    checks.append(compare(sources, expected_ranks, timeout))
    torches = Counter(s.report.torch for s in sources)
    torch = torches.most_common(1)[0][0] if torches else None
    import socket

    backend, why = _judged(sources)
    return Report(level=level, host=host or socket.gethostname(), rank=rank, torch=torch, checks=checks,
                  backend=backend, backend_why=why)


def _judged(sources: Sequence[Source]) -> tuple[str | None, str]:
    """The backend the merged reports were judged as, for the header every level prints: the
    one they share, else the most common with how many reports it covers (none when a report
    does not say: one written before reports carried it)."""
    judged = Counter((s.report.backend, s.report.backend_why) for s in sources)
    if not judged or any(s.report.backend is None for s in sources):
        return None, ""
    (backend, why), n = judged.most_common(1)[0]
    if n == len(sources):
        return backend, why
    return backend, f"{why} (on {n:,} of {count(len(sources), 'report')}; the others differ, see each check)"


def load_reports(paths: Sequence[str]) -> list[Source]:
    """Read ``ncclx doctor --format json`` files; raise ValueError naming the bad file."""
    out = []
    for path in paths:
        try:
            with open(path, "rb") as fh:
                raw = fh.read(MAX_REPORT_BYTES + 1)
        except OSError as exc:
            raise ValueError(f"{path}: cannot read it ({exc.strerror or exc})") from None
        if len(raw) > MAX_REPORT_BYTES:
            raise ValueError(f"{path}: over {MAX_REPORT_BYTES >> 20} MB, not an ncclx doctor report")
        try:
            report = Report.from_text(raw)
        except ReportError as exc:
            why = str(exc)
            hint = "; save reports with ncclx doctor --format json > FILE"
            if why.startswith("not JSON"):
                raise ValueError(f"{path}: {why}{hint}") from None
            raise ValueError(f"{path}: not an ncclx doctor report: {why}") from None
        out.append(Source(report, os.path.basename(path)))
    return out
