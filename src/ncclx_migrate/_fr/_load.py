"""Read per-rank flight-recorder dumps (pickle or JSON, torch 2.13-2.15) and repair them.

Torch-free.  Known defects repaired here:

* gloo's ``pg_config`` is keyed ``''`` (it is recorded in the ProcessGroupGloo
  constructor, before c10d names the group), so torchfrtrace raises
  ``KeyError: ('0', 0)`` (flight-recorder-and-reconfigure.md E1, E2b, E2c).
* JSON dumps carry ``pg_status`` values as strings and ``process_group`` as a list.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._pickle import DumpError, load_restricted

__all__ = [
    "DumpError",
    "DumpSet",
    "Entry",
    "GroupConfig",
    "RankDump",
    "infer_prefix",
    "load_dir",
    "parse_dump",
]

# Every torch from 2.13 to 2.15 writes "2.10"; torchfrtrace's own reader handles 2.x.
_MIN_MINOR, _MAX_MINOR = 2, 10
_EXTRA = re.compile(r"^ncclx-(?P<rec>.+)-rank(?P<rank>\d+)\.pkl$")
_RANKED = re.compile(r"^(?P<prefix>.*?)(?P<rank>\d+)$")


@dataclass(frozen=True)
class Entry:
    """One collective as one rank recorded it."""

    group: str  # pg name, e.g. "0"
    desc: str  # e.g. "default_pg"
    seq: int  # collective_seq_id
    op: str  # "all_reduce" (profiling_name without the "gloo:" prefix)
    backend: str  # "gloo", "nccl", "nccl2"...
    input_sizes: str
    input_dtypes: str
    output_sizes: str
    completed: bool
    frames: tuple[tuple[str, str, int], ...]


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
    entries: list[Entry]
    raw: dict[str, Any]
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class DumpSet:
    folder: Path
    prefix: str
    dumps: dict[tuple[str, int], RankDump]  # (recorder, rank) -> dump
    repairs: list[str]

    def recorders(self) -> list[str]:
        return sorted({rec for rec, _ in self.dumps})


def _parse_ranks(text: object) -> list[int] | None:
    if isinstance(text, list):
        value: object = text
    else:
        try:
            value = ast.literal_eval(str(text))
        except (ValueError, SyntaxError):
            return None
    if not isinstance(value, (list, tuple)) or not all(isinstance(r, int) for r in value):
        return None
    return [int(r) for r in value] or None  # 2.13 gloo writes '[]': unknown


def _entry(raw: dict[str, Any], source: str) -> Entry | None:
    try:
        pg = raw["process_group"]
        prof = str(raw["profiling_name"])
        if raw.get("is_p2p"):
            return None  # p2p ops have their own sequence; gloo never records them
        backend, _, op = prof.partition(":")
        if not op:
            backend, op = "", prof
        frames = tuple(
            (str(f.get("name", "")), str(f.get("filename", "")), int(f.get("line", 0) or 0))
            for f in raw.get("frames") or []
            if isinstance(f, dict)
        )
        return Entry(
            group=str(pg[0]),
            desc=str(pg[1]),
            seq=int(raw["collective_seq_id"]),
            op=op,
            backend=backend,
            input_sizes=str(raw.get("input_sizes")),
            input_dtypes=str(raw.get("input_dtypes")),
            output_sizes=str(raw.get("output_sizes")),
            completed=bool(raw.get("retired")) or raw.get("state") == "completed",
            frames=frames,
        )
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise DumpError(f"{source}: malformed entry ({type(exc).__name__}: {exc})") from None


def _check_version(version: object, source: str) -> str:
    text = str(version)
    m = re.fullmatch(r"(\d+)\.(\d+)", text)
    if not m or int(m.group(1)) != 2 or not _MIN_MINOR <= int(m.group(2)) <= _MAX_MINOR:
        raise DumpError(
            f"{source}: unknown flight-recorder format version {text!r} "
            f"(this ncclx reads 2.{_MIN_MINOR} to 2.{_MAX_MINOR}, what torch 2.13-2.15 write)"
        )
    return text


def parse_dump(data: bytes, path: Path, rank: int, recorder: str | None = None) -> RankDump:
    """Parse one dump file's bytes (pickle or JSON)."""
    source = str(path)
    head = data.lstrip()[:1]
    if not data:
        raise DumpError(f"{source}: empty file; the rank died while writing it, or it is not a dump")
    if head == b"{":
        fmt = "json"
        try:
            obj: object = json.loads(data)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise DumpError(f"{source}: not valid JSON ({exc}); is the file truncated?") from None
    elif data[:1] == b"\x80":
        fmt = "pickle"
        obj = load_restricted(data, source)
    else:
        raise DumpError(f"{source}: not a flight-recorder dump (neither a pickle nor JSON)")
    if not isinstance(obj, dict) or "version" not in obj:
        raise DumpError(f"{source}: not a flight-recorder dump (no 'version' key at the top level)")
    version = _check_version(obj["version"], source)
    raw_entries = obj.get("entries", [])
    if not isinstance(raw_entries, list):
        raise DumpError(f"{source}: 'entries' is not a list")
    entries = [e for e in (_entry(r, source) for r in raw_entries if isinstance(r, dict)) if e]
    config: dict[str, GroupConfig] = {}
    for key, row in (obj.get("pg_config") or {}).items():
        if isinstance(row, dict):
            config[str(key)] = GroupConfig(
                str(row.get("name", key)), str(row.get("desc", "")), _parse_ranks(row.get("ranks"))
            )
    status: dict[str, dict[str, int]] = {}
    for key, row in (obj.get("pg_status") or {}).items():
        if isinstance(row, dict):
            try:
                status[str(key)] = {str(k): int(v) for k, v in row.items()}
            except (TypeError, ValueError):
                continue
    meta_obj = obj.get("ncclx")
    meta: dict[str, Any] = dict(meta_obj) if isinstance(meta_obj, dict) else {}
    rec = recorder or str(meta.get("recorder") or "") or _recorder_from_entries(entries)
    return RankDump(rank, path, rec, version, fmt, config, status, entries, obj, meta)


def _recorder_from_entries(entries: list[Entry]) -> str:
    names = {e.backend for e in entries if e.backend}
    if names == {"nccl"}:
        return "nccl-legacy"
    return names.pop() if len(names) == 1 else "gloo"


def infer_prefix(names: list[str], folder: Path) -> str:
    """The common ``<prefix>`` of files named ``<prefix><rank>`` (as torchfrtrace infers it)."""
    prefixes = sorted({m.group("prefix") for n in names if (m := _RANKED.match(n))})
    if not prefixes:
        raise DumpError(f"{folder}: no dump files (names ending in a rank number); is this the dump folder?")
    if len(prefixes) > 1:
        shown = ", ".join(repr(p) for p in prefixes[:5])
        raise DumpError(f"{folder}: files with several prefixes ({shown}); pass --prefix")
    return prefixes[0]


def load_dir(folder: Path, prefix: str | None = None) -> DumpSet:
    """Load ``<prefix><rank>`` files (and ncclx's extra-recorder files) and repair them."""
    if folder.is_file():
        raise DumpError(f"{folder}: is a file, not a folder; pass the folder that holds the dumps ({folder.parent})")
    if not folder.is_dir():
        raise DumpError(f"{folder}: no such folder")
    names = sorted(p.name for p in folder.iterdir() if p.is_file() and not p.name.startswith("."))
    if not names:
        raise DumpError(f"{folder}: empty folder, no dumps to analyze")
    if prefix is None:
        prefix = infer_prefix([n for n in names if not _EXTRA.match(n)], folder)
    dumps: dict[tuple[str, int], RankDump] = {}
    for name in names:
        extra = _EXTRA.match(name)
        if extra:
            rank, rec = int(extra.group("rank")), extra.group("rec")
        elif name.startswith(prefix) and name[len(prefix):].isdigit():
            rank, rec = int(name[len(prefix):]), None
        else:
            continue
        path = folder / name
        dump = parse_dump(path.read_bytes(), path, rank, rec)
        dumps[(dump.recorder, rank)] = dump
    if not dumps:
        raise DumpError(f"{folder}: no files named {prefix}<rank>; check --prefix")
    repairs = _repair(dumps)
    return DumpSet(folder, prefix, dumps, repairs)


def _world_hint(dumps: dict[tuple[str, int], RankDump]) -> int:
    world = 1 + max(r for _, r in dumps)
    for d in dumps.values():
        ws = d.meta.get("world_size")
        if isinstance(ws, int):
            world = max(world, ws)
        for cfg in d.pg_config.values():
            if cfg.ranks:
                world = max(world, 1 + max(cfg.ranks))
    return world


def _repair(dumps: dict[tuple[str, int], RankDump]) -> list[str]:
    """Rebuild missing or ``''``-keyed pg_config rows; returns what was repaired."""
    repairs: list[str] = []
    world = _world_hint(dumps)
    # Good rows any rank recorded, by group name: the best source of membership.
    known: dict[str, GroupConfig] = {}
    for d in dumps.values():
        for key, cfg in d.pg_config.items():
            if key and cfg.ranks:
                known.setdefault(key, cfg)
    seen_in: dict[str, set[int]] = {}
    for (_, rank), d in dumps.items():
        for e in d.entries:
            seen_in.setdefault(e.group, set()).add(rank)
    fixed: list[int] = []
    for (_, rank), d in sorted(dumps.items(), key=lambda kv: kv[0][1]):
        names = {e.group: e.desc for e in d.entries}
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
                ranks = list(range(world))
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
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(str(r) for r in ranks)


def repaired_pickle_obj(dump: RankDump) -> dict[str, Any]:
    """The dump's raw dict with the repaired pg_config, as torchfrtrace reads it."""
    obj = dict(dump.raw)
    obj["pg_config"] = {
        k: {"name": c.name, "desc": c.desc, "ranks": str(c.ranks or [])} for k, c in dump.pg_config.items()
    }
    return obj
