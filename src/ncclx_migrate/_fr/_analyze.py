"""Find the collective that hung, who never entered it, and who called something else.

Works on a :class:`DumpSet` of reduced dumps (torch-free).  Per group and recorder:

* last completed sequence number of each rank (entries, or ``pg_status`` when the
  ring buffer has dropped older entries);
* the first collective not every member completed: ``S = min(last completed) + 1``;
  ranks whose dump shows they never enqueued ``S`` are the missing ranks;
* mismatches: ranks whose op type, input sizes or dtypes differ from the majority
  at the same sequence number (ties go to the lowest rank, as torchfrtrace's
  reference rank);
* members without a dump;
* where every member stopped (``per_rank``: state and last entries).

Ranks whose sequence of fingerprints is identical share one trace (``_load._Interner``),
so the mismatch scan walks distinct traces, not ranks: a 1,024-rank job with one
culprit compares two or three of them per sequence number.
"""

from __future__ import annotations

from array import array
from collections import Counter
from dataclasses import dataclass, field

from ._load import DumpSet, EntryInfo, GroupTrace, RankDump

__all__ = ["Diagnosis", "GroupReport", "Incomplete", "Mismatch", "RankState", "analyze"]

_MISMATCH_CAP = 10
_FIELDS = ("op", "input_sizes", "input_dtypes")  # positions in a fingerprint


@dataclass
class Mismatch:
    seq: int
    op: str  # the majority op at this seq
    field: str  # "op", "input_sizes", "input_dtypes"
    expected: str
    culprit_ranks: list[int]
    found: dict[int, str]  # culprit rank -> its value


@dataclass
class Incomplete:
    seq: int
    op: str
    why: str  # "never-entered", "not-completed" or "no-dump" (members left no dump: unknown)
    missing_ranks: list[int]  # dumped ranks that never enqueued it
    entered_ranks: list[int]
    no_dump_ranks: list[int]  # members whose dump is missing: unknown
    frames: tuple[tuple[str, str, int], ...]


@dataclass
class RankState:
    """Where one member rank stopped in one group (docs/flight-recorder.md, ``per_rank``)."""

    state: str  # completed | started | scheduled | never-entered | no-dump
    last_enqueued: int | None
    last_completed: int | None
    last_entries: list[EntryInfo]


@dataclass
class GroupReport:
    recorder: str
    name: str
    desc: str
    ranks: list[int]
    last_completed: dict[int, int]  # rank -> seq (0: none)
    first_incomplete: Incomplete | None
    mismatches: list[Mismatch]
    culprit_ranks: list[int]
    missing_dumps: list[int]
    per_rank: dict[int, RankState] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return self.desc or self.name


@dataclass
class Diagnosis:
    dumps: DumpSet
    groups: list[GroupReport]
    missing_dumps: list[int]
    notes: list[str] = field(default_factory=list)

    @property
    def problem(self) -> bool:
        return bool(self.missing_dumps) or any(
            g.first_incomplete or g.mismatches for g in self.groups
        )


def _majority(values: list[tuple[str, int, int]]) -> str:
    """``values``: (value, weight, lowest rank).  Ties: the value of the lowest rank."""
    counts: Counter[str] = Counter()
    low: dict[str, int] = {}
    for v, w, r in values:
        counts[v] += w
        low[v] = min(low.get(v, r), r)
    top = max(counts.values())
    return min((v for v in counts if counts[v] == top), key=lambda v: low[v])


class _Trace:
    """One distinct trace of a group and the ranks that share it."""

    __slots__ = ("g", "pos", "ranks")

    def __init__(self, g: GroupTrace) -> None:
        self.g = g
        self.ranks: list[int] = []
        self.pos = 0


def _mismatches(traces: list[_Trace]) -> list[Mismatch]:
    out: list[Mismatch] = []
    if len(traces) < 2:
        return out  # one trace: every rank recorded the same thing
    all_seqs = sorted(set().union(*(set(t.g.seqs) for t in traces)))
    for t in traces:
        t.pos = 0
    for seq in all_seqs:
        at: list[tuple[tuple[str, str, str], _Trace]] = []
        for t in traces:
            seqs = t.g.seqs
            while t.pos < len(seqs) and seqs[t.pos] < seq:
                t.pos += 1
            if t.pos < len(seqs) and seqs[t.pos] == seq:
                at.append((t.g.table[t.g.fps[t.pos]], t))
        if len(at) < 2 or len({fp for fp, _ in at}) < 2:
            continue
        n = sum(len(t.ranks) for _, t in at)
        if n < 2:
            continue
        op = _majority([(fp[0], len(t.ranks), t.ranks[0]) for fp, t in at])
        for k, fld in enumerate(_FIELDS):
            if len({fp[k] for fp, _ in at}) < 2:
                continue
            expected = _majority([(fp[k], len(t.ranks), t.ranks[0]) for fp, t in at])
            found = {r: fp[k] for fp, t in at if fp[k] != expected for r in t.ranks}
            out.append(Mismatch(seq, op, fld, expected, sorted(found), dict(sorted(found.items()))))
            break  # a type mismatch explains the size/dtype ones that follow
        if len(out) >= _MISMATCH_CAP:
            break
    return out


def _analyze_group(
    recorder: str, name: str, desc: str, members: list[int], dumps: dict[int, RankDump]
) -> GroupReport:
    have = [r for r in members if r in dumps]
    no_dump = [r for r in members if r not in dumps]
    empty = GroupTrace(desc, array("q"), array("I"), (), 0, None, (), {})
    trace_of: dict[int, GroupTrace] = {r: dumps[r].groups.get(name, empty) for r in have}
    last_done: dict[int, int] = {}
    last_enq: dict[int, int] = {}
    distinct: dict[int, _Trace] = {}
    for r in have:
        g = trace_of[r]
        st = dumps[r].pg_status.get(name, {})
        last_done[r] = max(g.last_done, st.get("last_completed_collective", 0))
        last_enq[r] = max(g.seqs[-1] if g.seqs else 0, st.get("last_enqueued_collective", 0))
        # gloo marks a failed op not retired; an entry after it that completed
        # cannot exist, so the status counter (incremented on retire) is exact.
        if g.seqs:
            distinct.setdefault(id(g.seqs), _Trace(g)).ranks.append(r)

    mismatches = _mismatches(list(distinct.values()))

    incomplete: Incomplete | None = None
    if have and max(last_enq.values()) > 0:
        low, high = min(last_enq.values()), max(last_enq.values())
        if low < high:
            # Some rank never enqueued what others did: the classic hang.
            target, why = low + 1, "never-entered"
        else:
            # Everyone enqueued the same last collective.  gloo retires a failed
            # op too (measured: retired=True after a timeout), so "not retired"
            # shows only in dumps taken during the hang (the watchdog's).
            target = high
            why = "not-completed" if any(last_done[r] < target for r in have) else "no-dump"
            if why == "no-dump" and not no_dump:
                target = 0
        if target:
            entered = [r for r in have if last_enq[r] >= target]
            missing = [r for r in have if last_enq[r] < target]
            ops: list[tuple[str, int, int]] = []
            frames: tuple[tuple[str, str, int], ...] = ()
            for r in entered:
                fp = trace_of[r].fingerprint(target)
                if fp is not None:
                    ops.append((fp[0], 1, r))
                    if not frames:
                        frames = trace_of[r].frames_at.get(target, ())
            op = _majority(ops) if ops else "collective"
            incomplete = Incomplete(target, op, why, missing, entered, no_dump, frames)

    culprits: list[int] = []
    if incomplete and incomplete.missing_ranks:
        culprits = list(incomplete.missing_ranks)
    elif mismatches:
        culprits = list(mismatches[0].culprit_ranks)
    elif incomplete and no_dump:
        culprits = list(no_dump)
    never = set(incomplete.missing_ranks) if incomplete and incomplete.why == "never-entered" else set()
    per_rank: dict[int, RankState] = {}
    for r in members:
        if r not in dumps:
            per_rank[r] = RankState("no-dump", None, None, [])
            continue
        g = trace_of[r]
        if r in never:
            state = "never-entered"
        elif last_done[r] >= last_enq[r] or g.pending_state is None:
            state = "completed"
        else:
            state = "started" if g.pending_state == "started" else "scheduled"
        per_rank[r] = RankState(state, last_enq[r], last_done[r], list(g.last_entries))
    return GroupReport(
        recorder, name, desc, members, last_done, incomplete, mismatches, culprits, no_dump, per_rank
    )


def analyze(dumps: DumpSet) -> Diagnosis:
    groups: list[GroupReport] = []
    all_members: set[int] = set()
    for rec in dumps.recorders():
        by_rank = {r: d for (rc, r), d in dumps.dumps.items() if rc == rec}
        configs: dict[str, tuple[str, list[int]]] = {}
        for r in sorted(by_rank):
            for key, cfg in by_rank[r].pg_config.items():
                if cfg.ranks and key not in configs:
                    configs[key] = (cfg.desc, cfg.ranks)
        for e_rank in sorted(by_rank):  # groups seen only in entries (membership unknown)
            for gname, g in by_rank[e_rank].groups.items():
                if gname not in configs:
                    configs[gname] = (g.desc, sorted(r for r in by_rank if gname in by_rank[r].groups))
        for name in sorted(configs, key=lambda n: (len(n), n)):
            desc, members = configs[name]
            # desc from entries when the config has none (a group whose creator set no name leaves it '').
            if not desc:
                desc = next((d.groups[name].desc for d in by_rank.values() if name in d.groups), "")
            all_members.update(members)
            groups.append(_analyze_group(rec, name, desc, sorted(members), by_rank))
    present = {r for _, r in dumps.dumps}
    missing = sorted(all_members - present)
    return Diagnosis(dumps, groups, missing)

