"""Text from other repositories and jobs never reaches the terminal raw (issue 37): a project
name, an owner, a path, a job label and a hostname holding CSI, OSC 0/8/52 and lone C1 controls
are shown escaped, as Python's repr writes them, by `ncclx report` on a real terminal."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conftest import on_a_terminal

# Set the window title; a hyperlink; write the clipboard (tmux and many terminals obey it);
# clear the screen; a lone C1 CSI; a DCS string.
EVIL = "\x1b]0;pwned\x07\x1b]8;;https://x.invalid\x1b\\\x1b]52;c;aGk=\x07\x1b[2J\x9b31m\x90dcs\x1b\\"
SHOWN = "\\x1b]0;pwned\\x07\\x1b]8;;https://x.invalid\\x1b\\\\x1b]52;c;aGk=\\x07\\x1b[2J\\x9b31m\\x90dcs\\x1b\\"
RAW = ("\x1b", "\x07", "\x9b", "\x90")


def _hostile_fleet(fleet: tuple[Path, dict[str, Any]], tmp_path: Path) -> Path:
    folder, _ = fleet
    tmp_path.mkdir()
    repo = json.loads((folder / "reports" / "repos" / "alpha.json").read_text())
    repo["project"]["name"] = "alpha" + EVIL
    repo["project"]["codeowners"]["rules"] = [["*", ["@org/team" + EVIL]]]
    for f in repo["findings"]:
        f["path"] = "train" + EVIL + ".py"
    job = json.loads((folder / "reports" / "jobs" / "legacy.json").read_text())
    job["label"], job["host"] = "job" + EVIL, "node" + EVIL
    (tmp_path / "repo.json").write_text(json.dumps(repo))
    (tmp_path / "job.json").write_text(json.dumps(job))
    (tmp_path / ("bad" + EVIL.replace("/", "|") + ".json")).write_text("[]")  # a skipped input's own file name
    return tmp_path


def test_report_shows_control_sequences_never_sends_them(fleet: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    inputs = _hostile_fleet(fleet, tmp_path / "in")
    run = on_a_terminal("report", str(inputs), terminal=("stdout", "stderr"))
    assert run.returncode == 0, run.terminal
    for raw in RAW:
        assert raw not in run.terminal, (raw, run.terminal)
    screen = run.terminal.replace("\r\n", "\n")
    assert f"still set in 1 repository: alpha{SHOWN}" in screen
    assert f"1 job still builds legacy NCCL: job{SHOWN}" in screen
    assert "@org/team\\x1b]0;pwned" in screen  # the owners table (cut at its column width)
    assert f"skipped {inputs}/bad{SHOWN.replace('/', '|')}.json: not an ncclx report" in screen


def test_report_json_keeps_the_text_as_data(fleet: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    """The JSON carries the names as they are, every control escaped by JSON (C1 too)."""
    inputs = _hostile_fleet(fleet, tmp_path / "in")
    run = on_a_terminal("report", str(inputs), "--format", "json", terminal=("stdout",))
    for raw in RAW:
        assert raw not in run.terminal
    doc = json.loads(run.terminal)
    assert doc["repositories"][0]["name"] == "alpha" + EVIL


def test_report_page_holds_no_control_character(fleet: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    """The page's data carries the sequences as JSON escapes (C1 too), which the page's script
    shows as repr writes them (the script is the fr page's: tests/pages/test_fr_page.py)."""
    inputs = _hostile_fleet(fleet, tmp_path / "in")
    run = on_a_terminal("report", str(inputs), "--html", str(tmp_path / "page.html"), terminal=("stderr",))
    assert run.returncode == 0, run.terminal
    page = (tmp_path / "page.html").read_text(encoding="utf-8")
    for raw in RAW:
        assert raw not in page, raw
    assert "alpha\\u001b]0;pwned\\u0007" in page and "\\u009b31m\\u0090dcs" in page  # JSON escapes
