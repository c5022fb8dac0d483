"""Direct tests of the non-Python scanners: file kinds, messages, options."""

from __future__ import annotations

import pytest

from ncclx_migrate._migrate._files import file_kind, scan
from ncclx_migrate._migrate._model import FixKind, Options
from ncclx_migrate._torch.envvars import ENV_VARS, EnvKind


@pytest.mark.parametrize(
    ("path", "text", "kind"),
    [
        ("launch.sh", "", "shell"),
        ("jobs/train.sbatch", "", "shell"),
        ("run.slurm", "", "shell"),
        ("x.bash", "", "shell"),
        (".envrc", "", "shell"),
        ("bin/launch", "#!/usr/bin/env bash\necho hi\n", "shell"),
        ("bin/launch", "#!/bin/sh\n", "shell"),
        ("bin/launch", "#!/usr/bin/python3\n", None),
        ("bin/launch", "no shebang\n", None),
        ("Dockerfile", "", "dockerfile"),
        ("docker/train.Dockerfile", "", "dockerfile"),
        ("Dockerfile.cuda", "", "dockerfile"),
        ("Containerfile", "", "dockerfile"),
        ("k8s/job.yaml", "", "yaml"),
        ("compose.yml", "", "yaml"),
        (".env", "", "dotenv"),
        ("prod.env", "", "dotenv"),
        ("nb/a.ipynb", "{}", "notebook"),
        ("README.md", "", None),
        ("setup.cfg", "", None),
        ("csrc/comm.cpp", "", "cpp"),
        ("csrc/kernels.cu", "", "cpp"),
        ("include/ext/compat.HPP", "", "cpp"),
        ("src/a.cc", "", "cpp"),
        ("src/a.cuh", "", "cpp"),
        ("src/a.c", "", None),
        ("Makefile", "", "make"),
        ("sub/GNUmakefile", "", "make"),
        ("rules.mk", "", "make"),
        ("makefile.py", "", None),
        ("tox.ini", "", "tox"),
        ("setup.ini", "", None),
        ("pyproject.toml", "", "pytest_env"),
        ("sub/pytest.ini", "", "pytest_env"),
        ("Cargo.toml", "", None),
        ("Jenkinsfile", "", "jenkins"),
        ("ci/nightly.Jenkinsfile", "", "jenkins"),
        ("Jenkinsfile.gpu", "", "jenkins"),
        ("jobs/train.nomad", "", "hcl"),
        ("jobs/train.nomad.hcl", "", "hcl"),
        ("infra/main.tf", "", "hcl"),
    ],
)
def test_file_kind(path: str, text: str, kind: str | None) -> None:
    assert file_kind(path, text) == kind


def test_unhandled_file_is_none() -> None:
    assert scan("notes.txt", "export TORCH_DIST_USE_NCCL2=0\n", Options()) is None


def _one(path: str, text: str, options: Options | None = None):  # type: ignore[no-untyped-def]
    result = scan(path, text, options or Options())
    assert result is not None
    assert len(result.findings) == 1, result.findings
    return result.findings[0]


@pytest.mark.parametrize("value", ["false", "False", "no", "off", '""'])
def test_falsey_toggle_says_it_does_not_roll_back(value: str) -> None:
    f = _one("a.sh", f"export TORCH_DIST_USE_NCCL2={value}\n")
    assert f.code == "NCX201"
    assert "does not roll back" in f.message and 'only the literal "0" rolls back' in f.detail
    assert f.fix is FixKind.UNSAFE


def test_rollback_toggle_message_and_position() -> None:
    f = _one("a.sh", "#!/bin/bash\n  export TORCH_DIST_USE_NCCL2=0\n")
    assert (f.line, f.column) == (2, 10)
    assert "rolls back to legacy:" in f.message and "2.15 only" in f.detail
    assert f.fix is FixKind.UNSAFE


def test_opt_in_is_redundant_only_from_2_15() -> None:
    text = "export TORCH_DIST_USE_NCCL2=1\n"
    f = _one("a.sh", text)
    assert "redundant" in f.message and f.fix is FixKind.UNSAFE
    for target in ((2, 14), (2, 13)):
        result = scan("a.sh", text, Options(target_torch=target))
        assert result is not None and result.findings == []


def test_removing_the_toggle_is_never_safe() -> None:
    result = scan("a.sh", "export TORCH_DIST_USE_NCCL2=1\n", Options(apply_safe=True))
    assert result is not None and result.new_text is None
    assert result.findings[0].applied is False


def test_select_and_ignore_prefixes() -> None:
    text = "export TORCH_DIST_USE_NCCL2=0\nexport TORCH_NCCL_TRACE_BUFFER_SIZE=1\nB=nccl-legacy\n"
    codes = lambda o: [f.code for f in scan("a.sh", text, o).findings]  # type: ignore[union-attr]  # noqa: E731
    assert codes(Options()) == ["NCX201", "NCX203", "NCX202"]
    assert codes(Options(select=("NCX203",))) == ["NCX203"]
    assert codes(Options(ignore=("NCX20",))) == []
    assert codes(Options(select=("NCX2",), ignore=("NCX201",))) == ["NCX203", "NCX202"]


def test_every_deprecated_and_ignored_row_is_reported_in_files() -> None:
    """The scanners read the one env table: each row with a file code is found."""
    rows = [r for r in ENV_VARS if r.file_code and r.kind is not EnvKind.CURRENT
            and r.kind is not EnvKind.TOGGLE]
    text = "".join(f"export {r.name}=1\n" for r in rows)
    result = scan("a.sh", text, Options())
    assert result is not None
    reported = {text.splitlines()[f.line - 1].split("=")[0][7:] for f in result.findings}
    # Rows whose replacement is itself set in the text are legitimately quiet.
    assigned = {r.name for r in rows}
    expected = {r.name for r in rows if r.replacement not in assigned}
    assert reported == expected
    assert all(f.code == "NCX203" for f in result.findings)


def test_replacement_already_set_means_nothing_left() -> None:
    text = "export TORCH_NCCL_TRACE_BUFFER_SIZE=1\nexport TORCH_FR_BUFFER_SIZE=1\n"
    result = scan("a.sh", text, Options())
    assert result is not None and result.findings == []


def test_file_without_nccl_text_is_untouched() -> None:
    result = scan("a.sh", "echo hello\n", Options(apply_safe=True, apply_unsafe=True))
    assert result is not None and result.findings == [] and result.new_text is None


def test_unterminated_quote_does_not_crash() -> None:
    result = scan("a.sh", "export TORCH_DIST_USE_NCCL2='0\necho $(\n", Options())
    assert result is not None and result.error is None


def test_dockerfile_comment_above_suppresses() -> None:
    text = "FROM x\n# ncclx: ignore[NCX201]\nENV TORCH_DIST_USE_NCCL2=0\nENV TORCH_DIST_USE_NCCL2=0\n"
    result = scan("Dockerfile", text, Options())
    assert result is not None
    assert [(f.line, f.code) for f in result.findings] == [(4, "NCX201")]


def _nb(*sources: str) -> str:
    import json

    cells = [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
              "source": s.splitlines(keepends=True)} for s in sources]
    return json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 4},
                      indent=1) + "\n"


def test_notebook_findings_point_into_the_file_and_name_the_cell() -> None:
    text = _nb("x = 1\n", "import os\nos.environ['TORCH_NCCL_NAN_CHECK'] = '1'\n%env TORCH_DIST_USE_NCCL2=0\n")
    result = scan("nb.ipynb", text, Options())
    assert result is not None and result.error is None
    f = next(f for f in result.findings if f.code == "NCX201")
    assert f.cell is not None and (f.cell.number, f.cell.line, f.cell.column) == (2, 3, 6)
    assert not f.message.startswith("cell")  # the position says where; the message what
    lines = text.splitlines()
    assert "%env TORCH_DIST_USE_NCCL2=0" in lines[f.line - 1]
    assert lines[f.line - 1][f.column - 1 :].startswith("TORCH_DIST_USE_NCCL2")


def test_notebook_names_resolve_across_cells() -> None:
    text = _nb("import torch.distributed as dist\n", "ok = dist.get_backend() == 'nccl'\n")
    result = scan("nb.ipynb", text, Options())
    assert result is not None
    assert [f.code for f in result.findings] == ["NCX110"]
    alone = scan("nb.ipynb", _nb("ok = dist.get_backend() == 'nccl'\n"), Options())
    assert alone is not None and alone.findings == []  # `dist` is not torch's here


def test_invalid_notebook_is_a_one_line_error() -> None:
    result = scan("nb.ipynb", '{"cells": [', Options())
    assert result is not None and result.error is not None
    assert "\n" not in result.error and "invalid JSON" in result.error
    result = scan("nb.ipynb", '{"metadata": {}}', Options())
    assert result is not None and result.error is not None and "cells" in result.error


def test_notebook_shell_lines_are_fixed_in_place() -> None:
    text = _nb("!TORCH_DIST_USE_NCCL2=0 torchrun train.py --dist-backend nccl-legacy\n")
    result = scan("nb.ipynb", text, Options(apply_safe=True, apply_unsafe=True))
    assert result is not None and result.new_text is not None
    assert '"!torchrun train.py --dist-backend nccl\\n"' in result.new_text


def test_explicit_nccl2_follows_the_target() -> None:
    text = "torchrun train.py --dist-backend nccl2\n"
    on_215 = scan("run.sh", text, Options())
    assert on_215 is not None and [(f.code, f.fix) for f in on_215.findings] == [("NCX204", FixKind.UNSAFE)]
    on_214 = scan("run.sh", text, Options(target_torch=(2, 14)))
    assert on_214 is not None and on_214.findings == []  # the 2.14 way to get nccl2
    on_213 = scan("run.sh", text, Options(target_torch=(2, 13)))
    assert on_213 is not None
    (f,) = on_213.findings
    assert f.code == "NCX204" and f.fix is FixKind.NONE and "Unknown backend type" in f.detail
    assert '"nccl2" does not exist on torch 2.13' in f.message


def test_image_tags_and_names_are_not_backends() -> None:
    text = "image: trainer:nccl-legacy\nname: nccl2\nrun: cuda-tests:nccl2\n"
    result = scan("job.yaml", text, Options())
    assert result is not None
    assert result.findings == []


def test_docs_list_the_registered_kinds() -> None:
    """docs/migrate-files.md's "Which files" table is the registry's (the one list of kinds)."""
    from pathlib import Path

    from ncclx_migrate._migrate._files._kinds import markdown_table

    page = (Path(__file__).resolve().parents[2] / "docs" / "migrate-files.md").read_text(encoding="utf-8")
    table = page.split("<!-- kinds: generated from _files/_kinds.py markdown_table() -->\n", 1)[1].split(
        "<!-- /kinds -->", 1)[0]
    assert table == markdown_table(), "rewrite the table in docs/migrate-files.md from markdown_table()"


def test_shell_region_the_grammar_cannot_read_is_skipped_with_one_warning() -> None:
    # `1#` is a word to bash, an error to tree-sitter-bash: that command is skipped, the rest
    # is read (NCX201 on line 1), and nothing is fixed while a skipped part may set names.
    text = "export TORCH_DIST_USE_NCCL2=0\nNCCL_BLOCKING_WAIT=1# x\nexport NCCL_DEBUG=INFO\n"
    result = scan("a.sh", text, Options(apply_safe=True, apply_unsafe=True))
    assert result is not None and result.error is None and result.new_text is None
    assert [(f.line, f.code) for f in result.findings] == [(1, "NCX201")]
    assert result.warnings == ["2: cannot parse shell from column 1 (tree-sitter-bash): lines 2-2 are skipped, "
                               "and no fix is applied to the file; fix the syntax there"]


def test_unreadable_region_without_nccl_costs_nothing() -> None:
    text = "export TORCH_DIST_USE_NCCL2=0\nX=1# y\n"
    result = scan("a.sh", text, Options(apply_safe=True, apply_unsafe=True))
    assert result is not None and result.warnings == [] and result.new_text is not None


def test_yaml_flow_collection_the_grammar_cannot_read_is_skipped_with_one_warning() -> None:
    text = 'env: {TORCH_DIST_USE_NCCL2: "0", X: [1,\nb: 2\nother: {backend: nccl-legacy}\n'
    result = scan("a.yaml", text, Options(apply_safe=True, apply_unsafe=True))
    assert result is not None and result.error is None and result.new_text is None
    assert [(f.line, f.code) for f in result.findings] == [(3, "NCX202")]
    assert result.warnings == ["1: cannot parse YAML from column 6 (tree-sitter-yaml): lines 1-1 are skipped, "
                               "and no fix is applied to the file; fix the syntax there"]
