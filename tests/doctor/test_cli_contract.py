"""The CLI contract: JSON schema, exit codes, usage errors, --list-checks, colour."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ncclx_exe, on_a_terminal

from .conftest import check, doctor, doctor_json

IDS = ["torch-version", "nccl-resolution", "legacy-toggle", "default-timeout", "nccl-version",
       "rccl-version", "fast-reconfigure", "flight-recorder", "env-vars", "compiled-extensions",
       "gpu-binding", "probe", "cluster-consistency"]
STATIC_IDS = IDS[:11]


def test_json_is_exactly_the_schema() -> None:
    report = doctor_json("--level", "static")
    rc = report.pop("_rc")
    assert list(report) == ["schema", "level", "host", "label", "rank", "torch", "backend", "summary", "checks"]
    assert report["label"] == report["host"]  # no --label, no Slurm/torchrun job: the host
    assert set(report["backend"]) == {"judged", "why"}
    assert report["schema"] == "ncclx.doctor/1"
    assert report["level"] == "static"
    assert [c["id"] for c in report["checks"]] == STATIC_IDS
    for c in report["checks"]:
        assert list(c) == ["id", "status", "message", "remedy", "details"]
        assert c["status"] in {"ok", "warn", "fail", "skip", "error"}
        assert c["message"]
    counts = {s: sum(c["status"] == s for c in report["checks"]) for s in ("ok", "warn", "fail", "skip", "error")}
    assert report["summary"] == counts
    assert rc == (1 if counts["fail"] or counts["error"] else 0)


def test_static_level_never_imports_torch() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCH_", "NCCL"))}
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "ncclx_migrate", "doctor", "--level", "static", "--json"],
        capture_output=True, text=True, env=env, timeout=60,
    )
    modules = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert "json" in modules  # the importtime listing is really there
    assert not {m for m in modules if m == "torch" or m.startswith("torch.")}
    assert "libcst" not in modules  # the codemod's engine is not paid for either
    json.loads(proc.stdout)


def test_no_gpu_is_a_warning_and_exit_0_unless_strict_or_required() -> None:
    report = doctor_json("--level", "static", "--check", "gpu-binding", env={"CUDA_VISIBLE_DEVICES": ""})
    gpu = check(report, "gpu-binding")
    assert gpu["status"] == "warn"
    assert "no GPU visible" in gpu["message"]
    assert report["_rc"] == 0
    strict = doctor("--level", "static", "--check", "gpu-binding", "--strict", env={"CUDA_VISIBLE_DEVICES": ""})
    assert strict.returncode == 1
    required = doctor_json("--level", "static", "--check", "gpu-binding", "--require-gpu",
                           env={"CUDA_VISIBLE_DEVICES": ""})
    assert check(required, "gpu-binding")["status"] == "fail"
    assert required["_rc"] == 1


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--check", "no-such-check"], "no-such-check"),
        (["--level", "galaxy"], "galaxy"),
        (["--target-torch", "two"], "two"),
        (["--timeout", "0"], "positive"),
        (["--timeout", "soon"], "soon"),
        (["--timeout", "inf"], "finite"),  # every probe and gather must stay bounded
        (["--timeout", "1e400"], "finite"),
    ],
)
def test_usage_errors_exit_2_with_one_clear_line(args: list[str], needle: str) -> None:
    proc = doctor(*args)
    assert proc.returncode == 2
    assert needle in proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""


def test_list_checks_names_every_id() -> None:
    proc = doctor("--list-checks")
    assert proc.returncode == 0
    listed = [line.split()[0] for line in proc.stdout.splitlines()]
    assert listed == IDS
    as_json = json.loads(doctor("--list-checks", "--json").stdout)
    assert [c["id"] for c in as_json] == IDS


def test_check_selects_and_higher_level_checks_say_which_level() -> None:
    report = doctor_json("--level", "static", "--check", "env-vars", "--check", "probe")
    assert [c["id"] for c in report["checks"]] == ["env-vars", "probe"]
    probe = check(report, "probe")
    assert probe["status"] == "skip"
    assert "--level probe" in probe["message"]


def test_human_output_one_line_per_check_then_a_bullet_per_problem_with_its_fix() -> None:
    proc = doctor("--level", "static", env={"TORCH_FR_BUFFER_SIZE": "0", "CUDA_VISIBLE_DEVICES": "",
                                            "COLUMNS": "100"})
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("ncclx doctor: level static")
    heads = [line for line in lines[1:-1] if re.match(r"  (ok|warn|FAIL|skip|ERROR) +[a-z-]+ ", line)]
    assert [h.split()[1] for h in heads] == STATIC_IDS
    fr = next(i for i, line in enumerate(lines) if line.split()[1:2] == ["flight-recorder"])
    assert lines[fr].split()[0] == "warn"
    assert lines[fr + 1].startswith("        - TORCH_FR_BUFFER_SIZE=0 disables the flight recorder")
    assert lines[fr + 2].strip().startswith("fix: unset TORCH_FR_BUFFER_SIZE")
    assert re.fullmatch(r"(OK|WARN|FAIL): [1-9]\d* ok(, [1-9]\d* (warn|fail|skip|error))*", lines[-1])
    assert "\x1b[" not in proc.stdout


def test_colour_only_on_a_terminal_and_never_with_no_color() -> None:
    args = ("doctor", "--level", "static", "--check", "gpu-binding")
    assert "\x1b[" in on_a_terminal(*args).terminal
    assert "\x1b[" not in on_a_terminal(*args, env={"NO_COLOR": "1"}).terminal
    assert "\x1b[" not in on_a_terminal(*args, env={"NO_COLOR": "1", "FORCE_COLOR": "1"}).terminal


def test_force_color_colours_a_pipe_and_no_color_wins(tmp_path: Path) -> None:
    # The rule migrate follows too (docs/migrate.md): one rule for every command.
    args = ("--level", "static", "--check", "gpu-binding", "--check", "env-vars")
    plain, forced, both = ({"NO_COLOR": "", "FORCE_COLOR": ""}, {"NO_COLOR": "", "FORCE_COLOR": "1"},
                           {"NO_COLOR": "1", "FORCE_COLOR": "1"})
    piped = doctor(*args, env=plain).stdout
    coloured = doctor(*args, env=forced).stdout
    assert "\x1b[" not in piped
    assert re.search(r"\x1b\[[0-9;]+m(OK|WARN|FAIL)\x1b\[0m: ", coloured), coloured  # the verdict, painted
    assert re.sub(r"\x1b\[[0-9;]*m", "", coloured) == piped  # the same text, only painted
    assert doctor(*args, env=both).stdout == piped
    # merge prints the merged report after the fact (through click): the same rule holds there
    saved = tmp_path / "node.json"
    saved.write_text(doctor("--json", *args).stdout)
    assert "\x1b[" in doctor("merge", str(saved), env=forced).stdout
    assert "\x1b[" not in doctor("merge", str(saved), env=both).stdout


def test_a_crashing_check_becomes_that_checks_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from ncclx_migrate._doctor import _facts
    from ncclx_migrate._doctor._cli import doctor as doctor_command

    def boom(self: object) -> list[object]:
        raise OSError("disk on fire")

    monkeypatch.setattr(_facts.Facts, "libraries", property(boom))
    result = CliRunner().invoke(doctor_command, ["--level", "static", "--json"])
    report = json.loads(result.output)
    nccl = check(report, "nccl-version")
    assert nccl["status"] == "error"
    assert "OSError: disk on fire" in nccl["message"]
    assert check(report, "env-vars")["status"] in ("ok", "warn")  # the others still ran
    assert result.exit_code == 1


def test_the_cli_itself_never_warns_about_the_environment_it_reports() -> None:
    # `import ncclx_migrate` warns training code about the toggle and starts the hang
    # watchdog; the ncclx command imports the package too, but reports the environment
    # instead: NCCLX_WARNINGS=error (a CI setting) must not crash it with a traceback.
    env = {"TORCH_DIST_USE_NCCL2": "0", "NCCLX_WARNINGS": "error", "NCCLX_HANG_DUMP": "abc",
           "TORCH_NCCL_BLOCKING_WAIT": "1"}
    for cmd in ([ncclx_exe()], [sys.executable, "-m", "ncclx_migrate"]):
        base = {k: v for k, v in os.environ.items() if not k.startswith(("TORCH_", "NCCL", "NCCLX_"))}
        proc = subprocess.run([*cmd, "doctor", "--level", "static", "--json", "--check", "legacy-toggle"],
                              capture_output=True, text=True, env={**base, **env, "NO_COLOR": "1"}, timeout=60)
        assert proc.stderr == "", proc.stderr
        report = json.loads(proc.stdout)
        assert report["checks"][0]["status"] == "warn"
        assert proc.returncode == 0
