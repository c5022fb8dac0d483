"""``ncclx compare --train -- CMD ...``: the user's own training run once per arm, step by step.

Each arm runs CMD with the arm's environment (its settings, and ``NCCLX_COMPARE_BACKEND`` set
to the arm's backend name for a script that reads it), bounded by what is left of
``--timeout``.  Every ``--metric`` regex is searched line by line in what CMD prints
(stdout and stderr, as the lines arrived); its first group, one per matching line, is that
metric's value at the next step, and the step is the one the line names ("step=3") where it
names one.  The sequences are compared exactly (``--rtol 0``) or within ``--rtol``; the
first step where they part is named with both values.  A command that fails is named with
its own error (``_trainlog.child_error``: under torchrun, the child's traceback, not the
launcher's summary): in one arm that is a difference (exit 1), in both no verdict (exit 2).
No verdict either without evidence: a metric found in neither output, or one that never
moved (a run that is not training), exits 2.  With ``--require-sensitivity PCT``, numbers that
agree exit 3 when the step time could not have shown a slowdown of PCT.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from typing import Any

import click

from .._doctor._probe import wait_or_kill
from ._spec import Arm
from ._trainlog import Captured, child_error, read_streams, step_name
from ._trainspeed import compare_speed, speed_text

__all__ = ["DEFAULT_METRIC", "run_train"]

DEFAULT_METRIC = r"loss[=:] *([-0-9.eE+]+)"
BACKEND_VAR = "NCCLX_COMPARE_BACKEND"


def _values(pattern: re.Pattern[str], lines: list[tuple[float, str, str]]) -> list[tuple[float, int | None, float]]:
    """(the value, the step its line names or None, when the line came), one per matching line."""
    out = []
    for at, _, line in lines:
        m = pattern.search(line)
        if m:
            try:
                out.append((float(m.group(1)), step_name(line), at))
            except (ValueError, IndexError):
                continue
    return out


def _run(arm: Arm, command: list[str], deadline: float) -> dict[str, Any]:
    env = arm.environ(dict(os.environ))
    env[BACKEND_VAR] = arm.backend
    # Lines as the steps happen (Python children of the command inherit it): the step time
    # is read from when each step's line arrives.  The same in both arms.
    env.setdefault("PYTHONUNBUFFERED", "1")
    start = time.monotonic()
    try:
        proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    except OSError as exc:
        return {"error": f"cannot start {command[0]!r}: {exc.strerror or exc}", "out": Captured(), "seconds": 0.0}
    got, readers = read_streams(proc)
    killed = bool(wait_or_kill({0: proc}, deadline))
    for t in readers:  # the group is gone (or ended): the pipes close; a daemon that kept one open is left
        t.join(timeout=5)
    return {"returncode": None if killed else proc.returncode, "killed": killed, "out": got,
            "seconds": round(time.monotonic() - start, 2)}


def _same(a: float, b: float, rtol: float) -> bool:
    return a == b if rtol == 0 else abs(a - b) <= rtol * max(abs(a), abs(b))


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def _failure(label: str, r: dict[str, Any]) -> str | None:
    """How arm ``label``'s command failed, with its own error line where stderr has one."""
    if r.get("error"):
        return f"arm {label}: {r['error']}"
    if r.get("killed"):
        how = "was still running at the --timeout deadline (killed)"
    elif r.get("returncode"):
        how = f"exited {r['returncode']}"
    else:
        return None
    error = child_error(r["out"].stderr)[1]
    return f"arm {label}: the command {how}" + (f": {error}" if error else "")


def _where(a: list[tuple[float, int | None, float]], b: list[tuple[float, int | None, float]], i: int) -> str:
    """The step as the output names it (both arms name the same one), else the value's place."""
    if a[i][1] is not None and a[i][1] == b[i][1]:
        return f"step {a[i][1]}"
    return f"its {_ordinal(i + 1)} value (the lines name no step)"


def run_train(command: list[str], arms: list[Arm], steps: int | None, metrics: list[str], rtol: float,
              timeout: float, as_json: bool, threshold: float = 0.05, require: float | None = None) -> int:
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
    for n, arm in enumerate(arms):
        left = end - time.monotonic()
        runs.append(_run(arm, command, time.monotonic() + (left / 2 if n < len(arms) - 1 else left)))
    report: dict[str, Any] = {
        "schema": "ncclx.compare-train/1", "command": command, "steps": steps, "rtol": rtol,
        "threshold": threshold, "require_sensitivity": require,
        "arms": [], "metrics": [],
    }
    failed: list[str] = []
    for a, r in zip(arms, runs, strict=True):
        own, error = child_error(r["out"].stderr)
        failure = _failure(a.label, r)
        if failure:
            failed.append(failure)
        report["arms"].append({
            "label": a.label, "spec": a.spec, "backend": a.backend, "env": a.env,
            "returncode": r.get("returncode"), "killed": r.get("killed", False), "seconds": r["seconds"],
            "error": r.get("error"), "failed": failure is not None, "failure": error,
            "tail": r["out"].text.strip().splitlines()[-5:], "stderr_tail": own})
    refuse: list[str] = []
    diverged: list[str] = []
    if failed and len(failed) == len(runs):
        refuse.append(f"the training command failed in {'both arms' if len(runs) == 2 else 'every arm'}: "
                      + "; ".join(failed))
    else:
        diverged.extend(failed)
    arrivals: list[list[tuple[int | None, float]]] = []
    for pattern in patterns:
        seqs = [_values(pattern, r["out"].lines) for r in runs]
        seqs = [s[:steps] if steps else s for s in seqs]
        if not arrivals:  # the first metric's lines mark the steps for the step time
            arrivals = [[(n, at) for _, n, at in s] for s in seqs]
        item: dict[str, Any] = {"metric": pattern.pattern,
                                "values": {a.label: [v for v, _, _ in s] for a, s in zip(arms, seqs, strict=True)},
                                "steps": {a.label: [n for _, n, _ in s] for a, s in zip(arms, seqs, strict=True)}}
        report["metrics"].append(item)
        a_seq, b_seq = seqs[0], seqs[-1]
        if not a_seq or not b_seq:
            if failed:  # the failure is the finding: the metric is missing because the command stopped
                continue
            missing = [a.label for a, s in zip(arms, seqs, strict=True) if not s]
            refuse.append(f"metric {pattern.pattern!r} not found in the output of arm{'s' if len(missing) > 1 else ''} "
                          f"{' and '.join(missing)}: check --metric against what the command prints")
            continue
        a_vals, b_vals = [v for v, _, _ in a_seq], [v for v, _, _ in b_seq]
        if len(set(a_vals)) == 1 and len(set(b_vals)) == 1 and not failed:
            refuse.append(f"metric {pattern.pattern!r} never moved ({a_vals[0]!r} at every step in both arms): "
                          "a run that is not training proves nothing")
            continue
        first = next((i for i, (x, y) in enumerate(zip(a_vals, b_vals, strict=False)) if not _same(x, y, rtol)), None)
        if first is not None:
            x, y = a_vals[first], b_vals[first]
            rel = abs(x - y) / max(abs(x), abs(y)) if max(abs(x), abs(y)) else 0.0
            named = a_seq[first][1] if a_seq[first][1] is not None and a_seq[first][1] == b_seq[first][1] else None
            item["first_divergent_step"] = named if named is not None else first + 1
            item["first_divergent_value"] = first + 1
            diverged.append(f"metric {pattern.pattern!r} diverges at {_where(a_seq, b_seq, first)}: {arms[-1].label} "
                            f"{y!r} against {arms[0].label} {x!r} (off by {abs(x - y):.3g}, relative {rel:.3g})")
        elif failed:
            pass  # fewer steps in a failed arm is the failure itself
        elif steps and (len(a_seq) < steps or len(b_seq) < steps):
            short = [f"{a.label} {len(s)}" for a, s in zip(arms, seqs, strict=True) if len(s) < steps]
            diverged.append(f"metric {pattern.pattern!r}: fewer steps than --steps {steps} ({', '.join(short)})")
        elif len(a_seq) != len(b_seq):
            diverged.append(f"metric {pattern.pattern!r}: arm A printed {len(a_seq)} steps, arm B {len(b_seq)}")
        item["compared_steps"] = min(len(a_seq), len(b_seq))
    labels = [a.label for a in arms]
    if not failed:
        report["speed"] = compare_speed([r["out"].lines for r in runs], arrivals, threshold, labels)
    if refuse:
        code, verdict = 2, "no verdict: " + refuse[0]
    elif diverged:
        code, verdict = 1, "the arms diverge: " + diverged[0]
    else:
        n = min(item["compared_steps"] for item in report["metrics"])
        how = "exactly" if rtol == 0 else f"within rtol {rtol:g}"
        agreed = f"{len(patterns)} metric{'s' if len(patterns) > 1 else ''} equal {how} over {n} steps"
        code, verdict = 0, f"the arms agree: {agreed}"
        speed = report["speed"]
        if speed["decision"] == "slower":
            low, high = speed["interval"]
            code, verdict = 1, (f"{verdict}, but {labels[-1]} is slower: {speed['measure']} {labels[-1]}/{labels[0]} "
                                f"{speed['ratio']:.3f} (95% interval {low:.3f} to {high:.3f}) beyond the "
                                f"{threshold:.0%} threshold")
        elif require is not None and (speed["detectable"] is None or speed["detectable"] > require):
            # As the collectives' gate: equal numbers, but the step time too noisy (or too few
            # steps) to have shown a slowdown of REQUIRE.
            seen = (f"could not detect a step-time slowdown smaller than {speed['detectable']:.0%} here"
                    if speed["detectable"] is not None else
                    f"{speed['pairs']} paired steps are too few to detect a step-time slowdown of any size "
                    "(run more steps)")
            code, verdict = 3, f"not sensitive enough for --require-sensitivity {require:.0%}: {seen} ({agreed})"
    report.update(verdict=verdict, exit=code, findings=[*refuse, *diverged])
    click.echo(json.dumps(report, indent=2) if as_json else _text(report, command))
    return code


def _text(report: dict[str, Any], command: list[str]) -> str:
    lines = [f"ncclx compare --train: {' '.join(command)}"]
    for arm in report["arms"]:
        env = ", ".join(f"{k}={v}" if v is not None else f"{k} unset" for k, v in arm["env"].items())
        lines.append(f"  arm {arm['label']}: \"{arm['backend']}\"" + (f" with {env}" if env else "")
                     + f": exit {arm['returncode']}, {arm['seconds']:.1f} s")
        if arm["failed"] and arm["stderr_tail"]:
            lines.append("    its stderr ends:")
            lines.extend(f"    | {t}" for t in arm["stderr_tail"][-6:])
    for item in report["metrics"]:
        lines.append(f"  {item['metric']}: " + "; ".join(
            f"{label} {len(v)} values" for label, v in item["values"].items()))
    if "speed" in report:
        lines.append("  " + speed_text(report["speed"], [a["label"] for a in report["arms"]]))
    lines.extend(f"  {t}" for t in report["findings"] if not report["verdict"].endswith(t))
    lines.append(f"result: {report['verdict']}")
    return "\n".join(lines)
