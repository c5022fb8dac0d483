"""flight-recorder: will a hang leave a usable trace, and where?

Facts (docs/torch-versions.md, "Flight recorder per backend" and "Environment variables", and measured here
on 2.13.0/2.15.0 with a 1-rank gloo group):
* buffer size: first of TORCH_FR_BUFFER_SIZE, TORCH_NCCL_TRACE_BUFFER_SIZE that is set; 0
  records nothing; a negative value does NOT turn it off: the ring loses its bound (-1 kept
  2,100 of 2,100 entries where the default keeps 2,000, on 2.13 and 2.15).  A non-integer ("abc", or an empty value) makes init_process_group
  abort the process (SIGABRT, "terminate called without an active exception"); "1e3" or
  "100abc" raise ValueError in 2.15's Python; with 2 ranks "abc" also hung init at times;
  3000000000 hung init.
* dumps on a hang: gloo never (no watchdog, no abort hook); nccl-lazy has no abort hook;
  nccl2 through the FR hook's abort hook (TORCH_FR_DUMP_ON_TIMEOUT, then the old name);
  legacy through its heartbeat monitor, which reads only TORCH_NCCL_DUMP_ON_TIMEOUT.
* the dump path is ``<prefix><rank>``; TORCH_FR_DUMP_DYNAMIC_FILE_NAME=1 drops the rank.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping

from ..._fr._env import ENV_VAR as HANG_DUMP_VAR  # ncclx's own hang watchdog
from ..._fr._paths import default_prefix
from ..._torch import probe as ti
from ..._torch.envvars import FR_BUFFER_NAMES, FR_DUMP_FILE_NAMES, FR_DUMP_ON_TIMEOUT_NAMES
from .._facts import Facts
from .._model import CheckResult, Status

DYNAMIC_VAR = "TORCH_FR_DUMP_DYNAMIC_FILE_NAME"
MIN_FREE_BYTES = 64 << 20
MAX_SANE_BUFFER = 1_000_000
INT32_MAX = 2**31 - 1

_TRUE = {"1", "true", "yes", "y", "on"}
_FALSE = {"0", "false", "no", "n", "off"}


def parse_bool(value: str) -> bool | None:
    v = value.strip().lower()
    return True if v in _TRUE else False if v in _FALSE else None


def first_set(env: Mapping[str, str], names: tuple[str, ...]) -> tuple[str, str] | None:
    """The first of ``names`` present in ``env`` (c10d's getCvar precedence; empty counts)."""
    for name in names:
        if name in env:
            return name, env[name]
    return None


def _hang_dump(env: Mapping[str, str]) -> float | None:
    """NCCLX_HANG_DUMP's seconds, parsed as the watchdog parses them (None: off or invalid)."""
    from ..._fr._watchdog import parse_seconds

    raw = env.get(HANG_DUMP_VAR, "").strip()
    if not raw or raw == "0":
        return None
    try:
        return parse_seconds(raw)
    except ValueError:
        return None


def _ancestors(directory: str) -> list[str]:
    """``directory`` and its parents, outermost first."""
    out = [directory]
    while os.path.dirname(out[-1]) not in ("", out[-1]):
        out.append(os.path.dirname(out[-1]))
    return out[::-1]


def flight_recorder(f: Facts) -> CheckResult:
    cid = "flight-recorder"
    env = dict(f.environ)
    found: list[tuple[Status, str, str]] = []  # (status, finding, remedy)
    details: dict[str, object] = {}

    # -- buffer -------------------------------------------------------------------------
    size, unusable = 2000, False
    buf = first_set(env, FR_BUFFER_NAMES)
    if buf is not None:
        name, raw = buf
        details["buffer_var"] = name
        if not re.fullmatch(r"\s*[+-]?\d+\s*", raw):
            found.append((
                Status.FAIL,
                f"{name}={raw!r} is not an integer: init_process_group aborts the process "
                "(SIGABRT), hangs, or raises ValueError (measured on 2.13 and 2.15)",
                f"set {name} to a whole number of entries (default 2000) or unset it",
            ))
            size, unusable = -1, True
        else:
            size = int(raw)
            if size > INT32_MAX:
                found.append((Status.FAIL, f"{name}={size} is out of range (init hangs or aborts)",
                              f"set {name}=2000"))
            elif size > MAX_SANE_BUFFER:
                found.append((Status.WARN, f"{name}={size} entries costs host memory on every rank",
                              f"{name}=2000 (the default) is enough for hang analysis"))
            elif size == 0:
                found.append((Status.WARN, f"{name}=0 disables the flight recorder: a hang leaves "
                              "no trace", f"unset {name} (default 2000)"))
            elif size < 0:
                found.append((Status.WARN, f"{name}={raw.strip()} does not disable the flight recorder: a "
                              "negative size removes its bound, so it keeps every entry (host memory grows "
                              "with each collective)",
                              f"unset {name} (default 2000), or set it to 0 to turn recording off"))
        other = [n for n in FR_BUFFER_NAMES if n in env and n != name]
        if other and env[other[0]].strip() != raw.strip():
            details["buffer_ignored"] = {other[0]: env[other[0]]}
    details["buffer_size"] = size

    # -- does this backend dump on a hang -----------------------------------------------
    impl, _ = f.job_backend
    details["backend"] = impl
    note = ""
    dot = first_set(env, FR_DUMP_ON_TIMEOUT_NAMES)
    legacy_dot = env.get("TORCH_NCCL_DUMP_ON_TIMEOUT")
    if dot is not None and parse_bool(dot[1]) is None:
        found.append((Status.WARN, f"{dot[0]}={dot[1]!r} is not a boolean", f"set {dot[0]}=1 or 0"))
    if impl == ti.IMPL_LEGACY:
        on = parse_bool(legacy_dot) if legacy_dot is not None else True
        if legacy_dot is None and "TORCH_FR_DUMP_ON_TIMEOUT" in env:
            found.append((Status.WARN, "TORCH_FR_DUMP_ON_TIMEOUT is set but the legacy ProcessGroupNCCL reads "
                          "only TORCH_NCCL_DUMP_ON_TIMEOUT", "set both names to the same value"))
    else:
        on = parse_bool(dot[1]) if dot is not None else True
    details["dump_on_timeout"] = on
    hang = _hang_dump(env)
    details["hang_dump"] = hang
    raw_hang = env.get(HANG_DUMP_VAR, "").strip()
    if raw_hang and raw_hang != "0" and hang is None:
        found.append((Status.WARN, f"{HANG_DUMP_VAR}={raw_hang!r} is not a number of seconds > 0: the hang "
                      "watchdog stays off", f"set {HANG_DUMP_VAR}=300 (seconds), or unset it"))
    how = {
        ti.IMPL_NCCL2: "nccl2 dumps through the FR hook's abort hook on a watchdog timeout",
        ti.IMPL_LEGACY: "legacy ProcessGroupNCCL dumps through its heartbeat monitor on a timeout",
    }
    never = {
        ti.IMPL_GLOO: f"{f.backend_label('gloo')} never dumps on a hang: no watchdog, no abort hook",
        ti.IMPL_LAZY: "nccl-lazy has no abort hook: no automatic dump on a hang",
    }
    watchdog_fix = (f"export {HANG_DUMP_VAR}=SECONDS and import ncclx_migrate in the training script: its "
                    "watchdog dumps every rank's flight recorder when a collective hangs for SECONDS")
    if size == 0 or unusable:
        pass  # already reported: nothing would be dumped anyway
    elif impl in never:
        if hang:
            details["dumps_on_hang"] = f"{HANG_DUMP_VAR}={hang:g}"
        elif f.no_gpu_here:
            # gloo only because this node has no GPU: the job is judged on a GPU node (the header
            # says how), so what gloo does on a hang is a note here, not a warning on every run.
            details["dumps_on_hang"] = False
            note = "how a hang is dumped depends on the GPU job's backend (judge it with --backend nccl)"
        else:
            found.append((Status.WARN, never[impl], watchdog_fix))
            details["dumps_on_hang"] = False
    elif impl in how:
        if on is False:
            found.append((Status.WARN, how[impl].replace(" dumps ", " would dump ") + ", but dump-on-timeout is off",
                          "unset TORCH_FR_DUMP_ON_TIMEOUT and TORCH_NCCL_DUMP_ON_TIMEOUT (default on)"
                          if impl == ti.IMPL_NCCL2 else "unset TORCH_NCCL_DUMP_ON_TIMEOUT (default on)"))
            details["dumps_on_hang"] = False
        else:
            details["dumps_on_hang"] = True

    # -- where the dump goes ------------------------------------------------------------
    path = first_set(env, FR_DUMP_FILE_NAMES)
    prefix = path[1] if path else default_prefix(env)
    details["dump_prefix"] = prefix
    directory = os.path.dirname(prefix) or "."
    if path is not None:
        origin, elsewhere = path[0], "at a writable directory"
    else:
        origin = "XDG_CACHE_HOME" if env.get("XDG_CACHE_HOME") else "the home directory's .cache"
        elsewhere = "to a prefix in a writable directory (e.g. /shared/fr/rank_)"
    probe = os.path.abspath(directory)  # a relative XDG_CACHE_HOME is relative to the job's cwd
    while not os.path.isdir(probe) and os.path.dirname(probe) != probe:
        probe = os.path.dirname(probe)  # the default cache dir is created on first dump
    blocker = next((p for p in _ancestors(directory) if os.path.lexists(p) and not os.path.isdir(p)), None)
    if blocker is not None:
        found.append((Status.FAIL, f"dump directory {directory} (from {origin}) cannot exist: {blocker} is "
                      "not a directory, so the dump is lost",
                      f"point {path[0]} at a directory" if path is not None
                      else f"point XDG_CACHE_HOME at a directory, or set {FR_DUMP_FILE_NAMES[0]} {elsewhere}"
                      if env.get("XDG_CACHE_HOME") else f"move {blocker} aside, or set {FR_DUMP_FILE_NAMES[0]} {elsewhere}"))
    elif path is not None and not os.path.isdir(directory):
        found.append((Status.FAIL, f"dump directory {directory} ({path[0]}) does not exist: the dump is lost",
                      f"mkdir -p {directory} on every node, or point {path[0]} at an existing directory"))
    else:
        if not os.access(probe, os.W_OK | os.X_OK):
            made = "" if probe == os.path.abspath(directory) else f" (torch would create {directory} in it)"
            found.append((Status.FAIL, f"dump directory {probe}{made} is not writable by this user "
                          f"(from {origin}): the dump is lost",
                          f"make {probe} writable by this user, or set {FR_DUMP_FILE_NAMES[0]} {elsewhere}"
                          if path is None else f"make {probe} writable by this user, or point {path[0]} {elsewhere}"))
        else:
            try:
                free = shutil.disk_usage(probe).free
                details["dump_free_bytes"] = free
                if free < MIN_FREE_BYTES:
                    found.append((Status.WARN, f"dump directory {probe} has only {free >> 20} MiB free",
                                  f"point {FR_DUMP_FILE_NAMES[0]} at a filesystem with room"))
            except OSError:
                pass
    dyn = env.get(DYNAMIC_VAR)
    details["dynamic_file_name"] = dyn
    if dyn is not None and parse_bool(dyn):
        found.append((Status.WARN, f"{DYNAMIC_VAR}={dyn} drops the rank suffix: every rank writes the same file "
                      f"{prefix} and they overwrite each other", f"unset {DYNAMIC_VAR}"))

    order = [Status.FAIL, Status.WARN]
    found.sort(key=lambda t: order.index(t[0]))
    if not found:
        msg = f"buffer {size} entries; " + (
            how.get(impl or "", "")
            or (f"{HANG_DUMP_VAR}={hang:g}s watchdog dumps on a hang" if hang else note or "backend unknown")
        ) + f"; dumps go to {prefix}<rank>"
        return CheckResult(cid, Status.OK, msg, "", details)
    status = found[0][0]
    details["problems"] = [{"status": st.value, "message": m, "remedy": r} for st, m, r in found]
    message = "; ".join(m for _, m, _ in found)
    remedy = "; ".join(dict.fromkeys(r for _, _, r in found if r))
    return CheckResult(cid, status, message, remedy, details)
