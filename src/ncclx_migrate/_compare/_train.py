"""``ncclx compare --train -- CMD ...``: the user's own training run once per arm, step by step.

Each arm runs CMD with the arm's environment (its settings, and ``NCCLX_COMPARE_BACKEND`` set
to the arm's backend name for a script that reads it), bounded by what is left of
``--timeout``.  Every ``--metric`` regex is searched line by line in what CMD prints
(stdout and stderr); its first group, one per matching line, is that metric's value at the
next step.  The sequences are compared exactly (``--rtol 0``) or within ``--rtol``; the
first step where they part is named with both values.  No verdict without evidence: a
metric found in neither output, or one that never moved (a run that is not training),
exits 2.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import click

from .._doctor._probe import wait_or_kill
from ._spec import Arm

__all__ = ["DEFAULT_METRIC", "run_train"]

DEFAULT_METRIC = r"loss[=:] *([-0-9.eE+]+)"
BACKEND_VAR = "NCCLX_COMPARE_BACKEND"


def _values(pattern: re.Pattern[str], text: str) -> list[float]:
    out = []
    for line in text.splitlines():
        m = pattern.search(line)
        if m:
            try:
                out.append(float(m.group(1)))
            except (ValueError, IndexError):
                continue
    return out


def _run(arm: Arm, command: list[str], deadline: float, folder: Path) -> dict[str, Any]:
    env = arm.environ(dict(os.environ))
    env[BACKEND_VAR] = arm.backend
    log_path = folder / f"arm-{arm.label}.log"
    start = time.monotonic()
    with open(log_path, "wb") as log:
        try:
            proc = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
        except OSError as exc:
            return {"error": f"cannot start {command[0]!r}: {exc.strerror or exc}", "text": "", "seconds": 0.0}
        killed = bool(wait_or_kill({0: proc}, deadline))
    text = log_path.read_bytes().decode(errors="replace")
    return {"returncode": None if killed else proc.returncode, "killed": killed, "text": text,
            "seconds": round(time.monotonic() - start, 2)}


def _same(a: float, b: float, rtol: float) -> bool:
    return a == b if rtol == 0 else abs(a - b) <= rtol * max(abs(a), abs(b))


def run_train(command: list[str], arms: list[Arm], steps: int | None, metrics: list[str], rtol: float,
              timeout: float, as_json: bool) -> int:
    patterns = []
    for text in metrics or [DEFAULT_METRIC]:
        try:
            pattern = re.compile(text)
        except re.error as exc:
            raise click.BadParameter(f"{text!r} is not a regular expression ({exc})", param_hint="--metric") from None
        if pattern.groups < 1:
            raise click.BadParameter(f"{text!r} has no group: put the value in (...)", param_hint="--metric")
        patterns.append(pattern)
    end = time.monotonic() + timeout
    runs = []
    with tempfile.TemporaryDirectory(prefix="ncclx-compare-train-") as tmp:
        for n, arm in enumerate(arms):
            left = end - time.monotonic()
            runs.append(_run(arm, command, time.monotonic() + (left / 2 if n < len(arms) - 1 else left), Path(tmp)))
    report: dict[str, Any] = {
        "schema": "ncclx.compare-train/1", "command": command, "steps": steps, "rtol": rtol,
        "arms": [{"label": a.label, "spec": a.spec, "backend": a.backend, "env": a.env,
                  "returncode": r.get("returncode"), "killed": r.get("killed", False), "seconds": r["seconds"],
                  "error": r.get("error"), "tail": r["text"].strip().splitlines()[-5:]}
                 for a, r in zip(arms, runs, strict=True)],
        "metrics": [],
    }
    refuse: list[str] = []
    diverged: list[str] = []
    for a, r in zip(arms, runs, strict=True):
        if r.get("error"):
            refuse.append(f"arm {a.label}: {r['error']}")
        elif r.get("killed"):
            diverged.append(f"arm {a.label}: the command was still running at the --timeout deadline (killed)")
        elif r.get("returncode"):
            diverged.append(f"arm {a.label}: the command exited {r['returncode']}")
    for pattern in patterns:
        seqs = [_values(pattern, r["text"])[:steps] if steps else _values(pattern, r["text"]) for r in runs]
        item: dict[str, Any] = {"metric": pattern.pattern, "values": {a.label: s for a, s in zip(arms, seqs, strict=True)}}
        report["metrics"].append(item)
        a_seq, b_seq = seqs[0], seqs[-1]
        if not a_seq or not b_seq:
            missing = [a.label for a, s in zip(arms, seqs, strict=True) if not s]
            refuse.append(f"metric {pattern.pattern!r} not found in the output of arm{'s' if len(missing) > 1 else ''} "
                          f"{' and '.join(missing)}: check --metric against what the command prints")
            continue
        if len(set(a_seq)) == 1 and len(set(b_seq)) == 1:
            refuse.append(f"metric {pattern.pattern!r} never moved ({a_seq[0]!r} at every step in both arms): "
                          "a run that is not training proves nothing")
            continue
        first = next((i for i, (x, y) in enumerate(zip(a_seq, b_seq, strict=False)) if not _same(x, y, rtol)), None)
        if first is not None:
            x, y = a_seq[first], b_seq[first]
            rel = abs(x - y) / max(abs(x), abs(y)) if max(abs(x), abs(y)) else 0.0
            item["first_divergent_step"] = first + 1
            diverged.append(f"metric {pattern.pattern!r} diverges at step {first + 1}: {arms[-1].label} {y!r} against "
                            f"{arms[0].label} {x!r} (off by {abs(x - y):.3g}, relative {rel:.3g})")
        elif steps and (len(a_seq) < steps or len(b_seq) < steps):
            short = [f"{a.label} {len(s)}" for a, s in zip(arms, seqs, strict=True) if len(s) < steps]
            diverged.append(f"metric {pattern.pattern!r}: fewer steps than --steps {steps} ({', '.join(short)})")
        elif len(a_seq) != len(b_seq):
            diverged.append(f"metric {pattern.pattern!r}: arm A printed {len(a_seq)} steps, arm B {len(b_seq)}")
        item["compared_steps"] = min(len(a_seq), len(b_seq))
    if refuse:
        code, verdict = 2, "no verdict: " + refuse[0]
    elif diverged:
        code, verdict = 1, "the arms diverge: " + diverged[0]
    else:
        n = min(item["compared_steps"] for item in report["metrics"])
        how = "exactly" if rtol == 0 else f"within rtol {rtol:g}"
        code, verdict = 0, f"the arms agree: {len(patterns)} metric{'s' if len(patterns) > 1 else ''} equal {how} over {n} steps"
    report.update(verdict=verdict, exit=code, findings=[*refuse, *diverged])
    if as_json:
        click.echo(json.dumps(report, indent=2))
    else:
        lines = [f"ncclx compare --train: {' '.join(command)}"]
        for arm in report["arms"]:
            env = ", ".join(f"{k}={v}" if v is not None else f"{k} unset" for k, v in arm["env"].items())
            lines.append(f"  arm {arm['label']}: \"{arm['backend']}\"" + (f" with {env}" if env else "")
                         + f": exit {arm['returncode']}, {arm['seconds']:.1f} s")
        for item in report["metrics"]:
            lines.append(f"  {item['metric']}: " + "; ".join(
                f"{label} {len(v)} values" for label, v in item["values"].items()))
        lines.extend(f"  {t}" for t in report["findings"])
        lines.append(f"result: {verdict}")
        click.echo("\n".join(lines))
    return code
