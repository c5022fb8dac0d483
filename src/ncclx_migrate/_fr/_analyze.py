"""Find the collective that hung, who never entered it, and who called something else.

Works on a :class:`DumpSet` (torch-free).  Per group and recorder:

* last completed sequence number of each rank (entries, or ``pg_status`` when the
  ring buffer has dropped older entries);
* the first collective not every member completed: ``S = min(last completed) + 1``;
  ranks whose dump shows they never enqueued ``S`` are the missing ranks;
* mismatches: ranks whose op type, input sizes or dtypes differ from the majority
  at the same sequence number (ties go to the lowest rank, as torchfrtrace's
  reference rank);
* members without a dump.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from ._load import DumpSet, Entry, RankDump

__all__ = ["Diagnosis", "GroupReport", "Incomplete", "Mismatch", "analyze"]

_MISMATCH_CAP = 10


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


def _by_seq(dump: RankDump, group: str) -> dict[int, Entry]:
    out: dict[int, Entry] = {}
    for e in dump.entries:
        if e.group == group:
            out[e.seq] = e  # a coalesced group shares one seq: the last entry stands for it
    return out


def _majority(values: dict[int, str]) -> str:
    counts = Counter(values.values())
    top = max(counts.values())
    # Ties: the value of the lowest rank among the tied values.
    return next(values[r] for r in sorted(values) if counts[values[r]] == top)


def _mismatches_at(seq: int, entries: dict[int, Entry]) -> list[Mismatch]:
    out: list[Mismatch] = []
    ops = {r: e.op for r, e in entries.items()}
    op = _majority(ops)
    for fld in ("op", "input_sizes", "input_dtypes"):
        values = {r: str(getattr(e, fld)) for r, e in entries.items()}
        if len(set(values.values())) < 2:
            continue
        expected = _majority(values)
        culprits = sorted(r for r, v in values.items() if v != expected)
        out.append(Mismatch(seq, op, fld, expected, culprits, {r: values[r] for r in culprits}))
        break  # a type mismatch explains the size/dtype ones that follow
    return out


def _analyze_group(
    recorder: str, name: str, desc: str, members: list[int], dumps: dict[int, RankDump]
) -> GroupReport:
    have = [r for r in members if r in dumps]
    no_dump = [r for r in members if r not in dumps]
    seqs = {r: _by_seq(dumps[r], name) for r in have}
    last_done: dict[int, int] = {}
    last_enq: dict[int, int] = {}
    for r in have:
        st = dumps[r].pg_status.get(name, {})
        done = [s for s, e in seqs[r].items() if e.completed]
        last_done[r] = max([max(done, default=0), st.get("last_completed_collective", 0)])
        last_enq[r] = max([max(seqs[r], default=0), st.get("last_enqueued_collective", 0)])
        # gloo marks a failed op not retired; an entry after it that completed
        # cannot exist, so the status counter (incremented on retire) is exact.

    mismatches: list[Mismatch] = []
    common = sorted(set().union(*(set(s) for s in seqs.values()))) if seqs else []
    for seq in common:
        at = {r: seqs[r][seq] for r in have if seq in seqs[r]}
        if len(at) >= 2:
            mismatches.extend(_mismatches_at(seq, at))
        if len(mismatches) >= _MISMATCH_CAP:
            break

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
            at = {r: seqs[r][target] for r in entered if target in seqs[r]}
            op = _majority({r: e.op for r, e in at.items()}) if at else "collective"
            frames = next((e.frames for e in at.values() if e.frames), ())
            incomplete = Incomplete(target, op, why, missing, entered, no_dump, frames)

    culprits: list[int] = []
    if incomplete and incomplete.missing_ranks:
        culprits = list(incomplete.missing_ranks)
    elif mismatches:
        culprits = list(mismatches[0].culprit_ranks)
    elif incomplete and no_dump:
        culprits = list(no_dump)
    return GroupReport(
        recorder, name, desc, members, last_done, incomplete, mismatches, culprits, no_dump
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
            for e in by_rank[e_rank].entries:
                if e.group not in configs:
                    configs[e.group] = (e.desc, sorted(r for r in by_rank if _by_seq(by_rank[r], e.group)))
        for name in sorted(configs, key=lambda n: (len(n), n)):
            desc, members = configs[name]
            # desc from entries when the config has none (E2d's creator leaves it '').
            if not desc:
                desc = next((e.desc for d in by_rank.values() for e in d.entries if e.group == name), "")
            all_members.update(members)
            groups.append(_analyze_group(rec, name, desc, sorted(members), by_rank))
    present = {r for _, r in dumps.dumps}
    missing = sorted(all_members - present)
    return Diagnosis(dumps, groups, missing)
