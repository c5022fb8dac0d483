"""Read per-rank flight-recorder dumps (pickle or JSON, torch 2.13-2.15), reduced as they are read.

Torch-free.  Each dump is reduced, in a worker process (``jobs``), to what the
diagnosis needs (:class:`GroupTrace` per group: the sequence numbers, one small
fingerprint index per collective, the frontier, the last few entries) and its
full entry list is dropped, so memory does not grow with the entries.  Reading
is bounded for hostile files: a size cap, every field read through a checked
accessor (an int is an int below 2**63, a size list is a short list of short
lists of ints; nothing else is ever expanded with ``str``), strings shown
escaped.  Known defects repaired here:

* gloo's ``pg_config`` is keyed ``''`` (it is recorded in the ProcessGroupGloo
  constructor, before c10d names the group), so torchfrtrace raises
  ``KeyError: ('0', 0)`` (observed on 2.15.0; ``tests/fr/test_analyze_real_dumps.py``).
* JSON dumps carry ``pg_status`` values as strings and ``process_group`` as a list.
"""

from __future__ import annotations

import ast
import functools
import json
import operator
import os
import re
from array import array
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import chain, compress, islice, repeat
from pathlib import Path
from typing import Any

from .._shown import shown
from ._pickle import DumpError, load_restricted

__all__ = [
    "MAX_DUMP_BYTES",
    "DumpError",
    "DumpSet",
    "EntryInfo",
    "GroupConfig",
    "GroupTrace",
    "RankDump",
    "infer_prefix",
    "load_dir",
    "parse_dump",
    "read_raw",
    "show",
]

# Every torch from 2.13 to 2.15 writes "2.10"; torchfrtrace's own reader handles 2.x.
_MIN_MINOR, _MAX_MINOR = 2, 10
_EXTRA = re.compile(r"^ncclx-(?P<rec>.+)-rank(?P<rank>[0-9]{1,12})\.pkl$")
_RANKED = re.compile(r"^(?P<prefix>.*?)(?P<rank>[0-9]+)$")
# 2,000 entries with deep C++ and Python stacks stay far below this; a pickle builds
# at most a few dozen bytes of objects per byte of input, so this bounds memory too.
MAX_DUMP_BYTES = 256 << 20
MAX_RANKS = 1 << 20  # no job has a million ranks; a rank number above is a stray file
_INT_MAX = 1 << 63
LAST_ENTRIES = 5  # per rank and group, for the per_rank view
TOP_FRAMES = 4
_TEXT_CAP = 500


# Every name and message from a dump is printed through the one helper for another machine's text.
show = shown


@dataclass(frozen=True)
class EntryInfo:
    """One entry, as the per_rank view shows it (JSON-safe values)."""

    seq: int
    op: str
    state: str
    retired: bool
    input_sizes: object
    input_dtypes: object
    output_sizes: object
    output_dtypes: object
    frames: tuple[tuple[str, str, int], ...]  # innermost first, at most TOP_FRAMES

    def to_json(self) -> dict[str, Any]:
        return {
            "seq": self.seq, "op": self.op, "state": self.state, "retired": self.retired,
            "input_sizes": self.input_sizes, "input_dtypes": self.input_dtypes,
            "output_sizes": self.output_sizes, "output_dtypes": self.output_dtypes,
            "frames": [{"name": n, "filename": f, "line": ln} for n, f, ln in self.frames],
        }


@dataclass
class GroupTrace:
    """One rank's entries of one group, reduced to what the diagnosis needs."""

    desc: str
    seqs: array[int]  # collective sequence numbers, ascending (a coalesced seq once: its last entry)
    fps: array[int]  # per seq: index into ``table``
    table: tuple[tuple[str, str, str], ...]  # fingerprints: (op, input sizes, input dtypes)
    last_done: int  # highest retired seq among the entries (0: none)
    pending_state: str | None  # state of the first entry not retired (None: all retired)
    last_entries: tuple[EntryInfo, ...]  # the last LAST_ENTRIES, oldest first
    frames_at: dict[int, tuple[tuple[str, str, int], ...]]  # frontier seqs with frames

    def fingerprint(self, seq: int) -> tuple[str, str, str] | None:
        from bisect import bisect_left

        i = bisect_left(self.seqs, seq)
        if i < len(self.seqs) and self.seqs[i] == seq:
            return self.table[self.fps[i]]
        return None


@dataclass
class GroupConfig:
    name: str
    desc: str
    ranks: list[int] | None  # global ranks in group order; None when unknown


@dataclass
class RankDump:
    rank: int
    path: Path
    recorder: str
    version: str
    fmt: str  # "pickle" or "json"
    pg_config: dict[str, GroupConfig]
    pg_status: dict[str, dict[str, int]]
    groups: dict[str, GroupTrace]
    n_entries: int
    meta: dict[str, Any] = field(default_factory=dict)  # the ncclx block, bounded fields only


@dataclass
class DumpSet:
    folder: Path
    prefix: str
    dumps: dict[tuple[str, int], RankDump]  # (recorder, rank) -> dump
    repairs: list[str]
    ignored: list[str] = field(default_factory=list)  # files named and left out, with why
    world: int | None = None

    def recorders(self) -> list[str]:
        return sorted({rec for rec, _ in self.dumps})


# --- checked accessors -----------------------------------------------------------------


def _int(v: object, what: str, source: str) -> int:
    if type(v) is int and -_INT_MAX < v < _INT_MAX:
        return v
    if isinstance(v, str) and len(v) < 20 and v.strip().lstrip("-").isascii() and v.strip().lstrip("-").isdigit():
        return int(v)
    raise DumpError(f"{source}: {what} is not an integer ({_brief(v)})")


def _text(v: object) -> str:
    if type(v) is str:
        return v if len(v) <= _TEXT_CAP else v[:_TEXT_CAP] + "..."
    if v is None or type(v) in (int, float, bool):
        return _brief(v)
    return _brief(v)


def _brief(v: object) -> str:
    """A short description of any value, never expanding it."""
    if v is None or type(v) in (bool, float):
        return repr(v)
    if type(v) is int:
        return repr(v) if -_INT_MAX < v < _INT_MAX else "a huge integer"
    if type(v) is str:
        return repr(v[:60]) + ("..." if len(v) > 60 else "")
    if isinstance(v, (list, tuple, dict)):
        return f"a {type(v).__name__} of {len(v)}"
    return f"a {type(v).__name__}"


_LIST, _INT, _STR = frozenset([list]), frozenset([int]), frozenset([str])


def _sizes(v: object) -> str:
    """The fingerprint text of input sizes: ``str`` of a short list of short lists of ints.

    The checks run at C speed (set/map/max): this runs once per entry.
    """
    if type(v) is list and len(v) <= 256:
        if not v:
            return "[]"
        if set(map(type, v)) <= _LIST and max(map(len, v)) <= 64:
            if set(map(type, chain.from_iterable(v))) <= _INT:
                try:
                    return str(v)
                except ValueError:  # an int of more than 4,300 digits
                    pass
    return _brief(v)


def _dtypes(v: object) -> str:
    if type(v) is list and len(v) <= 256:
        if not v:
            return "[]"
        if set(map(type, v)) <= _STR and max(map(len, v)) <= 64:
            return str(v)
    return _brief(v)


def _plain(v: object) -> object:
    """A JSON-safe copy of a sizes/dtypes value (lists of ints or strs), else a short string."""
    if type(v) is list and len(v) <= 256:
        out: list[object] = []
        for x in v:
            if type(x) is str and len(x) <= 64:
                out.append(x)
            elif type(x) is list and len(x) <= 64 and all(type(y) is int and -_INT_MAX < y < _INT_MAX for y in x):
                out.append(list(x))
            else:
                return _brief(v)
        return out
    return _brief(v)


def _frames(v: object, source: str) -> tuple[tuple[str, str, int], ...]:
    if not isinstance(v, list):
        return ()
    out = []
    for f in v[:TOP_FRAMES]:
        if isinstance(f, dict):
            line = f.get("line", 0)
            out.append((_text(f.get("name", "")), _text(f.get("filename", "")),
                        _int(line or 0, "a frame's line", source)))
    return tuple(out)


def _parse_ranks(v: object) -> list[int] | None:
    if isinstance(v, str):
        return _parse_ranks_text(v)
    return _ranks_of(v)


@functools.lru_cache(maxsize=64)  # every dump of a job repeats the same strings
def _parse_ranks_text(v: str) -> list[int] | None:
    if len(v) > 16 * MAX_RANKS:
        return None
    try:
        value: object = json.loads(v)  # "[0, 1, 2]": JSON, and 50x faster than literal_eval
    except (ValueError, RecursionError):
        try:
            value = ast.literal_eval(v)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            return None
    return _ranks_of(value)


def _ranks_of(value: object) -> list[int] | None:
    if not isinstance(value, (list, tuple)) or len(value) > MAX_RANKS:
        return None
    if not all(type(r) is int and 0 <= r < MAX_RANKS for r in value):
        return None
    return list(value) or None  # 2.13 gloo writes '[]': unknown


def _check_version(version: object, source: str) -> str:
    text = _text(version)
    m = re.fullmatch(r"([0-9]+)\.([0-9]+)", text)
    if not m or int(m.group(1)) != 2 or not _MIN_MINOR <= int(m.group(2)) <= _MAX_MINOR:
        raise DumpError(
            f"{source}: unknown flight-recorder format version {text!r} "
            f"(this ncclx reads 2.{_MIN_MINOR} to 2.{_MAX_MINOR}, what torch 2.13-2.15 write)"
        )
    return text


# --- one dump ----------------------------------------------------------------------------


def _decode(data: bytes, source: str) -> tuple[str, dict[str, Any]]:
    if not data:
        raise DumpError(f"{source}: empty file; the rank died while writing it, or it is not a dump")
    head = data.lstrip()[:1]
    obj: object
    if head == b"{":
        fmt = "json"
        try:
            obj = json.loads(data)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise DumpError(f"{source}: not valid JSON ({show(exc)}); is the file truncated?") from None
        except RecursionError:
            raise DumpError(f"{source}: not a flight-recorder dump (JSON nested too deeply)") from None
        except ValueError as exc:  # e.g. an integer of more than 4,300 digits
            raise DumpError(f"{source}: not a flight-recorder dump ({show(exc)[:120]})") from None
    elif data[:1] == b"\x80":
        fmt = "pickle"
        obj = load_restricted(data, source, max(len(data), 1))  # the size cap is _read's
    else:
        raise DumpError(f"{source}: not a flight-recorder dump (neither a pickle nor JSON)")
    if not isinstance(obj, dict) or "version" not in obj:
        raise DumpError(f"{source}: not a flight-recorder dump (no 'version' key at the top level)")
    return fmt, obj


def _meta(obj: dict[str, Any], source: str) -> dict[str, Any]:
    m = obj.get("ncclx")
    if not isinstance(m, dict):
        return {}
    out: dict[str, Any] = {}
    for key in ("recorder", "trigger", "main_thread_at", "reason", "torch"):
        if isinstance(m.get(key), str):
            out[key] = _text(m[key])
    ws = m.get("world_size")
    if type(ws) is int and 0 < ws <= MAX_RANKS:
        out["world_size"] = ws
    return out


class _GroupBuilder:
    __slots__ = ("desc", "done", "fps", "last", "pending", "seqs", "table")

    def __init__(self, desc: str) -> None:
        self.desc = desc
        self.seqs: list[int] = []
        self.fps: list[int] = []
        self.done: list[bool] = []
        self.table: dict[tuple[str, str, str], int] = {}
        self.last: deque[int] = deque(maxlen=LAST_ENTRIES)  # raw indices
        self.pending: list[int] = []  # raw indices of the first entries not retired


def _entry_info(raw: dict[str, Any], seq: int, op: str, source: str) -> EntryInfo:
    return EntryInfo(
        seq, op, _text(raw.get("state", "")), bool(raw.get("retired")),
        _plain(raw.get("input_sizes")), _plain(raw.get("input_dtypes")),
        _plain(raw.get("output_sizes")), _plain(raw.get("output_dtypes")),
        _frames(raw.get("frames"), source),
    )


def _reduce(obj: dict[str, Any], path: Path, rank: int, recorder: str | None, fmt: str) -> RankDump:
    source = show(path)
    version = _check_version(obj["version"], source)
    raw_entries = obj.get("entries", [])
    if not isinstance(raw_entries, list):
        raise DumpError(f"{source}: 'entries' is not a list")
    ops: dict[str, tuple[str, str]] = {}
    backends: set[str] = set()
    fast = _reduce_columns(raw_entries, ops, backends)
    if fast is not None:
        groups = fast
    else:
        ops.clear()
        backends.clear()
        groups = _reduce_rows(raw_entries, ops, backends, source)
    traces = {name: _finish(g, raw_entries, ops, source) for name, g in groups.items()}
    config = _pg_config(obj.get("pg_config"), source)
    status = _pg_status(obj.get("pg_status"), source)
    meta = _meta(obj, source)
    if recorder is None:
        recorder = meta.get("recorder") or _recorder_from(backends)
    n = sum(len(g.seqs) for g in groups.values())
    return RankDump(rank, path, recorder, version, fmt, config, status, traces, n, meta)


_COLUMNS = ("collective_seq_id", "profiling_name", "process_group", "input_sizes", "input_dtypes")
_SEQ_TYPES, _PG_TYPES = frozenset([int]), frozenset([tuple, list])


def _split_op(prof: str) -> tuple[str, str]:
    text = _text(prof)
    backend, _, op = text.partition(":")
    return ("", text) if not op else (backend, op)


def _reduce_columns(
    raw: list[Any], ops: dict[str, tuple[str, str]], backends: set[str]
) -> dict[str, _GroupBuilder] | None:
    """The common case at C speed: every entry a dict with well-typed fields, column by column.

    Returns None (the caller then reads row by row, with exact errors) when anything is
    unusual.  Each check runs over a whole column through set/map/min/max, and ``str`` is
    applied to sizes only once they are known to be short lists of short lists of ints,
    so the result is the row reader's, bounded the same way.
    """
    n = len(raw)
    if n == 0 or not set(map(type, raw)) <= {dict}:
        return None
    try:
        seqs, profs, pgs, sizes, dtypes = (list(map(operator.itemgetter(k), raw)) for k in _COLUMNS)
    except KeyError:
        return None
    if any(map(dict.get, raw, repeat("is_p2p"))):
        return None  # rare (gloo never records p2p): the row reader skips them
    if not set(map(type, seqs)) <= _SEQ_TYPES or min(seqs) < 0 or max(seqs) >= _INT_MAX:
        return None
    if not set(map(type, profs)) <= _STR or not set(map(type, pgs)) <= _PG_TYPES or min(map(len, pgs)) < 2:
        return None
    names = list(map(operator.itemgetter(0), pgs))
    if not set(map(type, names)) <= _STR or max(map(len, names)) > _TEXT_CAP:
        return None
    if not set(map(type, sizes)) <= _LIST or max(map(len, sizes)) > 256:
        return None
    inner = list(chain.from_iterable(sizes))
    if inner and (not set(map(type, inner)) <= _LIST or max(map(len, inner)) > 64):
        return None
    ints = list(chain.from_iterable(inner))
    if ints and (not set(map(type, ints)) <= _INT or min(ints) <= -_INT_MAX or max(ints) >= _INT_MAX):
        return None
    if not set(map(type, dtypes)) <= _LIST or max(map(len, dtypes)) > 256:
        return None
    flat = list(chain.from_iterable(dtypes))
    if flat and (not set(map(type, flat)) <= _STR or max(map(len, flat)) > 64):
        return None
    for prof in set(profs):
        ops[prof] = _split_op(prof)
        if ops[prof][0]:
            backends.add(ops[prof][0])
    opname = {prof: split[1] for prof, split in ops.items()}
    # Keys at C speed: str of the size lists checked above (faster than nested tuples),
    # tuples of the dtype names (faster than their str); text is made per distinct key.
    fps = list(zip(map(opname.__getitem__, profs), map(str, sizes), map(tuple, dtypes), strict=True))
    retired = map(bool, map(dict.get, raw, repeat("retired")))
    completed = map(operator.eq, map(dict.get, raw, repeat("state")), repeat("completed"))
    done = list(map(operator.or_, retired, completed))
    out: dict[str, _GroupBuilder] = {}
    groups = list(dict.fromkeys(names))
    for name in groups:
        if len(groups) == 1:
            idx: list[int] = list(range(n))
        else:
            idx = list(compress(range(n), map(name.__eq__, names)))
        g = out[name] = _GroupBuilder(_text(pgs[idx[0]][1]))
        g.seqs = list(map(seqs.__getitem__, idx))
        g_fps = fps if len(groups) == 1 else list(map(fps.__getitem__, idx))
        keys = {fp: k for k, fp in enumerate(dict.fromkeys(g_fps))}
        g.table = {(op, sz, str(list(dt))): k for (op, sz, dt), k in keys.items()}
        g.fps = list(map(keys.__getitem__, g_fps))
        g.done = list(map(done.__getitem__, idx))
        g.last.extend(idx[-LAST_ENTRIES:])
        g.pending = list(islice(compress(idx, map(operator.not_, g.done)), 8))
    return out


def _reduce_rows(
    raw_entries: list[Any], ops: dict[str, tuple[str, str]], backends: set[str], source: str
) -> dict[str, _GroupBuilder]:
    groups: dict[str, _GroupBuilder] = {}
    for i, raw in enumerate(raw_entries):
        if type(raw) is not dict:
            continue
        try:
            pg = raw["process_group"]
            prof = raw["profiling_name"]
            seq = raw["collective_seq_id"]
        except KeyError as exc:
            raise DumpError(f"{source}: malformed entry {i} (no {show(exc)} key)") from None
        if raw.get("is_p2p"):
            continue  # p2p ops have their own sequence; gloo never records them
        if type(seq) is not int or not 0 <= seq < _INT_MAX:
            seq = _int(seq, f"entry {i}'s collective_seq_id", source)
        split = ops.get(prof) if type(prof) is str else None
        if split is None:
            text = _text(prof)
            backend, _, op = text.partition(":")
            split = ("", text) if not op else (backend, op)
            if type(prof) is str and len(ops) < 4096:
                ops[prof] = split
        if split[0]:
            backends.add(split[0])
        if not isinstance(pg, (list, tuple)) or len(pg) < 2:
            raise DumpError(f"{source}: malformed entry {i} (process_group is {_brief(pg)})")
        name = pg[0] if type(pg[0]) is str else _text(pg[0])
        g = groups.get(name)
        if g is None:
            g = groups[name] = _GroupBuilder(_text(pg[1]))
        fp = (split[1], _sizes(raw.get("input_sizes")), _dtypes(raw.get("input_dtypes")))
        idx = g.table.get(fp)
        if idx is None:
            idx = g.table[fp] = len(g.table)
        done = bool(raw.get("retired")) or raw.get("state") == "completed"
        g.seqs.append(seq)
        g.fps.append(idx)
        g.done.append(done)
        g.last.append(i)
        if not done and len(g.pending) < 8:
            g.pending.append(i)
    return groups


def _op_of(raw: dict[str, Any], ops: dict[str, tuple[str, str]]) -> str:
    prof = raw.get("profiling_name")
    if type(prof) is str and prof in ops:
        return ops[prof][1]
    text = _text(prof)
    return text.partition(":")[2] or text


def _finish(g: _GroupBuilder, raw_entries: list[Any], ops: dict[str, tuple[str, str]], source: str) -> GroupTrace:
    seqs, fps, done = g.seqs, g.fps, g.done
    if not all(map(operator.lt, seqs, islice(seqs, 1, None))):
        # Coalesced ops share one seq (the last entry stands for it) or a wrapped buffer.
        by_seq: dict[int, tuple[int, bool]] = {}
        for s, f, d in zip(seqs, fps, done, strict=True):
            by_seq[s] = (f, d)
        seqs = sorted(by_seq)
        fps = [by_seq[s][0] for s in seqs]
        done = [by_seq[s][1] for s in seqs]
    last_done = max(compress(seqs, done), default=0)
    pending_state = None
    frames_at: dict[int, tuple[tuple[str, str, int], ...]] = {}
    for i in g.pending:
        raw = raw_entries[i]
        s = raw["collective_seq_id"]
        if pending_state is None:
            pending_state = _text(raw.get("state", "")) or "scheduled"
        fr = _frames(raw.get("frames"), source)
        if fr and type(s) is int:
            frames_at.setdefault(s, fr)
    last = tuple(
        _entry_info(raw_entries[i], _int(raw_entries[i]["collective_seq_id"], "collective_seq_id", source),
                    _op_of(raw_entries[i], ops), source)
        for i in g.last
    )
    for e in last:
        if e.frames:
            frames_at.setdefault(e.seq, e.frames)
    return GroupTrace(g.desc, array("q", seqs), array("I", fps), tuple(g.table), last_done,
                      pending_state, last, frames_at)


def _pg_config(v: object, source: str) -> dict[str, GroupConfig]:
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise DumpError(f"{source}: 'pg_config' is {_brief(v)}, not a dict")
    config: dict[str, GroupConfig] = {}
    for key, row in v.items():
        if isinstance(row, dict):
            k = _text(key)
            config[k] = GroupConfig(_text(row.get("name", k)), _text(row.get("desc", "")),
                                    _parse_ranks(row.get("ranks")))
    return config


def _pg_status(v: object, source: str) -> dict[str, dict[str, int]]:
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise DumpError(f"{source}: 'pg_status' is {_brief(v)}, not a dict")
    status: dict[str, dict[str, int]] = {}
    for key, row in v.items():
        if isinstance(row, dict):
            k = _text(key)
            status[k] = {
                _text(f): _int(x, f"pg_status[{k!r}][{_text(f)!r}]", source)
                for f, x in row.items()
                if f in ("last_enqueued_collective", "last_started_collective", "last_completed_collective")
            }
    return status


def _recorder_from(backends: set[str]) -> str:
    if backends == {"nccl"}:
        return "nccl-legacy"
    return next(iter(backends)) if len(backends) == 1 else "gloo"


def parse_dump(data: bytes, path: Path, rank: int, recorder: str | None = None) -> RankDump:
    """Parse and reduce one dump file's bytes (pickle or JSON)."""
    fmt, obj = _decode(data, show(path))
    return _reduce(obj, path, rank, recorder, fmt)


def _read(path: Path, max_bytes: int) -> bytes:
    source = show(path)
    try:
        size = path.stat().st_size
        if size > max_bytes:
            raise DumpError(
                f"{source}: {size >> 20} MB, more than any flight-recorder dump "
                f"(limit {max_bytes >> 20} MB; raise it with --max-dump-mb if this really is one)"
            )
        return path.read_bytes()
    except OSError as exc:
        raise DumpError(f"{source}: cannot read it ({show(exc.strerror or exc)})") from None


def read_raw(path: Path, max_bytes: int = MAX_DUMP_BYTES) -> dict[str, Any]:
    """The whole dump as a dict (for ``fr repair``), loaded as safely as for analysis."""
    return _decode(_read(path, max_bytes), show(path))[1]


def _load_one(job: tuple[Path, int, str | None, int]) -> RankDump | str:
    """Worker: read and reduce one file; a DumpError comes back as its message."""
    path, rank, rec, max_bytes = job
    try:
        return parse_dump(_read(path, max_bytes), path, rank, rec)
    except DumpError as exc:
        return str(exc)
    except (MemoryError, RecursionError) as exc:
        return f"{show(path)}: not a flight-recorder dump ({type(exc).__name__} while reading it)"


def default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _map(jobs_list: list[tuple[Path, int, str | None, int]], jobs: int) -> Iterator[RankDump | str]:
    """Results in file order, as they come (the caller keeps only the reduced dumps)."""
    if jobs <= 1 or len(jobs_list) < 4:
        yield from map(_load_one, jobs_list)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    ctx = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    chunk = max(1, min(16, len(jobs_list) // (jobs * 4)))
    with ProcessPoolExecutor(max_workers=min(jobs, len(jobs_list)), mp_context=ctx) as pool:
        yield from pool.map(_load_one, jobs_list, chunksize=chunk)


class _Interner:
    """Ranks lists and sequence arrays that many dumps share are kept once."""

    def __init__(self) -> None:
        self.ranks: dict[tuple[int, ...], list[int]] = {}
        self.traces: dict[tuple[bytes, bytes, tuple[tuple[str, str, str], ...]], GroupTrace] = {}

    def __call__(self, d: RankDump) -> RankDump:
        for cfg in d.pg_config.values():
            if cfg.ranks:
                cfg.ranks = self.ranks.setdefault(tuple(cfg.ranks), cfg.ranks)
        for g in d.groups.values():
            first = self.traces.setdefault((g.seqs.tobytes(), g.fps.tobytes(), g.table), g)
            g.seqs, g.fps, g.table = first.seqs, first.fps, first.table
        return d


def infer_prefix(names: list[str], folder: Path) -> str:
    """The common ``<prefix>`` of files named ``<prefix><rank>`` (as torchfrtrace infers it)."""
    prefixes = sorted({m.group("prefix") for n in names if (m := _RANKED.match(n))})
    if not prefixes:
        raise DumpError(f"{show(folder)}: no dump files (names ending in a rank number); is this the dump folder?")
    if len(prefixes) > 1:
        shown = ", ".join(show(repr(p)) for p in prefixes[:5])
        raise DumpError(f"{show(folder)}: files with several prefixes ({shown}); pass --prefix")
    return prefixes[0]


def _rank_files(folder: Path, prefix: str | None) -> tuple[str, list[tuple[str, int, str | None]], list[str]]:
    if folder.is_file():
        raise DumpError(
            f"{show(folder)}: is a file, not a folder; pass the folder that holds the dumps ({show(folder.parent)})"
        )
    if not folder.is_dir():
        raise DumpError(f"{show(folder)}: no such folder")
    try:
        names = sorted(e.name for e in os.scandir(folder) if e.is_file() and not e.name.startswith("."))
    except OSError as exc:
        raise DumpError(f"{show(folder)}: cannot list it ({show(exc.strerror or exc)})") from None
    if not names:
        raise DumpError(f"{show(folder)}: empty folder, no dumps to analyze")
    if prefix is None:
        prefix = infer_prefix([n for n in names if not _EXTRA.match(n)], folder)
    files: list[tuple[str, int, str | None]] = []
    ignored: list[str] = []
    for name in names:
        extra = _EXTRA.match(name)
        if extra:
            digits, rec = extra.group("rank"), extra.group("rec")
        elif name.startswith(prefix) and re.fullmatch(r"[0-9]+", name[len(prefix):]):
            digits, rec = name[len(prefix):], None
        else:
            continue
        if len(digits) > 7 or int(digits) >= MAX_RANKS:
            ignored.append(f"{show(name)}: rank number {show(digits[:20])} fits no job; not read")
            continue
        files.append((name, int(digits), rec))
    return prefix, files, ignored


def _world(dumps: list[RankDump]) -> int | None:
    """The job's world size from the dumps' pg_config (and the ncclx block); None: unknown."""
    world = 0
    for d in dumps:
        ws = d.meta.get("world_size")
        if isinstance(ws, int):
            world = max(world, ws)
        for cfg in d.pg_config.values():
            if cfg.ranks:
                world = max(world, 1 + max(cfg.ranks))
    return world or None


def load_dir(folder: Path, prefix: str | None = None, *, jobs: int | None = None,
             max_bytes: int = MAX_DUMP_BYTES) -> DumpSet:
    """Load ``<prefix><rank>`` files (and ncclx's extra-recorder files), reduced, and repair them."""
    prefix, files, ignored = _rank_files(folder, prefix)
    if not files and not ignored:
        raise DumpError(f"{show(folder)}: no files named {show(prefix)}<rank>; check --prefix")
    from concurrent.futures.process import BrokenProcessPool

    intern = _Interner()
    try:
        results = [
            intern(x) if isinstance(x, RankDump) else x
            for x in _map([(folder / n, r, rec, max_bytes) for n, r, rec in files], jobs or default_jobs())
        ]
    except BrokenProcessPool:
        raise DumpError(
            f"{show(folder)}: a worker process died reading the dumps (out of memory?); "
            "rerun with --jobs 1 to name the file"
        ) from None
    good = [x for x in results if isinstance(x, RankDump)]
    world = _world(good)
    if world is None:
        # No dump says how many ranks the job had (2.13 gloo writes ranks '[]'): trust rank
        # numbers up to a few times the number of files, not a stray fr_trace_20241130.
        world = 1 + max((r for _, r, _ in files if r < 4 * len(files) + 64), default=0)
        basis = "the file count"
    else:
        basis = "pg_config"
    dumps: dict[tuple[str, int], RankDump] = {}
    errors: list[str] = []
    for (name, rank, _), res in zip(files, results, strict=True):
        if rank >= world:
            ignored.append(f"{show(name)}: rank {rank} is outside the job's {world} ranks ({basis}); ignored")
        elif isinstance(res, str):
            errors.append(res)
        else:
            dumps[(res.recorder, rank)] = res
    if errors:
        raise DumpError(errors[0] + (f" (and {len(errors) - 1} more bad files)" if len(errors) > 1 else ""))
    if not dumps:
        raise DumpError(f"{show(folder)}: no usable dumps named {show(prefix)}<rank> ({'; '.join(ignored[:3])})")
    repairs = _repair(dumps, world)
    return DumpSet(folder, prefix, dumps, repairs, ignored, world)


def _repair(dumps: dict[tuple[str, int], RankDump], world: int) -> list[str]:
    """Rebuild missing or ``''``-keyed pg_config rows; returns what was repaired."""
    repairs: list[str] = []
    # Good rows any rank recorded, by group name: the best source of membership.
    known: dict[str, GroupConfig] = {}
    for d in dumps.values():
        for key, cfg in d.pg_config.items():
            if key and cfg.ranks:
                known.setdefault(key, cfg)
    seen_in: dict[str, set[int]] = {}
    for (_, rank), d in dumps.items():
        for name in d.groups:
            seen_in.setdefault(name, set()).add(rank)
    everyone: list[int] | None = None
    fixed: list[int] = []
    for (_, rank), d in sorted(dumps.items(), key=lambda kv: kv[0][1]):
        names = {name: g.desc for name, g in d.groups.items()}
        if "0" not in names and ("" in d.pg_config or not d.pg_config):
            names["0"] = "default_pg"  # an empty buffer still belongs to the default group
        broken = "" in d.pg_config or any(n not in d.pg_config for n in names)
        if not broken:
            continue
        d.pg_config.pop("", None)
        for name, desc in names.items():
            if name in d.pg_config:
                continue
            if name in known:
                ranks = known[name].ranks
            elif desc == "default_pg" or name == "0":
                everyone = everyone or list(range(world))  # one list shared by every dump
                ranks = everyone
            else:
                ranks = sorted(seen_in.get(name, {rank}))
            d.pg_config[name] = GroupConfig(name, desc, ranks)
        fixed.append(rank)
    if fixed:
        repairs.append(
            f"pg_config keyed '' or missing groups (gloo defect) in the dumps of "
            f"{_ranks_text(fixed)}: rebuilt from the entries (default_pg = ranks 0..{world - 1})"
        )
    return repairs


def _ranks_text(ranks: list[int]) -> str:
    if len(ranks) > 8:
        from ._ranges import ranges

        return "ranks " + ranges(ranks)
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(str(r) for r in ranks)


def repaired_pickle_obj(dump: RankDump, raw: dict[str, Any]) -> dict[str, Any]:
    """The dump's raw dict with the repaired pg_config, as torchfrtrace reads it."""
    obj = dict(raw)
    obj["pg_config"] = {
        k: {"name": c.name, "desc": c.desc, "ranks": str(c.ranks or [])} for k, c in dump.pg_config.items()
    }
    return obj
