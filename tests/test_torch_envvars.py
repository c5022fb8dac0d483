"""The env-var table is the one source of truth: its rows are consistent."""

from __future__ import annotations

from ncclx_migrate._torch.envvars import (
    ENV_VARS,
    EnvKind,
    Fix,
    env_findings,
    lookup,
)
from ncclx_migrate._torch.releases import toggle_meaning


def test_names_are_unique() -> None:
    names = [v.name for v in ENV_VARS]
    assert len(names) == len(set(names))


def test_deprecated_rows_name_a_replacement_and_codes() -> None:
    for v in ENV_VARS:
        if v.kind is EnvKind.DEPRECATED:
            assert v.replacement, v.name
            assert v.fix is Fix.ADD, f"{v.name}: removing a variable is never a safe fix"
        if v.kind is not EnvKind.CURRENT:
            assert v.py_code.startswith("NCX1") and v.file_code.startswith("NCX2"), v.name
        assert v.evidence and v.why


def test_only_literal_zero_and_one_count() -> None:
    assert toggle_meaning("0") == "rollback"
    assert toggle_meaning("1") == "opt-in"
    for spelling in ("false", "False", "no", "", " 0", "00"):
        assert toggle_meaning(spelling) == "no-effect"
    assert toggle_meaning(None) == "unset"


def test_env_findings_lists_set_variables_in_table_order() -> None:
    env = {"TORCH_NCCL_ENABLE_MONITORING": "1", "TORCH_DIST_USE_NCCL2": "0", "PATH": "/bin"}
    assert [v.name for v in env_findings(env)] == ["TORCH_DIST_USE_NCCL2", "TORCH_NCCL_ENABLE_MONITORING"]
    assert lookup("TORCH_NCCL_TRACE_BUFFER_SIZE").replacement == "TORCH_FR_BUFFER_SIZE"  # type: ignore[union-attr]
