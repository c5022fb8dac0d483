"""Other nodes' text never reaches the terminal raw (issue 37): a hostname, an environment value
and a message from another node's saved report holding CSI, OSC 0/8/52 and lone C1 controls are
shown escaped, as Python's repr writes them, by `ncclx doctor merge` on a real terminal."""

from __future__ import annotations

import json
from pathlib import Path

from ..conftest import on_a_terminal
from ..report.test_other_machines_text import EVIL, RAW, SHOWN
from .conftest import check, doctor_json


def test_merge_shows_control_sequences_never_sends_them(tmp_path: Path) -> None:
    plain = doctor_json("--level", "static", "--check", "env-vars", "--check", "legacy-toggle")
    plain.pop("_rc")
    odd = json.loads(json.dumps(plain))
    odd["host"] = "node" + EVIL
    env = check(odd, "env-vars")
    env["status"], env["message"] = "warn", "NCCL_SOCKET_IFNAME=eth0" + EVIL + " is set"
    (tmp_path / "a.json").write_text(json.dumps(plain))
    (tmp_path / "b.json").write_text(json.dumps(odd))
    run = on_a_terminal("doctor", "merge", str(tmp_path / "a.json"), str(tmp_path / "b.json"),
                        env={"COLUMNS": "400", "NO_COLOR": "1"})
    for raw in RAW:
        assert raw not in run.terminal, (raw, run.terminal)
    screen = run.terminal.replace("\r\n", "\n")
    assert f"NCCL_SOCKET_IFNAME=eth0{SHOWN} is set" in screen, screen
    assert f"node{SHOWN}" in screen, screen
