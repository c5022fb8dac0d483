"""LegacyNCCLWarning: category, text, rule code, attribution to the user's line, and every
NCCLX_WARNINGS mode, seen by a real user script in a fresh interpreter."""

from __future__ import annotations

import pytest

from ncclx_migrate._envwarnings import PREFIXES
from ncclx_migrate._torch.envvars import ENV_VARS, EnvKind

from .conftest import line_of, warnings_in

IMPORTER = """
import warnings
warnings.simplefilter("always")  # our dedup, not Python's registry, makes it once
import ncclx_migrate  # <- import
print("ok")
"""


def _legacy(stderr: str):  # type: ignore[no-untyped-def]
    return [w for w in warnings_in(stderr) if w.category == "LegacyNCCLWarning"]


def test_rollback_toggle_warns_at_the_users_import_line(user_script) -> None:  # type: ignore[no-untyped-def]
    script = user_script(IMPORTER)
    res = script.run({"TORCH_DIST_USE_NCCL2": "0"})
    assert res.returncode == 0, res.stderr
    (w,) = _legacy(res.stderr)
    assert w.code == "NCX101"
    assert (w.file, w.line) == (str(script.path), line_of(script, "<- import"))
    assert 'rolls "nccl" back to legacy' in w.text and w.text.endswith(": unset it (`ncclx explain NCX101`)")


def test_falsey_spelling_is_reported_as_doing_nothing(user_script) -> None:  # type: ignore[no-untyped-def]
    res = user_script(IMPORTER).run({"TORCH_DIST_USE_NCCL2": "false"})
    (w,) = _legacy(res.stderr)
    assert w.code == "NCX101"
    assert "TORCH_DIST_USE_NCCL2='false' does nothing: \"nccl\" builds " in w.text and "; unset it" in w.text


def test_opt_in_is_not_a_finding_where_nccl2_exists(user_script) -> None:  # type: ignore[no-untyped-def]
    from ncclx_migrate._envwarnings import find_installed_torch

    torch = find_installed_torch()
    res = user_script(IMPORTER).run({"TORCH_DIST_USE_NCCL2": "1"})
    found = _legacy(res.stderr)
    if torch is not None and torch.has_nccl2:
        assert found == []
    else:
        assert [w.code for w in found] == ["NCX101"]


def test_every_env_table_row_warns_once_with_its_code(user_script) -> None:  # type: ignore[no-untyped-def]
    rows = [r for r in ENV_VARS if r.kind not in (EnvKind.TOGGLE, EnvKind.CURRENT)]
    env = {r.name: "1" for r in rows}
    script = user_script(IMPORTER)
    res = script.run(env)
    assert res.returncode == 0, res.stderr
    found = _legacy(res.stderr)
    by_name = {w.text.split("] ", 1)[1].split(" ", 1)[0].rstrip(","): w for w in found}
    assert len(found) == len(rows)  # once each, although the filter is "always"
    for row in rows:
        w = by_name[row.name]
        assert w.code == row.py_code, row.name
        assert (w.file, w.line) == (str(script.path), line_of(script, "<- import"))
        if row.kind is EnvKind.DEPRECATED:
            assert f"deprecated: add {row.replacement} (" in w.text
        elif row.replacement:
            assert f"use {row.replacement} (" in w.text


def test_env_prefilter_covers_every_row() -> None:
    # warn_environment() skips importing the table unless a variable starts with PREFIXES.
    for row in ENV_VARS:
        if row.kind is not EnvKind.CURRENT:
            assert row.name.startswith(PREFIXES), row.name


def test_no_findings_no_warnings_and_no_torch_import(user_script) -> None:  # type: ignore[no-untyped-def]
    script = user_script(IMPORTER + "import sys\nprint('torch' in sys.modules)\n")
    res = script.run({"NCCL_DEBUG": "INFO", "TORCH_NCCL2_RECONFIGURE_SHRINK_GROW": "1"})
    assert res.returncode == 0, res.stderr
    assert _legacy(res.stderr) == []
    assert res.stdout.split() == ["ok", "False"]


# --- NCCLX_WARNINGS ---------------------------------------------------------------

TWO_SITES = """
import warnings
import ncclx_migrate
from ncclx_migrate._warnings import warn_legacy

for _ in range(2):
    warn_legacy("NCX103", "demo finding")  # <- site A
warn_legacy("NCX103", "demo finding")  # <- site B
print("done")
"""


def test_mode_unset_once_per_finding_per_process(user_script) -> None:  # type: ignore[no-untyped-def]
    script = user_script(TWO_SITES)
    res = script.run()
    found = _legacy(res.stderr)
    assert [(w.code, w.line) for w in found] == [("NCX103", line_of(script, "<- site A"))]


def test_mode_once(user_script) -> None:  # type: ignore[no-untyped-def]
    script = user_script(TWO_SITES)
    res = script.run({"NCCLX_WARNINGS": "once"}, py_flags=("-W", "always"))
    assert [w.line for w in _legacy(res.stderr)] == [line_of(script, "<- site A")]


def test_mode_default_once_per_call_site(user_script) -> None:  # type: ignore[no-untyped-def]
    script = user_script(TWO_SITES)
    res = script.run({"NCCLX_WARNINGS": "default"})
    assert [w.line for w in _legacy(res.stderr)] == [
        line_of(script, "<- site A"),
        line_of(script, "<- site B"),
    ]


def test_mode_error_raises_at_the_first_finding(user_script) -> None:  # type: ignore[no-untyped-def]
    script = user_script(IMPORTER)
    res = script.run({"NCCLX_WARNINGS": "error", "TORCH_DIST_USE_NCCL2": "0"})
    assert res.returncode == 1
    assert "ok" not in res.stdout
    assert "LegacyNCCLWarning: [NCX101]" in res.stderr.splitlines()[-1]
    assert f'File "{script.path}", line {line_of(script, "<- import")}' in res.stderr


def test_mode_error_beats_a_W_ignore(user_script) -> None:  # type: ignore[no-untyped-def]
    res = user_script(IMPORTER.replace('warnings.simplefilter("always")', "")).run(
        {"NCCLX_WARNINGS": "error", "TORCH_DIST_USE_NCCL2": "0"}, py_flags=("-W", "ignore")
    )
    assert res.returncode == 1


def test_mode_ignore_beats_W_error(user_script) -> None:  # type: ignore[no-untyped-def]
    res = user_script(IMPORTER.replace('warnings.simplefilter("always")', "")).run(
        {"NCCLX_WARNINGS": "IGNORE", "TORCH_DIST_USE_NCCL2": "0"}, py_flags=("-W", "error")
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "ok"
    assert res.stderr == ""


def test_invalid_mode_says_so_once_and_warns_normally(user_script) -> None:  # type: ignore[no-untyped-def]
    script = user_script(TWO_SITES)
    res = script.run({"NCCLX_WARNINGS": "loud"})
    runtime = [w for w in warnings_in(res.stderr) if w.category == "RuntimeWarning"]
    assert len(runtime) == 1
    assert "NCCLX_WARNINGS='loud' is not one of error, ignore, once, default" in runtime[0].text
    assert runtime[0].file == str(script.path)
    assert len(_legacy(res.stderr)) == 1


# --- ordinary warnings machinery ------------------------------------------------------


def test_W_error_on_the_category_raises(user_script) -> None:  # type: ignore[no-untyped-def]
    res = user_script(IMPORTER.replace('warnings.simplefilter("always")', "")).run(
        {"TORCH_DIST_USE_NCCL2": "0"}, py_flags=("-W", "error::FutureWarning")
    )
    assert res.returncode == 1
    assert "LegacyNCCLWarning: [NCX101]" in res.stderr


def test_W_ignore_by_rule_code_prefix(user_script) -> None:  # type: ignore[no-untyped-def]
    # `-W ignore::ncclx_migrate.LegacyNCCLWarning` cannot work: Python resolves -W categories
    # before site-packages is importable.  The stable "[NCXnnn]" prefix is the handle instead.
    script = user_script(TWO_SITES)
    assert _legacy(script.run(py_flags=("-W", "ignore:[NCX103]")).stderr) == []
    assert _legacy(script.run(py_flags=("-W", "ignore:[NCX")).stderr) == []
    assert len(_legacy(script.run(py_flags=("-W", "ignore:[NCX122]")).stderr)) == 1


def test_filterwarnings_in_code_and_every_occurrence_under_error(user_script) -> None:  # type: ignore[no-untyped-def]
    script = user_script(
        """
        import warnings
        from ncclx_migrate import LegacyNCCLWarning
        from ncclx_migrate._warnings import warn_legacy
        warnings.filterwarnings("ignore", category=LegacyNCCLWarning)
        warn_legacy("NCX103", "hidden")
        warnings.resetwarnings()
        warnings.simplefilter("error", LegacyNCCLWarning)
        caught = 0
        for _ in range(2):
            try:
                warn_legacy("NCX103", "raised")
            except LegacyNCCLWarning as exc:
                caught += 1
                assert str(exc).startswith("[NCX103] raised"), exc
        print(caught)
        """
    )
    res = script.run()
    assert res.returncode == 0, res.stderr
    # an error is not a "shown" warning: the once-per-process rule does not swallow the second
    assert res.stdout.strip() == "2"
    assert _legacy(res.stderr) == []


# --- the toggle message in each world, read from torch's dist-info (no torch import) ----

_EPS_214 = ["mpi", "gloo", "nccl", "nccl-legacy", "nccl2", "nccl-lazy", "ucc", "xccl"]
WORLDS = {
    "2.13": ("torch-2.13.0+cpu.dist-info", None),
    "2.14": ("torch-2.14.1.dist-info", _EPS_214),
    "2.15": ("torch-2.15.0+cu132.dist-info", [*_EPS_214, "nccl4py"]),
    # the announced removal: same registry without the rollback name
    "2.16": ("torch-2.16.0.dist-info", [n for n in _EPS_214 if n != "nccl-legacy"]),
}


@pytest.mark.parametrize(
    ("world", "value", "expected"),
    [
        ("2.13", "0", "TORCH_DIST_USE_NCCL2=0 does nothing on torch 2.13, rolls 2.15 back to legacy"),
        ("2.14", "0", "TORCH_DIST_USE_NCCL2=0 does nothing on torch 2.14, rolls 2.15 back to legacy"),
        ("2.15", "0", 'TORCH_DIST_USE_NCCL2=0 rolls "nccl" back to legacy (a 2.15-only rollback)'),
        ("2.16", "0", "TORCH_DIST_USE_NCCL2=0 does nothing on torch 2.16 (its rollback is gone)"),
        ("2.14", "true", """TORCH_DIST_USE_NCCL2='true' does nothing: "nccl" builds legacy on 2.14; unset it"""),
        ("2.15", "false", """TORCH_DIST_USE_NCCL2='false' does nothing: "nccl" builds nccl2 on 2.15; unset it"""),
        ("2.13", "1", "TORCH_DIST_USE_NCCL2=1 does nothing on torch 2.13 (no nccl2)"),
        ("2.15", "1", None),
        ("2.16", "1", None),
    ],
)
def test_toggle_message_in_each_world(user_script, world, value, expected) -> None:  # type: ignore[no-untyped-def]
    script = user_script(IMPORTER)
    # A torch dist-info next to the script comes first on sys.path: the import-time check
    # reads it (version from the name, backends from entry_points.txt) as it would torch's.
    name, eps = WORLDS[world]
    dist_info = script.path.parent / name
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: torch\nVersion: {world}.0\n")
    if eps is not None:
        lines = [f"{n} = torch.distributed.distributed_c10d:_register_{n}" for n in eps]
        (dist_info / "entry_points.txt").write_text(
            "[torch.distributed.backends]\n" + "\n".join(lines) + "\n"
        )
    res = script.run({"TORCH_DIST_USE_NCCL2": value})
    assert res.returncode == 0, res.stderr
    found = _legacy(res.stderr)
    if expected is None:
        assert found == []
    else:
        (w,) = found
        assert w.code == "NCX101"
        assert expected in w.text, w.text
