"""Human and JSON renderings of a :class:`Diagnosis`."""

from __future__ import annotations

from typing import Any

from .._shown import shown, shown_lines
from .._words import count
from ._analyze import Diagnosis, GroupReport, Incomplete, Mismatch
from ._frames import is_user
from ._ranges import ranges

__all__ = ["SCHEMA", "called_from", "render_human", "stuck_at", "to_json", "user_first"]

SCHEMA = "ncclx.fr/1"


def rank_list(ranks: list[int]) -> str:
    """'rank 2', 'ranks 0 and 1', 'ranks 0, 1 and 3'; past 8 ranks 'ranks 0-4, 6-63'."""
    if len(ranks) > 8:
        return f"ranks {ranges(ranks)}"
    if len(ranks) == 1:
        return f"rank {ranks[0]}"
    body = ", ".join(str(r) for r in ranks[:-1])
    return f"ranks {body} and {ranks[-1]}"


def _span(ranks: list[int]) -> str:
    if ranks and ranks == list(range(ranks[0], ranks[-1] + 1)) and len(ranks) > 2:
        return f"ranks {ranks[0]}-{ranks[-1]}"
    return rank_list(ranks) if ranks else "no ranks"


def _verb(ranks: list[int], one: str, many: str) -> str:
    return one if len(ranks) == 1 else many


def user_first(frames: tuple[tuple[str, str, int], ...]) -> tuple[list[tuple[str, str, int]], int]:
    """(the user's frames, innermost first; how many of torch's own frames were folded)."""
    mine = [f for f in frames if is_user(f[1])]
    return mine, len(frames) - len(mine)


def frame_json(frame: tuple[str, str, int] | None) -> dict[str, Any] | None:
    return None if frame is None else {"name": frame[0], "filename": frame[1], "line": frame[2]}


def _frame_text(frame: tuple[str, str, int]) -> str:
    return f"{shown(frame[0])} at {shown(frame[1])}:{frame[2]}"


def stuck_at(diag: Diagnosis, g: GroupReport) -> dict[int, tuple[str, str, int]]:
    """Culprit rank -> the innermost frame of its own code when it dumped (ncclx watchdog dumps)."""
    out: dict[int, tuple[str, str, int]] = {}
    for r in g.culprit_ranks:
        dump = diag.dumps.dumps.get((g.recorder, r))
        where = dump.meta.get("main_thread_at") if dump is not None else None
        if isinstance(where, str) and " at " in where:
            name, _, place = where.rpartition(" at ")
            filename, _, line = place.rpartition(":")
            if filename and line.isdigit():
                out[r] = (name, filename, int(line))
    return out


def called_from(inc: Incomplete | None) -> tuple[str, str, int] | None:
    """The innermost user frame from which the waiting ranks called the stuck collective."""
    mine, _ = user_first(inc.frames) if inc is not None else ([], 0)
    return mine[0] if mine else None


def _incomplete_lines(g: GroupReport, inc: Incomplete) -> list[str]:
    what = f"{shown(inc.op)} #{inc.seq} of group {shown(g.label)}"
    lines: list[str] = []
    if inc.why == "never-entered":
        waited = inc.entered_ranks
        lines.append(f"{rank_list(inc.missing_ranks)} never entered {what}; {rank_list(waited)} waited")
    elif inc.why == "not-completed":
        lines.append(f"every rank with a dump entered {what} and it never completed")
    else:
        lines.append(
            f"the last collective {rank_list(inc.entered_ranks)} entered was {what}; "
            f"{rank_list(inc.no_dump_ranks)} left no dump "
            f"({_verb(inc.no_dump_ranks, 'it', 'they')} may have exited or crashed)"
        )
    if inc.no_dump_ranks and inc.why != "no-dump":
        they = _verb(inc.no_dump_ranks, "it", "they")
        lines.append(f"  {rank_list(inc.no_dump_ranks)} left no dump: unknown whether {they} entered it")
    mine, folded = user_first(inc.frames)
    if mine:
        chain = ", from ".join(_frame_text(f) for f in mine)
        more = f" (+{count(folded, 'torch frame')})" if folded else ""
        lines.append(f"  the waiting ranks called it from {chain}{more}")
    return lines


def _mismatch_line(g: GroupReport, m: Mismatch) -> str:
    what = f"#{m.seq} of group {shown(g.label)}"
    culprits = m.culprit_ranks
    if m.field == "op":
        found = sorted({shown(v) for v in m.found.values()})
        return (
            f"{rank_list(culprits)} called {' / '.join(found)} as collective {what} "
            f"where the other ranks called {shown(m.expected)}"
        )
    label = {"input_sizes": "input sizes", "input_dtypes": "input dtypes"}[m.field]
    found = sorted({shown(v) for v in m.found.values()})
    return (
        f"{rank_list(culprits)} passed {label} {' / '.join(found)} to {shown(m.op)} {what} "
        f"where the other ranks passed {shown(m.expected)}"
    )


def _stack_lines(diag: Diagnosis, g: GroupReport) -> list[str]:
    """Where each culprit rank's main thread was when it dumped (ncclx watchdog dumps only)."""
    return [f"  rank {r} was at {_frame_text(f)} when it dumped" for r, f in stuck_at(diag, g).items()]


def render_human(diag: Diagnosis) -> str:
    ds = diag.dumps
    ranks = sorted({r for _, r in ds.dumps})
    recs = ", ".join(shown(r) for r in ds.recorders())
    versions = sorted({shown(d.version) for d in ds.dumps.values()})
    fmts = sorted({d.fmt for d in ds.dumps.values()})
    out = [
        f"{count(len(ds.dumps), 'dump')} from {_span(ranks)} in {shown(ds.folder)} (prefix {shown(repr(ds.prefix))}; "
        f"recorder {recs}; format {', '.join(versions)} {'/'.join(fmts)})"
    ]
    out += [f"repaired: {r}" for r in ds.repairs]
    out += [f"ignored: {r}" for r in ds.ignored]
    for g in diag.groups:
        head = f"group {shown(g.label)} (pg {shown(g.name)}"
        if len(ds.recorders()) > 1:
            head += f", recorder {shown(g.recorder)}"
        out.append(f"{head}, {_span(g.ranks)}):")
        if g.first_incomplete:
            out += ["  " + line for line in _incomplete_lines(g, g.first_incomplete)]
        for m in g.mismatches:
            out.append("  " + _mismatch_line(g, m))
        out += _stack_lines(diag, g)
        if not g.first_incomplete and not g.mismatches:
            out.append("  every collective that any rank enqueued completed on all ranks with dumps")
        done = _retired_text(g.last_completed)
        out.append(f"  last collective retired (completed, or failed on gloo): {done or 'none'}")
    if diag.missing_dumps:
        # Said once: a group's first incomplete collective may already have named these ranks.
        named = {r for g in diag.groups if g.first_incomplete for r in g.first_incomplete.no_dump_ranks}
        if named >= set(diag.missing_dumps):
            out.append(f"to get a dump from every rank ({shown(ds.prefix)}<rank> in {shown(ds.folder)}), "
                       "turn on the watchdog (NCCLX_HANG_DUMP=SECONDS)")
        else:
            out.append(
                f"{rank_list(diag.missing_dumps)} left no dump (expected {shown(ds.prefix)}<rank> in {shown(ds.folder)}); "
                "turn on the watchdog (NCCLX_HANG_DUMP=SECONDS) so every rank dumps on a hang"
            )
    culprits = sorted({r for g in diag.groups for r in g.culprit_ranks})
    if culprits:
        out.append(f"verdict: culprit {rank_list(culprits)}")
    elif diag.problem:
        out.append("verdict: problem found, no single culprit (see above)")
    else:
        out.append("verdict: no hang or mismatch found")
    # Names from dumps are another machine's text: shown, never sent (each field above, and
    # whatever else came from a dump: no control character but the newlines made here).
    return shown_lines("\n".join(out))


def _retired_text(last: dict[int, int]) -> str:
    if len(last) <= 8:
        return ", ".join(f"rank {r} #{s}" for r, s in sorted(last.items()))
    by_seq: dict[int, list[int]] = {}
    for r, s in last.items():
        by_seq.setdefault(s, []).append(r)
    return "; ".join(f"#{s} {rank_list(rs)}" for s, rs in sorted(by_seq.items()))


def to_json(diag: Diagnosis) -> dict[str, Any]:
    ds = diag.dumps
    groups: list[dict[str, Any]] = []
    for g in diag.groups:
        inc = g.first_incomplete
        groups.append(
            {
                "group": g.label,
                "pg_name": g.name,
                "recorder": g.recorder,
                "ranks": g.ranks,
                "first_incomplete": None
                if inc is None
                else {
                    "seq": inc.seq,
                    "op": inc.op,
                    "why": inc.why,
                    "missing_ranks": inc.missing_ranks,
                    "entered_ranks": inc.entered_ranks,
                    "no_dump_ranks": inc.no_dump_ranks,
                },
                "mismatches": [
                    {
                        "seq": m.seq,
                        "op": m.op,
                        "field": m.field,
                        "expected": m.expected,
                        "culprit_ranks": m.culprit_ranks,
                        "found": {str(r): v for r, v in m.found.items()},
                    }
                    for m in g.mismatches
                ],
                "culprit_ranks": g.culprit_ranks,
                # Innermost frames of the user's code: where each culprit was when it dumped,
                # and where the waiting ranks called the first incomplete collective.
                "stuck_at": {str(r): frame_json(f) for r, f in stuck_at(diag, g).items()},
                "called_from": frame_json(called_from(inc)),
                "last_completed": {str(r): s for r, s in sorted(g.last_completed.items())},
                "missing_dumps": g.missing_dumps,
                "per_rank": {
                    str(r): {
                        "state": st.state,
                        "last_enqueued": st.last_enqueued,
                        "last_completed": st.last_completed,
                        "last_entries": [e.to_json() for e in st.last_entries],
                    }
                    for r, st in sorted(g.per_rank.items())
                },
            }
        )
    return {
        "schema": SCHEMA,
        "folder": str(ds.folder),
        "prefix": ds.prefix,
        "dumps": [
            {"rank": r, "recorder": rec, "path": str(d.path), "version": d.version, "format": d.fmt}
            for (rec, r), d in sorted(ds.dumps.items(), key=lambda kv: (kv[0][1], kv[0][0]))
        ],
        "repairs": ds.repairs,
        "ignored": ds.ignored,
        "groups": groups,
        "missing_dumps": diag.missing_dumps,
        "problem": diag.problem,
    }
