"""`ncclx migrate --baseline FILE` / `--update-baseline`: the ratchet, and `--format gitlab`.

In-process (click's runner) on small trees: a run costs a few tens of milliseconds."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from pathlib import Path

from click.testing import CliRunner, Result

from ncclx_migrate._migrate._cli import migrate

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "tests" / "fixtures" / "files" / "notebook" / "basic.in.ipynb"
CPP = ROOT / "tests" / "fixtures" / "files" / "cpp" / "backend_name.in.cpp"

TOGGLE = 'os.environ["TORCH_DIST_USE_NCCL2"] = "0"\n'
TRAIN = "import os\n\n" + TOGGLE + 'os.environ["TORCH_NCCL_TRACE_CPP_STACK"] = "1"\n'
LAUNCH = "#!/bin/bash\nexport TORCH_DIST_USE_NCCL2=0\ntorchrun train.py\n"


def ncclx(cwd: Path, *args: str, env: dict[str, str] | None = None) -> Result:
    base: dict[str, str | None] = {k: None for k in os.environ if k.startswith(("TORCH_", "NCCL", "CI_"))}
    base.update({"NO_COLOR": "1", **(env or {})})
    with contextlib.chdir(cwd):
        return CliRunner(env=base).invoke(migrate, list(args), catch_exceptions=False)


def project(tmp_path: Path) -> Path:
    """Python, shell, a notebook and C++: a finding of each kind."""
    (tmp_path / "train.py").write_text(TRAIN)
    (tmp_path / "launch.sh").write_text(LAUNCH)
    shutil.copy(NOTEBOOK, tmp_path / "nb.ipynb")
    (tmp_path / "csrc").mkdir()
    shutil.copy(CPP, tmp_path / "csrc" / "comm.cpp")
    return tmp_path


def states(cwd: Path, *args: str) -> dict[tuple[str, str, str], int]:
    """(path, code, state) -> count, from the JSON report."""
    doc = json.loads(ncclx(cwd, "--format", "json", "--baseline", "bl.json", *args).stdout)
    out: dict[tuple[str, str, str], int] = {}
    for f in doc["findings"]:
        key = (f["path"], f["code"], f["baseline_state"])
        out[key] = out.get(key, 0) + 1
    for e in doc["baseline"]["absent"]:
        out[(e["path"], e["code"], "absent")] = out.get((e["path"], e["code"], "absent"), 0) + 1
    return out


def test_update_writes_a_sorted_line_per_finding_and_then_nothing_fails(tmp_path: Path) -> None:
    project(tmp_path)
    first = ncclx(tmp_path, "--baseline", "bl.json")
    assert first.exit_code == 2 and "bl.json: no such baseline" in first.stderr and first.stdout == ""
    wrote = ncclx(tmp_path, "--baseline", "bl.json", "--update-baseline")
    assert wrote.exit_code == 0, wrote.output
    text = (tmp_path / "bl.json").read_text()
    doc = json.loads(text)
    entries = doc["findings"]
    assert doc["schema"] == "ncclx.baseline/1"
    assert len(text.splitlines()) == len(entries) + 5  # one line per entry, and the frame
    assert entries == sorted(entries, key=lambda e: (e["path"], e["code"], e["source"], e["fingerprint"]))
    kinds = {e["path"] for e in entries}
    assert kinds == {"train.py", "launch.sh", "nb.ipynb", "csrc/comm.cpp"}
    # A notebook entry names the cell's line, not the .ipynb JSON around it.
    assert {"path": "nb.ipynb", "code": "NCX101", "source": 'os.environ["TORCH_DIST_USE_NCCL2"] = "0"',
            "fingerprint": next(e["fingerprint"] for e in entries if e["path"] == "nb.ipynb"
                                and e["code"] == "NCX101")} in entries
    assert f"Wrote bl.json: {len(entries)} findings added, 0 kept, 0 fixed and dropped." in wrote.stdout
    again = ncclx(tmp_path, "--baseline", "bl.json")
    assert again.exit_code == 0, again.output
    assert again.stdout == (f"No new findings in 4 files.\n{len(entries)} findings in the baseline (bl.json) "
                            "not shown.\n")
    # Refreshing an unchanged tree leaves the file byte for byte.
    assert ncclx(tmp_path, "--baseline", "bl.json", "--update-baseline").exit_code == 0
    assert (tmp_path / "bl.json").read_text() == text


def test_line_moves_and_unrelated_edits_in_every_kind_stay_baselined(tmp_path: Path) -> None:
    project(tmp_path)
    assert ncclx(tmp_path, "--baseline", "bl.json", "--update-baseline").exit_code == 0
    (tmp_path / "train.py").write_text('"""Docs."""\n\n\n' + TRAIN.replace("import os\n", "import os\nimport sys\n")
                                       + "print(sys.argv)\n")
    (tmp_path / "launch.sh").write_text(LAUNCH.replace("#!/bin/bash\n", "#!/bin/bash\nset -e\n\n"))
    nb = json.loads(NOTEBOOK.read_text())
    nb["cells"].insert(0, {"cell_type": "code", "execution_count": None, "id": "new", "metadata": {},
                           "outputs": [], "source": ["print('first')\n"]})
    (tmp_path / "nb.ipynb").write_text(json.dumps(nb, indent=2))  # re-indented too
    cpp = CPP.read_text()
    (tmp_path / "csrc" / "comm.cpp").write_text("// moved down\n\n" + cpp.replace("  return backend->", "    return  backend->"))
    got = ncclx(tmp_path, "--baseline", "bl.json")
    assert got.exit_code == 0, got.output
    assert got.stdout.startswith("No new findings in 4 files.\n")
    assert all(state == "unchanged" for _, _, state in states(tmp_path))


def test_a_second_identical_finding_is_new(tmp_path: Path) -> None:
    project(tmp_path)
    assert ncclx(tmp_path, "--baseline", "bl.json", "--update-baseline").exit_code == 0
    (tmp_path / "train.py").write_text(TRAIN + "\n" + TOGGLE)
    got = ncclx(tmp_path, "--baseline", "bl.json")
    assert got.exit_code == 1
    assert got.stdout.splitlines()[0] == "train.py:6:1: NCX101 TORCH_DIST_USE_NCCL2=0 rolls back to legacy: " \
                                         "remove it once on nccl2"
    assert "Found 1 new finding in 4 files." in got.stdout
    assert states(tmp_path)[("train.py", "NCX101", "new")] == 1
    assert states(tmp_path)[("train.py", "NCX101", "unchanged")] == 1


def test_a_fixed_entry_is_reported_never_fails_and_update_drops_one_line(tmp_path: Path) -> None:
    project(tmp_path)
    assert ncclx(tmp_path, "--baseline", "bl.json", "--update-baseline").exit_code == 0
    before = (tmp_path / "bl.json").read_text().splitlines()
    (tmp_path / "launch.sh").write_text("#!/bin/bash\ntorchrun train.py\n")
    got = ncclx(tmp_path, "--baseline", "bl.json")
    assert got.exit_code == 0, got.output
    assert "launch.sh: NCX201 [baseline: fixed] export TORCH_DIST_USE_NCCL2=0\n" in got.stdout
    assert "1 of its entries fixed: --update-baseline drops them." in got.stdout
    assert ncclx(tmp_path, "--baseline", "bl.json", "--update-baseline").exit_code == 0
    after = (tmp_path / "bl.json").read_text().splitlines()
    assert [ln for ln in before if ln not in after] == [ln for ln in before if '"launch.sh"' in ln]
    assert all(ln in before for ln in after[:-3]) and len(after) == len(before) - 1


def test_a_renamed_file_has_new_findings_and_its_old_entries_are_fixed(tmp_path: Path) -> None:
    project(tmp_path)
    assert ncclx(tmp_path, "--baseline", "bl.json", "--update-baseline").exit_code == 0
    (tmp_path / "train.py").rename(tmp_path / "main.py")
    got = states(tmp_path)
    assert got[("main.py", "NCX101", "new")] == 1 and got[("train.py", "NCX101", "absent")] == 1
    assert ncclx(tmp_path, "--baseline", "bl.json").exit_code == 1


def test_select_and_ignore_neither_fix_nor_drop_other_rules(tmp_path: Path) -> None:
    project(tmp_path)
    assert ncclx(tmp_path, "--baseline", "bl.json", "--update-baseline").exit_code == 0
    text = (tmp_path / "bl.json").read_text()
    for args in (["--select", "NCX2"], ["--ignore", "NCX1,NCX3"]):
        got = states(tmp_path, *args)
        assert got and all(code.startswith("NCX2") and state == "unchanged" for _, code, state in got)
        assert ncclx(tmp_path, "--baseline", "bl.json", *args).exit_code == 0
        assert ncclx(tmp_path, "--baseline", "bl.json", "--update-baseline", *args).exit_code == 0
        assert (tmp_path / "bl.json").read_text() == text  # the NCX1xx/NCX3xx entries are kept
    (tmp_path / "launch.sh").write_text(LAUNCH + "export TORCH_NCCL_ENABLE_MONITORING=1\n")
    got = ncclx(tmp_path, "--baseline", "bl.json", "--select", "NCX2")
    assert got.exit_code == 1 and got.stdout.startswith("launch.sh:4:8: NCX20")


def test_sarif_and_json_carry_fingerprints_and_states(tmp_path: Path) -> None:
    project(tmp_path)
    plain = json.loads(ncclx(tmp_path, "--format", "sarif").stdout)["runs"][0]["results"]
    assert all(set(r["partialFingerprints"]) == {"ncclxFingerprint/v1"} and "baselineState" not in r for r in plain)
    assert len({r["partialFingerprints"]["ncclxFingerprint/v1"] for r in plain}) == len(plain)
    assert "fingerprint" not in json.loads(ncclx(tmp_path, "--format", "json").stdout)["findings"][0]
    assert ncclx(tmp_path, "--baseline", "bl.json", "--update-baseline").exit_code == 0
    (tmp_path / "train.py").write_text(TRAIN.replace('os.environ["TORCH_NCCL_TRACE_CPP_STACK"] = "1"\n', "")
                                       + 'os.environ["TORCH_NCCL_ENABLE_MONITORING"] = "1"\n')
    proc = ncclx(tmp_path, "--format", "sarif", "--baseline", "bl.json")
    assert proc.exit_code == 1
    results = json.loads(proc.stdout)["runs"][0]["results"]
    by_state: dict[str, list[dict[str, object]]] = {}
    for r in results:
        by_state.setdefault(str(r["baselineState"]), []).append(r)
    assert [r["ruleId"] for r in by_state["new"]] == ["NCX122"]
    assert [r["ruleId"] for r in by_state["absent"]] == ["NCX120"]
    assert by_state["absent"][0]["kind"] == "pass" and by_state["absent"][0]["level"] == "none"
    assert len(by_state["unchanged"]) == len(plain) - 1
    # The same fingerprints as without a baseline (run from the baseline's folder).
    assert {r["partialFingerprints"]["ncclxFingerprint/v1"] for r in by_state["unchanged"]} < \
        {r["partialFingerprints"]["ncclxFingerprint/v1"] for r in plain}
    doc = json.loads(ncclx(tmp_path, "--format", "json", "--baseline", "bl.json").stdout)
    assert doc["baseline"]["new"] == 1 and doc["baseline"]["unchanged"] == len(plain) - 1
    assert [(e["path"], e["code"]) for e in doc["baseline"]["absent"]] == [("train.py", "NCX120")]
    assert {f["baseline_state"] for f in doc["findings"]} == {"new", "unchanged"}
    gh = ncclx(tmp_path, "--format", "github", "--baseline", "bl.json").stdout
    assert gh.count("::warning") == 1 and "NCX122" in gh


def test_a_pre_commit_run_on_some_files_leaves_the_rest_of_the_baseline(tmp_path: Path) -> None:
    project(tmp_path)
    assert ncclx(tmp_path, "--baseline", "bl.json", "--update-baseline").exit_code == 0
    text = (tmp_path / "bl.json").read_text()
    (tmp_path / "launch.sh").write_text("#!/bin/bash\ntorchrun train.py\n")
    (tmp_path / "README").write_text("Train with launch.sh.\n")
    # pre-commit passes the changed files (and any text file: --ignore-unknown)
    hook = ["--ignore-unknown", "--baseline", "bl.json", "train.py", "README"]
    got = ncclx(tmp_path, *hook)
    assert got.exit_code == 0 and "fixed" not in got.stdout, got.output
    assert ncclx(tmp_path, *hook, "--update-baseline").exit_code == 0
    assert (tmp_path / "bl.json").read_text() == text
    got = ncclx(tmp_path, "--baseline", "bl.json", "launch.sh")
    assert got.exit_code == 0 and "launch.sh: NCX201 [baseline: fixed]" in got.stdout
    # The fixing hook: --write fixes what is safe, and the findings left are compared.
    (tmp_path / "train.py").write_text(TRAIN + 'os.environ["TORCH_NCCL_TRACE_BUFFER_SIZE"] = "20"\n')
    fix = ncclx(tmp_path, "--write", "--baseline", "bl.json", "train.py")
    assert fix.exit_code == 0, fix.output
    assert "TORCH_FR_BUFFER_SIZE" in (tmp_path / "train.py").read_text()


def test_bad_baselines_and_flags_are_one_line_errors(tmp_path: Path) -> None:
    project(tmp_path)
    (tmp_path / "bl.json").write_text("{not json")
    for args in ([], ["--update-baseline"]):
        got = ncclx(tmp_path, "--baseline", "bl.json", *args)
        assert got.exit_code == 2 and got.stdout == ""
        assert got.stderr.startswith("ncclx migrate: error: bl.json: not a baseline (invalid JSON")
        assert len(got.stderr.splitlines()) == 1
    assert (tmp_path / "bl.json").read_text() == "{not json"  # never overwritten
    (tmp_path / "bl.json").write_text('{"schema": "ncclx.migrate/1", "findings": []}')
    assert "not an ncclx.baseline/1 baseline" in ncclx(tmp_path, "--baseline", "bl.json").stderr
    assert ncclx(tmp_path, "--update-baseline").exit_code == 2
    assert ncclx(tmp_path, "--diff", "--baseline", "x.json", "--update-baseline").exit_code == 2


def test_update_baseline_onto_another_file_advises_another_file(tmp_path: Path) -> None:
    """It refuses to overwrite requirements.txt, so it must not advise --update-baseline on it."""
    project(tmp_path)
    (tmp_path / "requirements.txt").write_text("torch==2.15\n")
    got = ncclx(tmp_path, "--baseline", "requirements.txt", "--update-baseline")
    assert got.exit_code == 2 and (tmp_path / "requirements.txt").read_text() == "torch==2.15\n"
    assert got.stderr.startswith("ncclx migrate: error: requirements.txt: not a baseline (invalid JSON")
    assert got.stderr.rstrip().endswith("; choose another file for --baseline (--update-baseline creates it), "
                                        "or delete this one if it was a baseline")


def test_gitlab_code_quality_as_ruff_writes_it(tmp_path: Path) -> None:
    project(tmp_path)
    (tmp_path / "sub").mkdir()
    proc = ncclx(tmp_path / "sub", "--format", "gitlab", "..", env={"CI_PROJECT_DIR": str(tmp_path)})
    assert proc.exit_code == 1
    issues = json.loads(proc.stdout)
    sarif = json.loads(ncclx(tmp_path, "--format", "sarif").stdout)["runs"][0]["results"]
    assert len(issues) == len(sarif)
    first = issues[0]
    assert set(first) == {"check_name", "description", "severity", "fingerprint", "location"}
    assert first["description"].startswith(first["check_name"] + ": ") and first["severity"] == "major"
    assert {i["location"]["path"] for i in issues} == {"csrc/comm.cpp", "launch.sh", "nb.ipynb", "train.py"}
    assert len({i["fingerprint"] for i in issues}) == len(issues)
    pos = first["location"]["positions"]
    assert set(pos) == {"begin", "end"} and set(pos["begin"]) == {"line", "column"}
    assert any(i["description"].endswith("(cell 3, line 4)") for i in issues if i["location"]["path"] == "nb.ipynb")
    empty = ncclx(tmp_path, "--format", "gitlab", "--select", "NCX113")
    assert empty.exit_code == 0 and json.loads(empty.stdout) == []


def test_docs_show_the_real_baseline_output(tmp_path: Path) -> None:
    doc = (ROOT / "docs" / "migrate.md").read_text(encoding="utf-8").split("## Baseline: fail only on new findings", 1)[1]
    block = doc.split("```console\n", 1)[1].split("```", 1)[0]
    update, check = block.split("$ git add .ncclx-baseline.json\n")
    work = tmp_path / "legacy-trainer"
    shutil.copytree(ROOT / "examples" / "legacy-trainer", work, ignore=shutil.ignore_patterns("__pycache__"))
    for shown, args, code in ((update, ["--update-baseline"], 0), (check, [], 0)):
        command, *lines = [ln for ln in shown.splitlines() if ln != "..."]
        assert command.startswith("$ ncclx migrate --baseline .ncclx-baseline.json" + (" --update-baseline" * bool(args)))
        got = ncclx(work, "-q", "--baseline", ".ncclx-baseline.json", *args)
        assert got.exit_code == code and got.stdout.splitlines()[-len(lines):] == lines, got.output
