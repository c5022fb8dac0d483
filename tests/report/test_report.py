"""``ncclx report``: real migrate and doctor reports in, the roll-up out (text, JSON)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from ncclx_migrate._codeowners import Owners, parse
from tests.conftest import run_ncclx

from .conftest import git, migrate_json, write_repo


def report(*args: str, cwd: Path | None = None) -> tuple[int, dict[str, Any] | str, str]:
    proc = run_ncclx("report", *args, cwd=cwd)
    assert "Traceback" not in proc.stderr, proc.stderr
    out: dict[str, Any] | str = json.loads(proc.stdout) if "--format" in args and proc.stdout else proc.stdout
    return proc.returncode, out, proc.stderr


def test_migrate_json_names_its_repository(fleet: tuple[Path, dict[str, Any]]) -> None:
    folder, facts = fleet
    project = json.loads((folder / "reports" / "repos" / "alpha.json").read_text())["project"]
    assert project["name"] == "alpha"
    assert project["remote"] == "https://git.example.invalid/org/alpha.git"  # the token is not carried
    assert project["commit"] == facts["alpha_commit"]
    assert project["target_torch"] == "2.15" and project["base"] == "."
    assert project["codeowners"]["path"] == ".github/CODEOWNERS"
    assert project["codeowners"]["rules"][-2:] == [["/train/", ["@org/train"]], ["/train/legacy/", []]]
    beta = json.loads((folder / "reports" / "repos" / "beta.json").read_text())["project"]
    assert (beta["remote"], beta["codeowners"]) == (None, None)


def test_doctor_json_carries_a_job_label(fleet: tuple[Path, dict[str, Any]]) -> None:
    folder, _ = fleet
    legacy = json.loads((folder / "reports" / "jobs" / "legacy.json").read_text())
    assert legacy["label"] == f"{legacy['host']}/slurm-4243"
    assert json.loads((folder / "reports" / "jobs" / "plain.json").read_text())["label"] == "pretrain-b"
    merged = json.loads((folder / "merged.json").read_text())
    assert merged["label"] == "two-nodes" and merged["level"] == "merge"


def test_mixed_inputs_roll_up(fleet: tuple[Path, dict[str, Any]]) -> None:
    folder, _ = fleet
    rc, doc, err = report(str(folder / "reports"), str(folder / "merged.json"), "--format", "json")
    assert rc == 0 and err == "", err
    assert isinstance(doc, dict) and doc["schema"] == "ncclx.report/1"
    t = doc["totals"]
    assert (t["repositories"], t["jobs"], t["findings"]) == (2, 3, 7)
    assert t["severity"] == {"break": 3, "maybe a break": 0, "hardening": 0, "deprecated": 4}
    alpha, beta = doc["repositories"]  # the worst first
    assert alpha["name"] == "alpha" and alpha["toggles"] == 2 and alpha["write"] == 4 and alpha["unsafe"] == 2
    assert not alpha["one_write_away"]
    assert beta["name"] == "beta" and beta["findings"] == beta["write"] == 1 and beta["one_write_away"]
    assert doc["one_write_away"] == ["beta"]
    jobs = {j["label"]: j for j in doc["jobs"]}
    legacy = next(j for label, j in jobs.items() if label.endswith("/slurm-4243"))
    assert legacy["legacy"] and legacy["builds"] == ["nccl-legacy"] and legacy["toggle"] == ["0"]
    assert jobs["pretrain-b"]["builds"] == ["nccl2"] and not jobs["pretrain-b"]["legacy"]
    # A merged report: the facts every node shares and those that differ, from cluster-consistency.
    assert jobs["two-nodes"]["builds"] == ["nccl-legacy", "nccl2"] and jobs["two-nodes"]["legacy"]
    assert sorted(doc["rollback"]["jobs_legacy"]) == sorted(["two-nodes", legacy["label"]])
    assert doc["rollback"]["repositories_with_toggles"] == ["alpha"]
    rc, text, _ = report(str(folder / "reports"), str(folder / "merged.json"))
    assert isinstance(text, str)
    assert text.splitlines()[:3] == [
        "ncclx report: 2 repositories (7 open findings), 3 jobs",
        "  break 3, maybe a break 0, hardening 0, deprecated 4",
        "  fixable: 5 with --write, 2 more with --unsafe-fixes; 0 C++ findings",
    ]
    assert "  2 rollback toggles still set in 1 repository: alpha" in text
    assert "  2 jobs still build legacy NCCL: " in text
    assert "  one `ncclx migrate --write` from clean: 1 repository (beta)" in text


def test_codeowners_routes_each_finding(fleet: tuple[Path, dict[str, Any]]) -> None:
    folder, _ = fleet
    _, doc, _ = report(str(folder / "reports" / "repos"), "--format", "json")
    assert isinstance(doc, dict)
    owners = {o["owner"]: {(f["repository"], f["path"]): f["findings"] for f in o["files"]} for o in doc["owners"]}
    assert owners == {
        "@org/train": {("alpha", "train/run.py"): 3},
        "@org/ops": {("alpha", "launch.sh"): 2},
        "(no owner)": {("alpha", "train/legacy/tool.py"): 1},  # /train/legacy/ has no owners: the last rule wins
        "(no CODEOWNERS)": {("beta", "job.py"): 1},
    }
    train = next(o for o in doc["owners"] if o["owner"] == "@org/train")
    assert train["by_repository"] == [{"repository": "alpha", "findings": 3, "break": 2, "toggles": 1}]


def test_codeowners_routing_from_outside_the_repository(fleet: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    """Run from the folder above (paths "alpha/train/run.py") or given absolute paths: the same owners."""
    folder, _ = fleet
    for name, args in (("above", ["alpha"]), ("absolute", [str(folder / "repos" / "alpha" / "train")])):
        proc = run_ncclx("migrate", "--format", "json", *args, cwd=folder / "repos")
        (tmp_path / f"{name}.json").write_text(proc.stdout)
        rc, doc, err = report(str(tmp_path / f"{name}.json"), "--format", "json")
        assert rc == 0 and isinstance(doc, dict), err
        owners = {o["owner"]: [(f["repository"], f["path"]) for f in o["files"]] for o in doc["owners"]}
        assert owners["@org/train"] == [("alpha", "train/run.py")], owners


def test_codeowners_patterns_as_github_documents_them() -> None:
    """The examples of GitHub's "About code owners" page."""
    owners = Owners(parse("""\
*       @global
*.js    @js-owner #This is an inline comment.
*.go docs@example.com
/build/logs/ @doctocat
docs/*  docs@example.com
apps/ @octocat
/docs/ @doctocat
**/logs @logs
/apps/ @octocat2
/apps/github
"""))
    assert owners("README.md") == ("@global",)
    assert owners("src/app.js") == ("@js-owner",)
    assert owners("main.go") == ("docs@example.com",)
    assert owners("build/logs/x/y.txt") == ("@logs",)  # **/logs comes later and matches too
    assert owners("docs/getting-started.md") == ("@doctocat",)
    assert owners("docs/build-app/troubleshooting.md") == ("@doctocat",)
    docs = Owners(parse("* @global\ndocs/* docs@example.com\n"))
    assert docs("docs/getting-started.md") == ("docs@example.com",)
    assert docs("docs/build-app/troubleshooting.md") == ("@global",)  # docs/*: not nested files
    assert docs("src/docs/getting-started.md") == ("@global",)  # a slash inside anchors it at the root
    assert owners("x/apps/y.py") == ("@octocat",)
    assert owners("deeply/nested/logs/a.log") == ("@logs",)
    assert owners("apps/main.py") == ("@octocat2",)
    assert owners("apps/github/main.py") == ()
    assert Owners(parse("/Docs/ @a\n"))("docs/x") == ()  # case-sensitive


def test_trend_across_two_rollups(fleet: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    folder, _ = fleet
    alpha = tmp_path / "alpha"
    shutil.copytree(folder / "repos" / "alpha", alpha, symlinks=True)
    reports = tmp_path / "reports"
    shutil.copytree(folder / "reports", reports)
    rc, first, _ = report(str(reports), "--format", "json")
    assert rc == 0 and isinstance(first, dict)
    (tmp_path / "first.json").write_text(json.dumps(first))
    # Fixed: the launch script's toggle.  New: a second rollback in the tool.  Moved: run.py's
    # findings (three lines down), which stay the same findings.
    launch = (alpha / "launch.sh").read_text().replace("export TORCH_DIST_USE_NCCL2=0\n", "")
    write_repo(alpha, {"launch.sh": launch, "train/run.py": "# a\n# b\n# c\n" + (alpha / "train/run.py").read_text(),
                       "train/legacy/tool.py": (alpha / "train/legacy/tool.py").read_text()
                       + 'os.environ["TORCH_DIST_USE_NCCL2"] = "0"\n'}, None)
    migrate_json(alpha, reports / "repos" / "alpha.json")
    rc, second, _ = report(str(reports), "--previous", str(tmp_path / "first.json"), "--format", "json")
    assert rc == 0 and isinstance(second, dict)
    trend = second["trend"]
    assert (trend["fixed"], trend["new"], trend["findings_before"]) == (1, 1, 7)
    assert trend["previous"] == first["generated"]
    by_name = {r["name"]: r["trend"] for r in second["repositories"]}
    assert by_name == {"alpha": {"fixed": 1, "new": 1}, "beta": {"fixed": 0, "new": 0}}
    assert [h["findings"] for h in second["history"]] == [7, 7]
    rc, text, _ = report(str(reports), "--previous", str(tmp_path / "first.json"))
    assert f"Trend since {first['generated']}: 1 fixed, 1 new (open: 7 -> 7)" in str(text)
    assert git(alpha, "status", "--porcelain") == ""


def test_bad_inputs_are_one_line_each(fleet: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    folder, _ = fleet
    good = (folder / "reports" / "repos" / "beta.json").read_text()
    bad = {
        "cut.json": good[: len(good) // 2],
        "foreign.json": '{"name": "package.json", "version": "1.0.0"}',
        "list.json": "[1, 2]",
        "empty.json": "",
        "binary.json": "\x00\x01\xff",
        "sarif.json": json.dumps({"version": "2.1.0", "runs": []}),
        "wrong.json": json.dumps({"schema": "ncclx.migrate/1", "findings": {"a": 1}}),
        "badjob.json": json.dumps({"schema": "ncclx.doctor/1", "level": "local", "host": "h", "checks": "x"}),
    }
    for name, text in bad.items():
        (tmp_path / name).write_text(text, errors="surrogateescape")
    (tmp_path / "rollup.json").write_text(json.dumps({"schema": "ncclx.report/1"}))
    (tmp_path / "beta.json").write_text(good)
    rc, out, err = report(str(tmp_path / "*.json"), str(tmp_path / "missing.json"))
    assert rc == 0 and "ncclx report: 1 repository (1 open finding), 0 jobs" in str(out)
    lines = err.splitlines()
    assert len(lines) == len(bad) + 2
    by_file = {line.split(": ")[1].removeprefix("skipped ").rpartition("/")[2]: line for line in lines}
    assert "not JSON, or cut short" in by_file["cut.json"]
    assert "schema missing" in by_file["foreign.json"]
    assert "a JSON list" in by_file["list.json"]
    assert "pass it with --previous" in by_file["rollup.json"]
    assert "a SARIF file" in by_file["sarif.json"]
    assert '"findings" and "errors" must be lists' in by_file["wrong.json"]
    assert '"checks" is' in by_file["badjob.json"]
    assert "no such file or folder" in by_file["missing.json"]
    rc, _, err = report(str(tmp_path / "cut.json"))
    assert rc == 2 and err.splitlines()[-1].startswith("ncclx report: error: no input is an ncclx")
    rc, _, err = report(str(tmp_path / "beta.json"), "--previous", str(tmp_path / "cut.json"))
    assert rc == 2 and err.splitlines() == [
        f"ncclx report: error: --previous {tmp_path / 'cut.json'}: not JSON, or cut short; "
        "save roll-ups with ncclx report --format json > FILE"]


def test_many_inputs_over_worker_processes_add_up_the_same(fleet: tuple[Path, dict[str, Any]],
                                                          tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past 64 inputs the reports are read by worker processes: the same roll-up, in input order."""
    from ncclx_migrate._report import _work
    from ncclx_migrate._report._jobs import Job
    from ncclx_migrate._report._rollup import Rollup

    folder, _ = fleet
    beta = json.loads((folder / "reports" / "repos" / "beta.json").read_text())
    for i in range(70):
        beta["project"]["name"] = f"beta-{i:02d}"
        beta["project"]["directory"] = f"/ci/beta-{i:02d}"
        (tmp_path / f"beta-{i:02d}.json").write_text(json.dumps(beta))
    (tmp_path / "beta-33x.json").write_text("{")
    rc, doc, err = report(str(tmp_path), "--format", "json")
    assert rc == 0 and isinstance(doc, dict)
    assert err.splitlines() == [f"ncclx report: skipped {tmp_path / 'beta-33x.json'}: not JSON, or cut short "
                                "(Expecting property name enclosed in double quotes at line 1)"]
    monkeypatch.setattr(_work, "_workers", lambda files: 1)
    rollup = Rollup()
    for item in _work.summaries((str(tmp_path),)):  # in this process, one report after the other
        if isinstance(item, Job):
            rollup.add_job(item)
        elif not isinstance(item, _work.Skip):
            rollup.add_repo(item)
    alone = rollup.to_json()
    assert doc["repositories"] == alone["repositories"] and doc["owners"] == alone["owners"]
    assert doc["totals"]["findings"] == 70


def test_a_page_that_cannot_be_written_is_one_line(fleet: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    folder, _ = fleet
    page = tmp_path / "missing" / "fleet.html"
    rc, _, err = report(str(folder / "reports" / "repos"), "--html", str(page))
    assert rc == 2 and err.splitlines() == [
        f"ncclx report: error: {page}: cannot write the page there (No such file or directory)"]


def test_every_rule_has_a_severity() -> None:
    """A new rule chooses its severity (an unknown code in a newer report counts as "maybe a break")."""
    from ncclx_migrate._migrate._rule_table import _SEVERITY, RULES, SEVERITIES, severity

    assert {r.code for r in RULES} <= set(_SEVERITY) and set(_SEVERITY.values()) <= set(SEVERITIES)
    assert severity("NCX134", "nccl2 ignores the GPU picked on line 4: pass device_id= (a break)") == "break"
    assert severity("NCX104", '"nccl2" does not exist on torch 2.13 (--target-torch): use "nccl"') == "break"
    assert severity("NCX104", '"nccl2" is what "nccl" builds from torch 2.15 on: spell it "nccl"') == "deprecated"
    assert severity("NCX999", "from a newer ncclx") == "maybe a break"


def test_job_labels_from_the_launcher_and_merge(fleet: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    from ncclx_migrate._doctor._facts import job_label

    assert job_label({"SLURM_JOB_ID": "42"}, "n1") == "n1/slurm-42"
    assert job_label({"SLURM_JOB_ID": "43", "SLURM_ARRAY_JOB_ID": "40", "SLURM_ARRAY_TASK_ID": "3"}, "n1") == \
        "n1/slurm-40_3"
    assert job_label({"TORCHELASTIC_RUN_ID": "none"}, "n1") == "n1"  # torchrun without --rdzv-id
    assert job_label({"TORCHELASTIC_RUN_ID": "run7"}, "n1") == "n1/torchrun-run7"
    folder, _ = fleet
    legacy = json.loads((folder / "reports" / "jobs" / "legacy.json").read_text())
    paths = []
    for host in ("node-a", "node-b"):
        paths.append(tmp_path / f"{host}.json")
        paths[-1].write_text(json.dumps(dict(legacy, host=host, label=f"{host}/slurm-4243")))
    merged = run_ncclx("doctor", "merge", *map(str, paths), "--format", "json")
    assert json.loads(merged.stdout)["label"] == "slurm-4243"  # the nodes' common job
