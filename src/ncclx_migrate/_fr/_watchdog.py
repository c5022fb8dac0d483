"""The hang watchdog: dump every rank's flight recorder when a collective hangs.

How it works (one daemon thread per process, nothing on the training thread):

* It waits, sleeping, until ``torch.distributed`` is imported and a default
  group exists (it never imports torch itself), so turning it on before
  ``init_process_group`` -- or at ``import ncclx_migrate`` via NCCLX_HANG_DUMP -- is fine.
* Every poll it reads each recorder's ``pg_status`` (``_dump_fr_trace`` without
  entries: ~30 us) and notes, per group, since when ``last_enqueued_collective``
  has been ahead of ``last_completed_collective`` with no progress.  That works on
  every backend that records (gloo natively, nccl2 / nccl-lazy through
  FlightRecorderHook, legacy NCCL natively) and on torch 2.13-2.15, with no hook
  on the collective path: the overhead on training is the GIL for a few tens of
  microseconds per poll.
* When a collective has not completed within the limit, the thread writes this
  rank's dump of every recorder in use (with stack traces and a repaired
  ``pg_config``) to ``<TORCH_FR_DUMP_TEMP_FILE><rank>`` and asks the other ranks
  to dump through the job's TCPStore, on a separate client connection (short
  timeout) so it never waits behind, or blocks, the process group.  Every
  rank's thread polls that key, so ranks that never entered the collective dump too.
* An uncaught exception in the main thread while a group is live (e.g. gloo's
  ``Connection reset by peer`` when a peer died) also dumps and asks the peers.
* SIGTERM (Slurm's time limit, ``scancel``, a launcher stopping the job) dumps this rank
  before the process ends as SIGTERM ends it.  A rank in a hang is blocked inside a
  collective, where no Python signal handler runs, so the signal is read on this thread
  from ``signal.set_wakeup_fd`` (:class:`_Term`).

Nothing here raises into training code; failures are printed once to stderr.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
import time

from ._frames import is_user

# No json, traceback, pathlib, typing or dataclasses at import: NCCLX_HANG_DUMP starts this
# module inside `import ncclx_migrate` (budget 20 ms; json alone costs ~10 ms).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from types import FrameType, TracebackType
    from typing import Any

__all__ = ["HangDump", "enable", "parse_seconds"]

_KEY = "ncclx/hang_dump/"  # <n>: JSON request n; "count": the counter
_lock = threading.Lock()
_active: HangDump | None = None


def parse_seconds(text: str) -> float:
    """NCCLX_HANG_DUMP's value: positive seconds (ValueError, saying what is valid, otherwise)."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise ValueError(f"hang-dump seconds must be a finite number > 0 (such as 300), got {text!r}")
    return value


def _rank_tag() -> str:
    """" (rank N)" for the log lines: the process group's rank, else the launcher's RANK."""
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            return f" (rank {dist.get_rank()})"
    except Exception:  # a group being torn down: fall back to the environment
        pass
    rank = os.environ.get("RANK", "").strip()
    return f" (rank {rank})" if rank.isdigit() else ""


def _log(msg: str) -> None:
    try:
        sys.stderr.write(f"ncclx hang dump{_rank_tag()}: {msg}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def _user_frame(frame: FrameType | None) -> str:
    """Innermost frame outside torch, ncclx and the stdlib threading module."""
    while frame is not None:
        fn = frame.f_code.co_filename
        if is_user(fn):
            return f"{frame.f_code.co_name} at {fn}:{frame.f_lineno}"
        frame = frame.f_back
    return ""


def _python_stacks() -> tuple[str, dict[str, list[list[object]]]]:
    import traceback

    frames = sys._current_frames()
    names = {t.ident: t.name for t in threading.enumerate()}
    stacks: dict[str, list[list[object]]] = {}
    for ident, frame in frames.items():
        if ident == threading.get_ident():
            continue
        stack = traceback.extract_stack(frame)
        key = f"{names.get(ident, 'thread')} ({ident})"
        stacks[key] = [[f.name, f.filename, f.lineno or 0] for f in reversed(stack)][:50]
    main = threading.main_thread().ident
    return _user_frame(frames.get(main) if main is not None else None), stacks


class _Term:
    """SIGTERM, seen on the watchdog thread.  Python runs a signal handler only on the main
    thread and only between bytecodes: the main thread of a hung rank is inside a C++ wait,
    so the handler waits as long as the hang.  ``signal.set_wakeup_fd`` makes C's handler
    write the signal's number to a pipe at once; the watchdog thread reads it.

    Installed only from the main thread, where SIGTERM has its default action (a handler of
    the program's own is called after the dump; SIGTERM ignored stays ignored) and no other
    wakeup fd is set (asyncio's)."""

    def __init__(self, read_fd: int, write_fd: int, previous: Any) -> None:
        self.read_fd, self.write_fd, self.previous = read_fd, write_fd, previous
        self.done = threading.Event()  # the dump on SIGTERM is written (or was not needed)
        self.closed = False

    @staticmethod
    def install(watchdog: HangDump) -> _Term | None:
        import signal

        if threading.current_thread() is not threading.main_thread():
            return None
        previous = signal.getsignal(signal.SIGTERM)
        if previous in (signal.SIG_IGN, None):
            return None
        read_fd, write_fd = os.pipe()
        os.set_blocking(read_fd, False)
        os.set_blocking(write_fd, False)
        try:
            other = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
        except ValueError:
            other = -2
        if other != -1:  # someone else's (asyncio), or not possible here
            if other >= 0:
                signal.set_wakeup_fd(other)
            os.close(read_fd)
            os.close(write_fd)
            return None
        term = _Term(read_fd, write_fd, previous)
        signal.signal(signal.SIGTERM, lambda signum, frame: term.on_main_thread(watchdog, signum, frame))
        # A forked child has no watchdog thread, and must not write its signals to this pipe.
        os.register_at_fork(after_in_child=term.close)
        return term

    def on_main_thread(self, watchdog: HangDump, signum: int, frame: FrameType | None) -> None:
        """The Python handler, when the main thread gets to run it: the watchdog thread
        dumps (bounded wait), then the program's own handler runs, or the process ends."""
        if watchdog.running:
            self.done.wait(timeout=60)
        if callable(self.previous):
            self.previous(signum, frame)
        else:
            _end_as_sigterm()

    def close(self) -> None:
        import signal

        if self.closed or threading.current_thread() is not threading.main_thread():
            return  # (off the main thread the handler stays: it ends the process as SIGTERM would)
        self.closed = True
        other = signal.set_wakeup_fd(-1)
        if other not in (self.write_fd, -1):  # set since by someone else: theirs stays
            signal.set_wakeup_fd(other)
        if signal.getsignal(signal.SIGTERM) is not self.previous:
            signal.signal(signal.SIGTERM, self.previous)
        for fd in (self.read_fd, self.write_fd):
            os.close(fd)


def _end_as_sigterm() -> None:
    """End the process as SIGTERM's default action does (killed by signal 15, exit 143 in a
    shell), from any thread: the C disposition is reset (Python's signal.signal works only on
    the main thread), then the signal is sent again."""
    import signal

    try:
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
        else:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.signal.restype = ctypes.c_void_p
            libc.signal(int(signal.SIGTERM), ctypes.c_void_p(0))  # SIG_DFL
        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the signal ends the process before this returns
    finally:
        os._exit(128 + int(signal.SIGTERM))


class _Pending:
    __slots__ = ("done", "fired", "since")

    def __init__(self, done: int, since: float, fired: bool = False) -> None:
        self.done, self.since, self.fired = done, since, fired


class HangDump:
    """Handle of the running watchdog; ``stop()`` turns it off."""

    # A plain class, not a dataclass: dataclasses costs ~9 ms of `import ncclx_migrate`.
    def __init__(self, seconds: float, stack_traces: bool = True, poll: float = 1.0) -> None:
        self.seconds = seconds
        self.stack_traces = stack_traces
        self.poll = poll
        self.dumps: list[Path] = []  # every file written so far
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pending: dict[tuple[str, str], _Pending] = {}
        self._store: Any = None
        self._store_failed = False
        self._next_request = 1
        self._last_dump = -1e18
        self._recorders: list[str] = []
        self._polls = 0
        self._poll_error: str | None = None
        self._prev_hook: Any = None
        self._dump_lock = threading.Lock()
        self._term: _Term | None = None

    def __repr__(self) -> str:
        return (f"HangDump(seconds={self.seconds!r}, stack_traces={self.stack_traces!r}, "
                f"poll={self.poll!r}, dumps={self.dumps!r})")

    # --- lifecycle -----------------------------------------------------------------
    def start(self) -> None:
        self._term = _Term.install(self)
        self._thread = threading.Thread(target=self._run, name="ncclx-hang-dump", daemon=True)
        self._thread.start()
        self._prev_hook = sys.excepthook
        sys.excepthook = self._excepthook
        atexit.register(self._at_exit)

    def _at_exit(self) -> None:
        """Let a dump in progress finish and the thread leave torch (bounded) before
        the interpreter tears down: a daemon thread still inside a c10d call while
        torch's statics are destroyed can end the process with std::terminate."""
        self._stop.set()
        if self._dump_lock.acquire(timeout=30):
            self._dump_lock.release()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)

    def stop(self) -> None:
        """Stop the watchdog thread (idempotent); dumps already written stay."""
        global _active
        self._stop.set()
        atexit.unregister(self._at_exit)
        if sys.excepthook == self._excepthook:
            sys.excepthook = self._prev_hook
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)
        if self._term is not None:
            self._term.close()
            self._term = None
        with _lock:
            if _active is self:
                _active = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    # --- torch access (never imports torch) --------------------------------------
    @staticmethod
    def _dist() -> Any:
        dist = sys.modules.get("torch.distributed")
        if dist is None:
            return None
        try:
            return dist if dist.is_available() and dist.is_initialized() else None
        except Exception:
            return None

    def _client(self, dist: Any) -> Any:
        """A TCPStore client of its own on the job's store (None: no store to use)."""
        if self._store is not None or self._store_failed:
            return self._store
        try:
            from datetime import timedelta

            from torch.distributed import distributed_c10d as dc

            store = dc._get_default_store()
            while isinstance(store, dist.PrefixStore):
                store = store.underlying_store
            if isinstance(store, dist.TCPStore):
                self._store = dist.TCPStore(
                    store.host, store.port, is_master=False,
                    timeout=timedelta(seconds=max(2.0, self.poll * 2)),
                    wait_for_workers=False,
                )
            else:
                self._store = store  # FileStore / HashStore: non-blocking ops only
            # Requests already in the store belong to an earlier attempt of the job
            # (torchelastic restarts keep the agent's store): start after them.
            self._next_request = int(self._store.add(f"{_KEY}count", 0)) + 1
        except Exception as exc:
            self._store, self._store_failed = None, True
            _log(f"cannot reach the job's store ({type(exc).__name__}: {exc}); this rank dumps alone")
        return self._store

    # --- the loop ------------------------------------------------------------------
    def _run(self) -> None:
        while not self._wait(self.poll):
            dist = self._dist()
            if dist is None:
                continue
            try:
                self._tick(dist)
            except Exception as exc:  # never let the thread die on a bad poll
                text = f"poll failed ({type(exc).__name__}: {exc})"
                if text != self._poll_error:  # once per distinct failure, not every back-off
                    _log(text + f"; retrying every {self.seconds:g} s, quietly")
                    self._poll_error = text
                self._wait(self.seconds)

    def _wait(self, seconds: float) -> bool:
        """Sleep ``seconds`` unless SIGTERM comes (then dump, see :class:`_Term`); True: stop."""
        term = self._term
        if term is None:
            return self._stop.wait(seconds)
        import select
        import signal

        deadline = time.monotonic() + seconds
        while not self._stop.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            try:
                ready, _, _ = select.select([term.read_fd], [], [], min(left, 0.5))
                got = os.read(term.read_fd, 512) if ready else b""
            except OSError:
                return self._stop.wait(left)
            if int(signal.SIGTERM) in got:
                self._on_sigterm(term)
        return True

    def _on_sigterm(self, term: _Term) -> None:
        dist = self._dist()
        try:
            if dist is None:
                pass  # no group yet: nothing to dump
            elif self.dumps:  # taken while the hang was in flight: it says more, and stays
                _log(f"SIGTERM: the job is being stopped; kept {', '.join(map(str, self.dumps[:2]))}")
            else:
                self._dump(dist, "sigterm", "SIGTERM: the job is being stopped (Slurm's time limit, "
                           "scancel, or the launcher)", None)
        except Exception as exc:
            _log(f"dump on SIGTERM failed ({type(exc).__name__}: {exc})")
        finally:
            term.done.set()
        if not callable(term.previous):
            _end_as_sigterm()  # the program's own handler, if any, runs on the main thread

    def _tick(self, dist: Any) -> None:
        from . import _dump

        if self._polls == 0:
            self._warn_if_recording_off()
        if self._polls % 20 == 0 or not self._recorders:
            self._recorders = _dump.recorders_in_use()
        self._polls += 1
        now = time.monotonic()
        stuck: tuple[str, str, int] | None = None
        for rec in self._recorders:
            for pg, st in _dump.recorder_status(rec).items():
                enq = st.get("last_enqueued_collective", 0)
                done = max(st.get("last_completed_collective", 0), 0)
                key = (rec, pg)
                if enq <= done:
                    self._pending.pop(key, None)
                    continue
                p = self._pending.get(key)
                if p is None or p.done != done:
                    self._pending[key] = p = _Pending(done, now)
                if not p.fired and now - p.since >= self.seconds:
                    p.fired = True
                    seq = self._confirm(rec, pg, done)
                    if seq is not None:
                        stuck = stuck or (rec, pg, seq)
        if stuck is not None:
            self._fire_local(dist, *stuck, waited=now - self._pending[stuck[:2]].since)
        self._serve_requests(dist)

    @staticmethod
    def _confirm(rec: str, pg: str, done: int) -> int | None:
        """The first collective of ``pg`` after ``done`` that its entries show unfinished.

        gloo's ``pg_status`` can lag its entries (measured on 2.15: the last
        collective retired while ``last_completed_collective`` still named the one
        before), so the deadline is checked against the entries before firing.
        """
        from . import _dump

        dump = _dump.dump_recorder(rec, stack_traces=False)
        open_seqs = [
            int(e["collective_seq_id"])
            for e in (dump or {}).get("entries", [])
            if str(e["process_group"][0]) == pg
            and int(e["collective_seq_id"]) > done
            and not e.get("is_p2p")
            and not (e.get("retired") or e.get("state") == "completed")
        ]
        return min(open_seqs) if open_seqs else None

    @staticmethod
    def _warn_if_recording_off() -> None:
        from .._torch.envvars import FR_BUFFER_NAMES

        for name in FR_BUFFER_NAMES:  # c10d: the first one set wins
            value = os.environ.get(name)
            if value:
                if value.strip().lstrip("+-").isdigit() and int(value) == 0:  # < 0 still records
                    _log(f"{name}={value} turns the flight recorder off: the watchdog sees no "
                         "collectives and will never fire; unset it or make it > 0")
                return

    def _fire_local(self, dist: Any, rec: str, pg: str, seq: int, waited: float) -> None:
        label = self._group_label(pg)
        reason = f"collective #{seq} of group {label} ({rec}) not completed after {waited:.1f} s"
        self._request_peers(dist, {"recorder": rec, "group": label, "seq": seq, "reason": reason})
        self._dump(dist, "local-deadline", reason, primary=rec, note="; asked the other ranks to dump")

    def _serve_requests(self, dist: Any) -> None:
        store = self._client(dist)
        if store is None:
            return
        while True:
            key = f"{_KEY}{self._next_request}"
            try:
                if not store.check([key]):
                    return
                import json

                req = json.loads(store.get(key))
            except Exception as exc:
                self._store, self._store_failed = None, True  # store gone (rank 0 exited?)
                _log(f"stopped polling the job's store ({type(exc).__name__})")
                return
            self._next_request += 1
            if req.get("rank") == self._rank(dist) or time.monotonic() - self._last_dump < self.seconds:
                continue  # our own request, or we dumped for this hang already
            from .._shown import shown  # (not at import: pathlib; see above)

            # another rank's text: its control characters shown, never sent to this terminal
            reason = f"rank {shown(req.get('rank'))} asked: {shown(req.get('reason', ''))}"
            self._dump(dist, "peer-request", reason, primary=req.get("recorder"))

    def _request_peers(self, dist: Any, req: dict[str, Any]) -> None:
        store = self._client(dist)
        if store is None:
            return
        try:
            n = int(store.add(f"{_KEY}count", 1))
            import json

            store.set(f"{_KEY}{n}", json.dumps({**req, "rank": self._rank(dist)}))
        except Exception as exc:
            _log(f"could not ask the other ranks to dump ({type(exc).__name__}: {exc})")

    # --- dumping -----------------------------------------------------------------------
    @staticmethod
    def _rank(dist: Any) -> int:
        return int(dist.get_rank())

    @staticmethod
    def _group_label(pg: str) -> str:
        from . import _dump

        row = _dump.live_pg_config().get(pg, {})
        return row.get("desc") or pg

    def _dump(
        self, dist: Any, trigger: str, reason: str, primary: str | None, note: str = ""
    ) -> list[Path]:
        from . import _dump

        at, stacks = _python_stacks()
        import torch  # already imported: a process group exists

        meta = {
            "trigger": trigger,
            "reason": reason,
            "world_size": int(dist.get_world_size()),
            "torch": str(torch.__version__),
            "pid": os.getpid(),
            "main_thread_at": at,
            "python_stacks": stacks,
        }
        rank = self._rank(dist)
        with self._dump_lock:
            # First a dump without stack traces (under a millisecond), so a file
            # exists even if the process dies now; then the full one.  torch's
            # first stack-traced dump in a process imports torch._inductor to
            # symbolize frames (~900 modules, >1 s), which is why.
            paths = _dump.write_rank_dumps(rank, primary=primary, stack_traces=False, meta=meta)
            self._last_dump = time.monotonic()
            self.dumps.extend(p for p in paths if p not in self.dumps)
            more = " (stack traces follow)" if self.stack_traces and trigger != "manual" else ""
            if trigger != "manual":
                _log(f"{reason}; wrote {', '.join(map(str, paths))}{more}{note}")
            if self.stack_traces:
                paths = _dump.write_rank_dumps(rank, primary=primary, stack_traces=True, meta=meta)
                self.dumps.extend(p for p in paths if p not in self.dumps)
            self._last_dump = time.monotonic()
        return paths

    def dump_now(self, reason: str = "requested") -> list[Path]:
        """Write this rank's dumps now (no request to the peers); [] before init_process_group."""
        dist = self._dist()
        return [] if dist is None else self._dump(dist, "manual", reason, None)

    def _excepthook(
        self, etype: type[BaseException], value: BaseException, tb: TracebackType | None
    ) -> None:
        dist = self._dist()
        # A rank that already dumped for this hang keeps that dump: it was taken
        # while the collective was still in flight, which says more than one
        # taken after gloo gave up (gloo may retire a failed op).  Wait (bounded)
        # for a dump in progress on the watchdog thread first.
        if self._dump_lock.acquire(timeout=30):
            self._dump_lock.release()
        if (
            dist is not None
            and not self._stop.is_set()
            and isinstance(value, RuntimeError)
            and not self.dumps
        ):
            try:
                reason = f"uncaught {etype.__name__}: {str(value).splitlines()[0][:200]}"
                self._request_peers(dist, {"recorder": None, "reason": reason})
                self._dump(dist, "exception", reason, None, note="; asked the other ranks to dump")
            except Exception as exc:
                _log(f"dump on exception failed ({type(exc).__name__}: {exc})")
        hook = self._prev_hook or sys.__excepthook__
        hook(etype, value, tb)


def enable(seconds: float, *, stack_traces: bool = True, poll: float | None = None) -> HangDump:
    """Start (or retune) the process-wide watchdog; see ``ncclx_migrate.enable_hang_dump``."""
    global _active
    seconds = parse_seconds(str(seconds))
    interval = poll if poll is not None else min(1.0, max(0.05, seconds / 4))
    with _lock:
        if _active is not None and _active.running:
            _active.seconds, _active.stack_traces, _active.poll = seconds, stack_traces, interval
            return _active
        _active = HangDump(seconds, stack_traces, interval)
        _active.start()
        return _active
